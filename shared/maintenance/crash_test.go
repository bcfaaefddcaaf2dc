package maintenance_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/queue"
)

// crashPolicy makes cleanup take several messages, continuations and
// delete batches, so that there are many requests to fail.
func crashPolicy() maintenance.Policy {
	p := testPolicy()
	p.RangeVersions = 7
	p.MaxKeysPerRun = 6
	p.DeleteBatch = 4
	p.TargetRows = 4 // several compaction groups
	return p
}

// history is a prepared table: its directory, per-version rows and final rows.
type history struct {
	dir      string
	versions map[uint64]map[string]string
	model    map[string]string
	tagged   uint64
	bodies   [][]byte // prune ranges enqueued by a clean maintenance run (cleanup templates)
}

// buildHistory writes ~30 versions of upserts and deletes with a tag in the
// middle.
func buildHistory(t *testing.T, p maintenance.Policy) *history {
	return buildHistoryFormat(t, p, 0)
}

// buildHistoryFormat is buildHistory on a table of the given format (0:
// the default); format 3 with a 60-byte inline bound, so that the
// history mixes inline rows, inline deletions, writer flushes and files.
func buildHistoryFormat(t *testing.T, p maintenance.Policy, format uint64) *history {
	t.Helper()
	ctx := context.Background()
	h := &history{dir: t.TempDir(), versions: map[uint64]map[string]string{}, model: map[string]string{}}
	e := newEnv(t, h.dir, p, queue.EmbeddedOptions{})
	if format == 3 {
		e.format, e.inlineMax = 3, 60
	}
	tb := e.create(t)
	h.versions[1] = map[string]string{}
	record := func(v uint64) {
		cp := map[string]string{}
		for k, val := range h.model {
			cp[k] = val
		}
		h.versions[v] = cp
	}
	// One multi-row fragment, so later writes leave deletion vectors.
	rec := kv("k00", "b", "k01", "b", "k02", "b", "k03", "b", "k04", "b", "k05", "b")
	res, err := tb.Upsert(ctx, rec)
	rec.Release()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		h.model[fmt.Sprintf("k%02d", i)] = "b"
	}
	record(res.Version)
	for i := range 30 {
		name := fmt.Sprintf("k%02d", (i*7)%11)
		if i%4 == 3 {
			res, err := tb.Delete(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			if res.RowsDeleted > 0 {
				delete(h.model, name)
				record(res.Version)
			}
			continue
		}
		val := fmt.Sprint("v", i)
		res := upsert(t, tb, name, val)
		h.model[name] = val
		record(res.Version)
		if i == 10 {
			h.tagged = res.Version
			if err := tb.Tag(ctx, "keep", res.Version); err != nil {
				t.Fatal(err)
			}
		}
	}
	return h
}

// withCleanupPending returns a copy of h after one clean maintenance run
// whose prune ranges were recorded but not drained.
func (h *history) withCleanupPending(t *testing.T, p maintenance.Policy) *history {
	t.Helper()
	c := *h
	c.dir = t.TempDir()
	copyDir(t, h.dir, c.dir)
	e := newEnv(t, c.dir, p, queue.EmbeddedOptions{})
	rec := &bodies{}
	e.runner.Queue = rec
	e.clock.Advance(2 * time.Hour)
	tr, err := e.runner.MaintainTable(context.Background(), e.ref)
	if err != nil {
		t.Fatal(err)
	}
	if (tr.Compacted.Committed == 0 && tr.Compacted.FlushedRows == 0) || len(tr.Prune.Ranges) < 2 {
		t.Fatalf("template: compaction %+v, ranges %d", tr.Compacted, len(tr.Prune.Ranges))
	}
	c.bodies = rec.take()
	return &c
}

// verify checks the table after maintenance completed: rows equal the
// model, every retained version reads as it did, nothing below the floor
// survives but tagged versions, and after a sweep no old unreferenced file
// remains.
func (h *history) verify(t *testing.T, e *env, label string) {
	t.Helper()
	ctx := context.Background()
	tb := e.open(t)
	if err := diffRows(latestRows(t, tb), h.model); err != nil {
		t.Fatalf("%s: latest: %v", label, err)
	}
	want := map[uint64]map[string]string{}
	var origLatest uint64
	for v, rows := range h.versions {
		want[v] = rows
		origLatest = max(origLatest, v)
	}
	for v := origLatest + 1; v <= tb.Cached().Version; v++ {
		want[v] = h.model // compaction commits do not change rows
	}
	sr, err := maintenance.Sweep(ctx, tb, e.ref.Policy, e.clock.Now(), 0, false)
	if err != nil {
		t.Fatalf("%s: sweep: %v", label, err)
	}
	_ = sr
	refs := checkRetained(t, tb, want)
	checkNoOrphans(t, tb, refs, e.clock.Now(), e.ref.Policy.Grace)
	floor, _ := tb.Floor(ctx)
	vs, _ := tb.Versions(ctx)
	for _, v := range vs {
		if v.Version < floor && v.Version != h.tagged {
			t.Fatalf("%s: version %d below floor %d still stored", label, v.Version, floor)
		}
	}
	if snap, err := tb.Checkout(ctx, h.tagged); err != nil {
		t.Fatalf("%s: tagged version: %v", label, err)
	} else if rows, err := scanSnap(ctx, snap); err != nil || diffRows(rows, h.versions[h.tagged]) != nil {
		t.Fatalf("%s: tagged version rows: %v %v", label, err, diffRows(rows, h.versions[h.tagged]))
	}
}

