package maintenance_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/formats"
	"github.com/tablekeep/tablekeep/shared/internal/fakeclock"
	"github.com/tablekeep/tablekeep/shared/lance/lancetest"
	"github.com/tablekeep/tablekeep/shared/lock"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/queue"
	"github.com/tablekeep/tablekeep/shared/table"
)

// TestConstructorsWireFormats: a runner, cleaner and sweep built by the
// formats constructors without a Sources of their own maintain, clean and
// sweep a registered Lance dataset (no ErrUnknownFormat), and the same
// verbs built bare still maintain a tablekeep table (OpenTableSource is
// the default) while refusing the Lance dataset with ErrUnknownFormat,
// nothing deleted. formats.Open opens both formats.
func TestConstructorsWireFormats(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	lancetest.Create(t, filepath.Join(dir, "wh"), "ds", 6, "")
	store, err := objstore.NewDisk(dir)
	if err != nil {
		t.Fatal(err)
	}
	clock := fakeclock.New(time.Now().Add(2 * time.Hour))
	p := maintenance.Policy{Grace: time.Hour, KeepLast: 1, RangeVersions: 8}
	lref := maintenance.TableRef{Name: "ds", Root: "wh/ds.lance/", Policy: p, Format: formats.Lance}
	cat := &memCatalog{refs: []maintenance.TableRef{lref}}
	q := queue.NewEmbedded(queue.EmbeddedOptions{})
	bare := func() *maintenance.Runner {
		return &maintenance.Runner{Store: store, Catalog: cat, Locker: lock.NewInProcess(clock), Queue: maintenance.QueueEnqueuer{Q: q},
			Clock: clock, Owner: "test", KeepAlive: -1}
	}
	before := listing(t, store, "wh/")
	if _, err := bare().MaintainTable(ctx, lref); !errors.Is(err, maintenance.ErrUnknownFormat) {
		t.Fatalf("bare runner on a Lance dataset: %v, want ErrUnknownFormat", err)
	}
	if err := sameListing(before, listing(t, store, "wh/")); err != nil {
		t.Fatalf("bare runner wrote: %v", err)
	}
	rep, err := formats.NewRunner(bare()).MaintainTable(ctx, lref)
	if err != nil || rep.Skipped != "" || rep.Prune.Latest == 0 || len(rep.Prune.Ranges) == 0 {
		t.Fatalf("constructed runner: %+v %v", rep, err)
	}
	cl := formats.NewCleaner(&maintenance.Cleaner{Store: store, Tables: cat, Requeue: maintenance.QueueEnqueuer{Q: q},
		OpenOpts: table.Options{Clock: clock}})
	if st, err := maintenance.DrainLocal(ctx, q, cl, nil); err != nil || st.Failed > 0 || st.Succeeded == 0 {
		t.Fatalf("constructed cleaner: %+v %v", st, err)
	}
	sr, err := maintenance.SweepTable(ctx, store, lref, formats.SweepOptions(maintenance.SweepOptions{Now: clock.Now(), DryRun: true}))
	if err != nil || sr.Skipped != "" || sr.Manifests == 0 {
		t.Fatalf("constructed sweep: %+v %v", sr, err)
	}
	if src, err := formats.Open(ctx, store, maintenance.TableRef{Name: "t", Root: "wh/t/"}); err != nil {
		t.Fatalf("formats.Open of a tablekeep table: %v", err)
	} else if _, ok := src.(maintenance.TableBacked); !ok {
		t.Fatalf("formats.Open of a tablekeep table: %T, want a TableBacked source", src)
	}
}
