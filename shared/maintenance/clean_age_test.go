package maintenance_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/dataset"
	"github.com/tablekeep/tablekeep/shared/internal/fakeclock"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/table"
)

// ageEnv is a table of a few versions on a store dated by the fake clock,
// its writers' grace w, and one prune range recorded (not drained) by a
// maintenance 3 h later.
func ageEnv(t *testing.T, w time.Duration) (*env, *fakeclock.Store, []byte) {
	t.Helper()
	e, ts := newTimedEnv(t, testPolicy())
	tb, err := table.Create(context.Background(), e.disk, e.ref.Root, kvSchema, "name", table.Options{Clock: fakeclock.NoSleep(e.clock), Grace: w, Format: e.format})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "b", "c", "d", "e", "f", "g"} {
		upsert(t, tb, k, "1")
		e.clock.Advance(time.Minute)
	}
	e.clock.Advance(3 * time.Hour)
	rec := &bodies{}
	e.runner.Queue = rec
	if _, err := e.runner.MaintainTable(context.Background(), e.ref); err != nil {
		t.Fatal(err)
	}
	bs := rec.take()
	if len(bs) == 0 {
		t.Fatal("no range enqueued")
	}
	e.runner.Queue = maintenance.QueueEnqueuer{Q: e.q}
	return e, ts, bs[0]
}

// forgeRemoval rewrites the first change record of body's range to also
// name keys (relative to the root) as removed files.
func forgeRemoval(t *testing.T, e *env, st objstore.Store, body []byte, keys ...string) {
	t.Helper()
	ctx := context.Background()
	msg, err := maintenance.DecodeRangeMessage(body)
	if err != nil {
		t.Fatal(err)
	}
	tb := table.Handle(st, e.ref.Root, e.opts())
	r := msg.From + 1
	cr, err := tb.ChangeRecord(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		cr.Removed = append(cr.Removed, dataset.RemovedFile{Key: k, Since: msg.From})
	}
	if err := st.Put(ctx, e.ref.Root+table.ChangeKey(r), forgeChange(cr)); err != nil {
		t.Fatal(err)
	}
}

// TestCleanerKeepsUploadInFlight (issue 29 item 5): a change record forged
// to name the data file a writer has just uploaded and not yet committed.
// The cleaner runs while the writer's manifest PUT is in flight (after the
// guard could see it), and the commit lands. The cleaner keeps the file
// (younger than R >= W + SafetyMargin), finishes the range, and the latest
// version reads. Before the fix the file was deleted and the latest failed
// with "object does not exist".
func TestCleanerKeepsUploadInFlight(t *testing.T) {
	ctx := context.Background()
	e, ts, body := ageEnv(t, time.Hour)
	model := latestRows(t, e.open(t))
	wf := objstore.NewFaulty(ts)
	w, err := table.Open(ctx, wf, e.ref.Root, e.opts())
	if err != nil {
		t.Fatal(err)
	}
	var upload string
	var res *maintenance.CleanResult
	wf.SetBefore(func(_ int64, op objstore.Op) error {
		rel := strings.TrimPrefix(op.Key, e.ref.Root)
		switch {
		case op.Kind == objstore.KindPut && strings.HasPrefix(rel, table.DataPrefix):
			upload = rel
		case op.Kind == objstore.KindPut && op.Conditional && strings.HasPrefix(rel, table.VersionsPrefix) && res == nil:
			if upload == "" {
				t.Fatal("manifest PUT before any data file")
			}
			// The writer is 10 min into its window; the cleaner runs now.
			e.clock.Advance(10 * time.Minute)
			forgeRemoval(t, e, ts, body, upload)
			r, err := e.clean.Clean(ctx, body)
			if err != nil {
				t.Fatalf("clean: %v", err)
			}
			res = &r
		}
		return nil
	})
	upsert(t, w, "slow", "writer")
	if res == nil {
		t.Fatal("writer never reached its manifest PUT")
	}
	model["slow"] = "writer"
	t.Logf("cleaner: %+v", *res)
	if res.KeptYoung != 1 || res.VersionsDeleted == 0 {
		t.Errorf("cleaner kept %d young files and deleted %d versions, want 1 kept and the range finished", res.KeptYoung, res.VersionsDeleted)
	}
	if _, err := ts.Head(ctx, e.ref.Root+upload); err != nil {
		t.Errorf("the writer's upload %s: %v", upload, err)
	}
	if err := diffRows(latestRows(t, e.open(t)), model); err != nil { // fails if the latest does not read
		t.Fatal(err)
	}
}

// TestCleanerAgeBound (issue 29 item 5, docs/reliability.md "Time"): a
// forged change record names two orphan data files, one exactly
// R = max(P, W) + SafetyMargin old when the cleaner reads its clock, one
// 1 ms older; W is read from the table's manifest (2 h, above P = 1 h,
// and the handle's default). The older is deleted, the other kept
// (CleanResult.KeptYoung) and the range finished; the sweep deletes the
// kept one once it is 1 ms older than R.
func TestCleanerAgeBound(t *testing.T) {
	for _, w := range []time.Duration{time.Hour, 2 * time.Hour} {
		t.Run(w.String(), func(t *testing.T) {
			ctx := context.Background()
			e, ts, body := ageEnv(t, w)
			p := e.ref.Policy
			bound := table.RetentionGrace(p.Grace, w)
			old, young := table.DataPrefix+"00000000000000a1.parquet", table.DataPrefix+"00000000000000a2.parquet"
			if err := ts.Put(ctx, e.ref.Root+old, []byte("orphan")); err != nil {
				t.Fatal(err)
			}
			e.clock.Advance(time.Millisecond)
			if err := ts.Put(ctx, e.ref.Root+young, []byte("orphan")); err != nil {
				t.Fatal(err)
			}
			forgeRemoval(t, e, ts, body, old, young)
			e.clock.Advance(bound)
			res, err := e.clean.Clean(ctx, body)
			if err != nil {
				t.Fatal(err)
			}
			if res.KeptYoung != 1 || res.VersionsDeleted == 0 {
				t.Errorf("cleaner %+v: want 1 kept young and the range finished", res)
			}
			if _, err := ts.Head(ctx, e.ref.Root+old); !errors.Is(err, objstore.ErrNotExist) {
				t.Errorf("file R + 1 ms old: %v, want deleted", err)
			}
			if _, err := ts.Head(ctx, e.ref.Root+young); err != nil {
				t.Errorf("file exactly R old: %v, want kept", err)
			}
			// The sweep, on the same rule, takes it 1 ms later.
			tb := table.Handle(e.faulty, e.ref.Root, e.opts())
			if _, err := tb.Refresh(ctx); err != nil {
				t.Fatal(err)
			}
			if sw, err := maintenance.Sweep(ctx, tb, p, e.clock.Now(), 0, false); err != nil || sw.Deleted != 0 {
				t.Fatalf("sweep at exactly R: %+v %v, want nothing deleted", sw, err)
			}
			e.clock.Advance(time.Millisecond)
			if sw, err := maintenance.Sweep(ctx, tb, p, e.clock.Now(), 0, false); err != nil || sw.Deleted != 1 {
				t.Fatalf("sweep at R + 1 ms: %+v %v, want the kept file deleted", sw, err)
			}
		})
	}
}
