package maintenance_test

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/internal/fakeclock"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/queue"
	"github.com/tablekeep/tablekeep/shared/table"
)

// TestSweepUnderUntrustedFloor (issue 29 item 4, the sweep): a table
// removed and created again at its root, under a floor F of the old
// history: an older release's _refs/floor.json ("legacy", F = 25), or the
// old history's stamped marker ("old-stamped", F = 28: its manifest F is
// not this history's). Readers honour F; the planner does not trust it
// and keeps every version of the new history (inside its grace window).
// The new history's version 2 wrote a file D that versions 2..F-1 keep
// and version F drops; D is older than the sweep's grace R. Before the
// fix the sweep computed its references from the readers' floor F (the
// change records of (F, latest] and the latest), so D counted as an
// orphan and was deleted: versions 2..F-1, retained, lost it. Now the
// sweep uses the trusted floor (the planner's rule: 0 here, every stored
// version's references count): D is kept, and a true orphan as old is
// still deleted. Fake clock: the store dates objects by it.
func TestSweepUnderUntrustedFloor(t *testing.T) {
	for _, tc := range []string{"legacy", "old-stamped"} {
		t.Run(tc, func(t *testing.T) { testSweepUnderUntrustedFloor(t, tc) })
	}
}

// fakeStoreEnv is newEnv with testPolicy, a store dating objects by the
// fake clock, and a cleaner over it.
func fakeStoreEnv(t *testing.T) (*env, *fakeclock.Store, *maintenance.Cleaner) {
	t.Helper()
	e := newEnv(t, filepath.Join(t.TempDir(), "s"), testPolicy(), queue.EmbeddedOptions{})
	fst := fakeclock.NewStore(e.disk, e.clock)
	clean := &maintenance.Cleaner{Store: fst, Tables: e.cat, Requeue: maintenance.QueueEnqueuer{Q: e.q}, Logger: discard, OpenOpts: e.clean.OpenOpts}
	return e, fst, clean
}

// createWith creates the table over st, then upserts key(i) for i < n,
// one a minute.
func createWith(t *testing.T, e *env, st objstore.Store, n int, key func(i int) string) *table.Table {
	t.Helper()
	tb, err := table.Create(context.Background(), st, e.ref.Root, kvSchema, "name", e.opts())
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		e.clock.Advance(time.Minute)
		upsert(t, tb, key(i), strconv.Itoa(i))
	}
	return tb
}

func testSweepUnderUntrustedFloor(t *testing.T, kind string) {
	ctx := context.Background()
	p := testPolicy() // keep-last 3, grace 1 h
	e, fst, clean := fakeStoreEnv(t)
	root := e.ref.Root
	floor := uint64(25)
	if kind == "old-stamped" {
		// The old history, pruned by this release: a stamped marker.
		old := createWith(t, e, fst, 29, func(i int) string { return "o" + strconv.Itoa(i) })
		e.clock.Advance(3 * time.Hour)
		if plan := prunePass(t, e, old, clean, p); plan.Floor != 28 {
			t.Fatalf("old history's floor %d, want 28", plan.Floor)
		}
		floor = 28
		var gone []string
		for k := range listing(t, e.disk, root) {
			if !strings.HasPrefix(strings.TrimPrefix(k, root), "_refs/floor/") {
				gone = append(gone, k)
			}
		}
		if err := fst.Delete(ctx, gone); err != nil {
			t.Fatal(err)
		}
	} else if err := fst.Put(ctx, root+"_refs/floor.json", []byte(`{"floor":25}`)); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Hour)

	tb, err := table.Create(ctx, fst, root, kvSchema, "name", e.opts())
	if err != nil {
		t.Fatal(err)
	}
	upsert(t, tb, "k", "old") // version 2 writes D
	orphan := root + table.DataPrefix + "00000000deadbeef.parquet"
	if err := fst.Put(ctx, orphan, []byte("orphan")); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(3 * time.Hour) // D and the orphan older than R
	for v := uint64(3); v < floor; v++ {
		e.clock.Advance(time.Minute)
		upsert(t, tb, "n"+strconv.FormatUint(v, 10), "v")
	}
	e.clock.Advance(time.Minute)
	upsert(t, tb, "k", "new") // version F drops D
	for i := range 4 {
		e.clock.Advance(time.Minute)
		upsert(t, tb, "m"+strconv.Itoa(i), "v")
	}
	e.clock.Advance(10 * time.Minute)
	if f, err := tb.Floor(ctx); err != nil || f != floor {
		t.Fatalf("readers' floor %d (%v), want %d", f, err, floor)
	}
	files := func() map[string]int64 {
		m := listing(t, e.disk, root+table.DataPrefix)
		for k, v := range listing(t, e.disk, root+table.DeletionsPrefix) {
			m[k] = v
		}
		return m
	}
	before := files()
	delete(before, orphan)

	res, err := maintenance.Sweep(ctx, tb, p, e.clock.Now(), 0, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := keptAll(before, files(), root); err != nil {
		t.Fatalf("the sweep deleted files of the new history's versions below the untrusted floor %d (%d deleted): %v", floor, res.Deleted, err)
	}
	if _, ok := files()[orphan]; ok || res.Deleted != 1 {
		t.Fatalf("sweep %+v: want the old orphan deleted, only it", res)
	}
	// Every file listed before was committed by a version of the new
	// history, all of them still stored: keptAll is "nothing referenced
	// deleted".
	vs, err := tb.Versions(ctx)
	if err != nil || len(vs) != int(floor)+4 || vs[0].Version != 1 {
		t.Fatalf("versions %d from %v (%v), want 1..%d", len(vs), vs[0], err, floor+4)
	}
}

