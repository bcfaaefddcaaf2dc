package maintenance_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	fleetidx "github.com/tablekeep/tablekeep/shared/fleet"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/queue"
	"github.com/tablekeep/tablekeep/shared/table"
)

// TestCorruptChangeRecordFailsRange pins docs/format.md 8.3 step 7 (issue
// 19 item 9): a change record that exists but does not decode is not
// rebuilt as a missing one; the cleaner fails the range on it with
// ErrCorruptObject, not permanently (the queue retries it), and deletes
// nothing.
func TestCorruptChangeRecordFailsRange(t *testing.T) {
	ctx := context.Background()
	p := crashPolicy()
	h := buildHistory(t, p).withCleanupPending(t, p)
	first, err := maintenance.DecodeRangeMessage(h.bodies[0])
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "s")
	copyDir(t, h.dir, dir)
	e := newEnv(t, dir, p, queue.EmbeddedOptions{})
	e.clock.Advance(2 * time.Hour)
	tb := e.open(t)
	key := tb.Root() + table.ChangeKey(first.From+1)
	if err := e.disk.Put(ctx, key, []byte("TKC1\x01 not a change record")); err != nil {
		t.Fatal(err)
	}
	before := listing(t, e.disk, "")
	_, err = e.clean.Clean(ctx, h.bodies[0])
	if !errors.Is(err, table.ErrCorruptObject) || errors.Is(err, queue.ErrPermanent) {
		t.Fatalf("corrupt change record: %v, want ErrCorruptObject, not permanent", err)
	}
	if err := sameListing(before, listing(t, e.disk, "")); err != nil {
		t.Fatalf("cleaner deleted something: %v", err)
	}
	// The planner does not rebuild it: it exists.
	if _, err := fleetidx.New(e.runner, fleetidx.Options{}).Run(ctx); err != nil {
		t.Logf("pass: %v", err)
	}
	if b, err := e.disk.Get(ctx, key); err != nil || string(b) != "TKC1\x01 not a change record" {
		t.Fatalf("corrupt record replaced or removed by a pass: %q, %v", b, err)
	}
}
