package lance_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/internal/fakeclock"
	"github.com/tablekeep/tablekeep/shared/lance"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/table"
)

// TestLanceLeaseChecks: a Lance dataset's leases live in the sidecar
// (_tablekeep/leases/, names as tablekeep's); taking one refuses a version
// in the future, below the sidecar floor, or (not the latest) written
// longer ago than LeaseWindow; the latest is always leasable. Lance's own
// listing of the dataset is unchanged by a lease.
func TestLanceLeaseChecks(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	c := createDataset(t, dir, 3, "")
	store, err := objstore.NewDisk(dir)
	if err != nil {
		t.Fatal(err)
	}
	src := lance.NewSource(store, "t.lance")
	vfs, err := src.Dataset().ListVersions(ctx)
	if err != nil || len(vfs) < 3 {
		t.Fatalf("versions %v %v", vfs, err)
	}
	clk := fakeclock.New(time.Now())
	d := src.LeaseDirAt(clk, nil)
	if d.Dir != "t.lance/"+lance.LeasesDir {
		t.Fatalf("lease dir %q", d.Dir)
	}
	first := vfs[0].Version
	l, err := d.Acquire(ctx, first, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	set, err := d.Read(ctx)
	if pin, ok := set.Pin(clk.Now(), 0); err != nil || !ok || pin.Version != first || pin.ID != l.ID() {
		t.Fatalf("pin %+v %v %v", pin, ok, err)
	}
	if _, err := d.Acquire(ctx, c.Latest+1, time.Hour); !errors.Is(err, table.ErrInvalidLease) {
		t.Errorf("future version: %v", err)
	}
	clk.Advance(lance.LeaseWindow + time.Minute)
	if _, err := d.Acquire(ctx, first, time.Hour); !errors.Is(err, table.ErrLeaseWindow) {
		t.Errorf("old version: %v, want ErrLeaseWindow", err)
	}
	if _, err := d.Acquire(ctx, c.Latest, time.Hour); err != nil {
		t.Errorf("latest: %v", err)
	}
	if err := src.SetFloor(ctx, c.Latest); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Acquire(ctx, vfs[1].Version, time.Hour); !errors.Is(err, table.ErrVersionPruned) {
		t.Errorf("below the floor: %v", err)
	}
	after, err := src.Dataset().ListVersions(ctx)
	if err != nil || len(after) != len(vfs) {
		t.Fatalf("Lance versions changed: %v %v", after, err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