// TestSweepRequests pins the requests of one sweep of a table with a
// trusted (stamped) floor, a tag and one orphan: the data/ and _deletions/
// listings; the floor's LIST beside the LIST of _versions/ (one page up to
// 1,000 stored versions); the latest manifest (the listing's newest: one
// GET) beside the tags (a LIST, a GET per tag); the change records of
// (floor, latest]; the tagged manifest (with its floor LIST); the guard's
// LIST and GET; the DELETE. The same count as before the sweep read the
// version listing (the LIST with MaxKeys 1 it replaces); SweepTable makes
// one LIST fewer than before (it read the readers' floor again for its log).
func TestSweepRequests(t *testing.T) {
	ctx := context.Background()
	p := testPolicy() // keep-last 3, grace 1 h
	e, fst, clean := fakeStoreEnv(t)
	root := e.ref.Root
	tb := createWith(t, e, fst, 10, func(i int) string { return "k" + strconv.Itoa(i%3) })
	e.clock.Advance(3 * time.Hour)
	if plan := prunePass(t, e, tb, clean, p); plan.Floor != 9 {
		t.Fatalf("floor %d, want 9", plan.Floor)
	}
	if err := tb.Tag(ctx, "t", 10); err != nil {
		t.Fatal(err)
	}
	for _, viaTable := range []bool{false, true} {
		if err := fst.Put(ctx, root+table.DataPrefix+"00000000deadbeef.parquet", []byte("orphan")); err != nil {
			t.Fatal(err)
		}
		e.clock.Advance(3 * time.Hour)
		cs := objstore.NewCounting(fst)
		var res maintenance.SweepResult
		var err error
		want := objstore.Counts{Get: 6, List: 7, DeleteRequests: 1, DeleteKeys: 1}
		if viaTable {
			res, err = maintenance.SweepTable(ctx, cs, e.ref, maintenance.SweepOptions{Now: e.clock.Now(), Table: e.opts()})
			want.List++ // the table's opening (Refresh's LIST with MaxKeys 1)
			want.Get++  // and its manifest GET
		} else {
			sw, oerr := table.Open(ctx, cs, root, e.opts())
			if oerr != nil {
				t.Fatal(oerr)
			}
			cs.Reset()
			res, err = maintenance.Sweep(ctx, sw, p, e.clock.Now(), 0, false)
		}
		if err != nil || res.Deleted != 1 {
			t.Fatalf("sweep %+v: %v", res, err)
		}
		if got := cs.Counts(); got != want {
			t.Errorf("SweepTable %v: requests %+v, want %+v", viaTable, got, want)
		}
	}
}

// TestSweepLegacyTableWithGaps: a table of this history that an earlier
// release pruned (floor 20 in _refs/floor.json, versions 1-19 gone with
// their change records, but version 5, tagged). No floor is trusted, so
// the sweep counts the run of stored versions ending at the latest (20
// onwards) and the tagged version: it neither fails on the missing change
// records below 20 nor deletes a file those versions reference, and it
// still deletes the pruned versions' files, older than R.
func TestSweepLegacyTableWithGaps(t *testing.T) {
	ctx := context.Background()
	p := testPolicy()
	e, fst, _ := fakeStoreEnv(t)
	root := e.ref.Root
	tb := createWith(t, e, fst, 29, func(i int) string { return "k" + strconv.Itoa(i%5) })
	if err := tb.Tag(ctx, "five", 5); err != nil {
		t.Fatal(err)
	}
	if err := fst.Put(ctx, root+"_refs/floor.json", []byte(`{"floor":20}`)); err != nil {
		t.Fatal(err)
	}
	var gone []string
	for v := uint64(1); v < 20; v++ {
		if v != 5 {
			gone = append(gone, root+fmt.Sprintf("_versions/%020d.manifest", uint64(math.MaxUint64)-v))
		}
		gone = append(gone, root+table.ChangeKey(v))
	}
	if err := fst.Delete(ctx, gone); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(3 * time.Hour)
	refs := checkRetained(t, tb, nil)
	res, err := maintenance.Sweep(ctx, tb, p, e.clock.Now(), 0, false)
	if err != nil || res.Deleted == 0 {
		t.Fatalf("sweep %+v: %v; want the pruned versions' files deleted", res, err)
	}
	checkRetained(t, tb, nil) // every file of version 5 and 20-30 still reads
	checkNoOrphans(t, tb, refs, e.clock.Now(), maintenance.RetentionGrace(tb, p))
}
