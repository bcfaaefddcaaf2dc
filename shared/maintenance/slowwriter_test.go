package maintenance_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/internal/fakeclock"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/queue"
	"github.com/tablekeep/tablekeep/shared/table"
)

// TestSlowWriterCommitBelowFloor: a writer passes its stale-read check,
// then stalls in its manifest put past the grace window while maintenance
// prunes the version number it is about to write. Its put-if-absent then
// succeeds on a pruned name: the write must not be reported as committed
// unless it is visible.
func TestSlowWriterCommitBelowFloor(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, t.TempDir(), testPolicy(), queue.EmbeddedOptions{})
	ts := fakeclock.NewStore(e.disk, e.clock)
	e.disk = ts
	e.faulty = objstore.NewFaulty(ts)
	e.runner.Store, e.clean.Store = e.faulty, e.faulty
	a := e.create(t)
	model := map[string]string{}
	for _, k := range []string{"a", "b", "c"} {
		upsert(t, a, k, "1")
		model[k] = "1"
	}
	wf := objstore.NewFaulty(ts)
	w, err := table.Open(ctx, wf, e.ref.Root, e.opts())
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"d", "e", "f", "g", "h", "i", "j", "k"} {
		upsert(t, a, k, "2")
		model[k] = "2"
	}
	stalled := false
	wf.SetBefore(func(n int64, op objstore.Op) error {
		if stalled || op.Kind != objstore.KindPut || !op.Conditional || !strings.Contains(op.Key, table.VersionsPrefix) {
			return nil
		}
		stalled = true
		// The writer is paused for two hours; maintenance runs meanwhile.
		e.clock.Advance(2 * time.Hour)
		if _, err := e.runner.MaintainTable(ctx, e.ref); err != nil {
			t.Errorf("maintain: %v", err)
		}
		e.drain(t)
		return nil
	})
	rec := kv("slow", "writer")
	res, err := w.Upsert(ctx, rec)
	rec.Release()
	if !stalled {
		t.Fatal("writer never reached its manifest put")
	}
	floor, _ := a.Floor(ctx)
	if err == nil {
		model["slow"] = "writer"
		t.Logf("slow writer committed version %d (floor %d)", res.Version, floor)
	} else if !errors.Is(err, table.ErrStaleRead) {
		t.Fatalf("slow writer: %v, want success or ErrStaleRead", err)
	}
	if err := diffRows(latestRows(t, e.open(t)), model); err != nil {
		t.Fatalf("acknowledged write lost: %v", err)
	}
}