type faultMode struct {
	name string
	set  func(f *objstore.Faulty, fn objstore.FaultFunc)
}

var faultModes = []faultMode{
	{"before", (*objstore.Faulty).SetBefore},
	{"after", (*objstore.Faulty).SetAfter},
}

// TestCrashAtEveryRequestOfCompaction fails the Nth object-store request of
// a maintenance run (compaction, prune planning and floor, stats), for
// every N, before the request is sent and, separately, after it was applied;
// then reruns maintenance and cleanup without faults.
func TestCrashAtEveryRequestOfCompaction(t *testing.T) {
	for _, format := range []uint64{2, 3} {
		t.Run(fmt.Sprintf("format=%d", format), func(t *testing.T) { crashAtEveryRequestOfCompaction(t, format) })
	}
}

func crashAtEveryRequestOfCompaction(t *testing.T, format uint64) {
	p := crashPolicy()
	h := buildHistoryFormat(t, p, format)
	ctx := context.Background()
	for _, mode := range faultModes {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			total := 0
			for n := int64(1); ; n++ {
				dir := filepath.Join(t.TempDir(), "s")
				copyDir(t, h.dir, dir)
				e := newEnv(t, dir, p, queue.EmbeddedOptions{})
				e.clock.Advance(2 * time.Hour)
				mode.set(e.faulty, objstore.FailNth(n, nil))
				_, ferr := e.runner.MaintainTable(ctx, e.ref)
				reached := e.faulty.Requests() >= n
				e.faulty.Reset()
				if !reached {
					total = int(n - 1)
					break
				}
				label := fmt.Sprintf("%s fault at request %d (first run err: %v)", mode.name, n, ferr)
				// The next scheduled run, without faults; then the cleaners.
				e.clock.Advance(time.Minute)
				if _, err := e.runner.MaintainTable(ctx, e.ref); err != nil {
					t.Fatalf("%s: rerun: %v", label, err)
				}
				e.drain(t)
				if dl := e.q.DeadLetters(); len(dl) > 0 {
					t.Fatalf("%s: dead letters %d", label, len(dl))
				}
				h.verify(t, e, label)
			}
			if total < 20 {
				t.Fatalf("%s: only %d requests in a maintenance run", mode.name, total)
			}
			t.Logf("%s: failed each of %d requests", mode.name, total)
		})
	}
}

// TestCrashAtEveryRequestOfCleanup fails the Nth request of the cleaners'
// drain, then lets the queue redeliver (and the next maintenance run
// replan) without faults.
func TestCrashAtEveryRequestOfCleanup(t *testing.T) {
	for _, format := range []uint64{2, 3} {
		t.Run(fmt.Sprintf("format=%d", format), func(t *testing.T) { crashAtEveryRequestOfCleanup(t, format) })
	}
}

func crashAtEveryRequestOfCleanup(t *testing.T, format uint64) {
	p := crashPolicy()
	h := buildHistoryFormat(t, p, format).withCleanupPending(t, p)
	ctx := context.Background()
	for _, mode := range faultModes {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			total := 0
			for n := int64(1); ; n++ {
				dir := filepath.Join(t.TempDir(), "s")
				copyDir(t, h.dir, dir)
				e := newEnv(t, dir, p, queue.EmbeddedOptions{MaxReceives: 5})
				e.clock.Advance(2 * time.Hour)
				send(t, e.q, h.bodies)
				mode.set(e.faulty, objstore.FailNth(n, nil))
				if _, err := maintenance.DrainLocal(ctx, e.q, e.clean, discard); err != nil {
					t.Fatal(err)
				}
				reached := e.faulty.Requests() >= n
				e.faulty.Reset()
				if !reached {
					total = int(n - 1)
					break
				}
				label := fmt.Sprintf("%s fault at cleanup request %d", mode.name, n)
				// Redelivery after the visibility timeout, and the next run.
				e.clock.Advance(time.Hour)
				e.drain(t)
				if _, err := e.runner.MaintainTable(ctx, e.ref); err != nil {
					t.Fatalf("%s: rerun: %v", label, err)
				}
				e.drain(t)
				if dl := e.q.DeadLetters(); len(dl) > 0 {
					t.Fatalf("%s: dead letters %d", label, len(dl))
				}
				h.verify(t, e, label)
			}
			if total < 20 {
				t.Fatalf("%s: only %d requests in cleanup", mode.name, total)
			}
			t.Logf("%s: failed each of %d requests", mode.name, total)
		})
	}
}

func send(t testing.TB, q queue.Queue, bs [][]byte) {
	t.Helper()
	msgs := make([]queue.Message, len(bs))
	for i, b := range bs {
		msgs[i] = queue.Message{Body: b}
	}
	if err := q.Send(context.Background(), msgs); err != nil {
		t.Fatal(err)
	}
}
