package maintenance_test

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/dataset"
	"github.com/tablekeep/tablekeep/shared/formats"
	"github.com/tablekeep/tablekeep/shared/internal/fakeclock"
	"github.com/tablekeep/tablekeep/shared/lance"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/queue"
	"github.com/tablekeep/tablekeep/shared/table"
)

// TestGuardRefusesLatestFilesInTable (issue 19 item 0, tablekeep format):
// a change record in a queued range forged (a future bug of the change
// records, not of the key check) to name a data file the latest version
// references. The check before deleting reads the latest version from the
// store and refuses the whole message, retryably: nothing is deleted, not
// even the legitimate keys of the range, and the latest version reads as
// before. Before the guard the cleaner deleted the file.
func TestGuardRefusesLatestFilesInTable(t *testing.T) {
	ctx := context.Background()
	p := crashPolicy()
	h := buildHistory(t, p).withCleanupPending(t, p)
	first, err := maintenance.DecodeRangeMessage(h.bodies[0])
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, h.dir, p, queue.EmbeddedOptions{})
	e.clock.Advance(2 * time.Hour)
	tb := e.open(t)
	want := latestRows(t, tb)
	latest := tb.Cached()
	if len(latest.Fragments) == 0 {
		t.Fatal("the latest version has no fragment")
	}
	cr, err := tb.ChangeRecord(ctx, first.From+1)
	if err != nil {
		t.Fatal(err)
	}
	cr.Removed = append(cr.Removed, dataset.RemovedFile{Key: latest.Fragments[0].File.DataKey(), Since: first.From})
	if err := e.disk.Put(ctx, tb.Root()+table.ChangeKey(first.From+1), forgeChange(cr)); err != nil {
		t.Fatal(err)
	}
	before := listing(t, e.disk, "")
	_, err = e.clean.Clean(ctx, h.bodies[0])
	if lerr := sameListing(before, listing(t, e.disk, "")); lerr != nil {
		t.Fatalf("the cleaner deleted (error %v): %v", err, lerr)
	}
	if !errors.Is(err, maintenance.ErrLatestReferenced) || errors.Is(err, queue.ErrPermanent) {
		t.Fatalf("clean: %v, want a retryable ErrLatestReferenced", err)
	}
	if err := diffRows(latestRows(t, e.open(t)), want); err != nil {
		t.Fatal(err)
	}
}

// forgetfulSweep is a Lance SweepSource with a bug: it reports no
// references, so every old file looks orphaned.
type forgetfulSweep struct{ *lance.Source }

func (forgetfulSweep) VersionRefs(context.Context, uint64) ([]string, error) { return nil, nil }

// TestGuardRefusesLatestFilesInSweep (issue 19 item 0, Lance): an orphan
// sweep whose references are wrong (forgetfulSweep) would delete every file
// older than the cut-off, the latest version's included; the guard refuses
// the whole sweep and nothing is deleted.
func TestGuardRefusesLatestFilesInSweep(t *testing.T) {
	ctx := context.Background()
	lp := planLance(t)
	st := lp.store(t)
	src := lance.NewSource(st, lp.ref.Root)
	if _, err := src.StoredVersions(ctx); err != nil {
		t.Fatal(err)
	}
	before := listing(t, st, "wh/")
	res, err := maintenance.SweepSourceFiles(ctx, src, forgetfulSweep{src}, lp.ref.Policy, time.Now().Add(30*24*time.Hour), 0, false)
	if err := sameListing(before, listing(t, st, "wh/")); err != nil {
		t.Fatalf("the sweep deleted (%+v): %v", res, err)
	}
	if !errors.Is(err, maintenance.ErrLatestReferenced) || !errors.Is(err, maintenance.ErrSweepRefused) {
		t.Fatalf("sweep: %+v %v, want ErrSweepRefused and ErrLatestReferenced", res, err)
	}
}

// TestStaleFloorInRecreatedTable (issue 19 item 2, tablekeep format): a
// table removed by other means than tablekeep, its _refs/floor/ marker
// (floor 25) left behind, and created again at the same root (versions
// restart at 1), with fewer versions than the floor or more. Before the
// fix the planner took the stale floor, and the cleaner deleted every
// version below it, the latest included (or versions the retention rules
// keep). Now the planner refuses (ErrStaleFloor, saying what to delete):
// the floor is above the latest version, or its marker is older than the
// manifest of its version; and with the floor above the latest version a
// range of the old history still queued deletes nothing.
func TestStaleFloorInRecreatedTable(t *testing.T) {
	for _, n := range []int{3, 30} {
		t.Run(strconv.Itoa(n), func(t *testing.T) { testStaleFloor(t, n) })
	}
}

func testStaleFloor(t *testing.T, n int) {
	ctx := context.Background()
	p := testPolicy()
	e := newEnv(t, filepath.Join(t.TempDir(), "s"), p, queue.EmbeddedOptions{})
	// Objects dated by the fake clock, as the store would date them.
	fst := fakeclock.NewStore(e.disk, e.clock)
	tb, err := table.Create(ctx, fst, e.ref.Root, kvSchema, "name", e.opts())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		e.clock.Advance(time.Minute)
		upsert(t, tb, "k", string(rune('a'+i%26)))
	}
	if err := tb.SetFloor(ctx, 25); err != nil {
		t.Fatal(err)
	}
	var old []string
	for k := range listing(t, e.disk, e.ref.Root) {
		if !strings.Contains(k, "/_refs/floor/") {
			old = append(old, k)
		}
	}
	if err := fst.Delete(ctx, old); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Hour)
	if tb, err = table.Create(ctx, fst, e.ref.Root, kvSchema, "name", e.opts()); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		e.clock.Advance(time.Minute)
		upsert(t, tb, "n"+strconv.Itoa(i), "v")
	}
	want := latestRows(t, tb)
	e.clock.Advance(3 * time.Hour)
	before := listing(t, e.disk, "")

	plan, perr := maintenance.PlanPrune(ctx, tb, tblName, p, e.clock.Now())
	if perr == nil {
		// The unfixed planner: apply and drain, as a maintenance does.
		if err := maintenance.ApplyPrune(ctx, tb, &plan, maintenance.QueueEnqueuer{Q: e.q}); err != nil {
			t.Fatal(err)
		}
		e.drain(t)
	}
	var cerr error
	// A range of the old history, still queued: below the stale floor 25,
	// and (n = 30: the new history grew past that floor) below the latest
	// version too, where only the marker's age tells the histories apart
	// (floorOfThisHistory; before it the cleaner deleted the new history's
	// versions 1-3, retained by keep-last and grace).
	old1 := maintenance.RangeMessage{V: 1, Table: tblName, Root: e.ref.Root, From: 1, To: 3}
	clean := &maintenance.Cleaner{ // objects dated as the store dated them
		Store: fst, Tables: e.clean.Tables, Requeue: e.clean.Requeue, Logger: e.clean.Logger, OpenOpts: e.clean.OpenOpts,
	}
	_, cerr = clean.Clean(ctx, old1.Encode())
	if !errors.Is(cerr, maintenance.ErrStaleFloor) {
		t.Fatalf("old range on the re-created table: %v, want ErrStaleFloor", cerr)
	}
	if err := sameListing(before, listing(t, e.disk, "")); err != nil {
		t.Fatalf("maintenance of the re-created table deleted (plan %v, old range %v): %v", perr, cerr, err)
	}
	if !errors.Is(perr, maintenance.ErrStaleFloor) || !strings.Contains(perr.Error(), "_refs/floor/") {
		t.Fatalf("plan: %v, want ErrStaleFloor naming _refs/floor/", perr)
	}
	t.Logf("plan: %v", perr)
	if n < 25 && !errors.Is(cerr, maintenance.ErrStaleFloor) {
		t.Fatalf("old range: %v, want ErrStaleFloor", cerr)
	}
	if err := diffRows(latestRows(t, e.open(t)), want); err != nil {
		t.Fatal(err)
	}
}

// TestGuardSweepRequests: the guard costs a sweep pass one LIST (max-keys
// 1 on _versions/) and one GET (the latest manifest), tablekeep and Lance,
// and only when the sweep deletes something.
func TestGuardSweepRequests(t *testing.T) {
	ctx := context.Background()
	lp := planLance(t)
	// Drain the ranges first: the sweep then finds the old orphans only.
	st := lp.store(t)
	c := &maintenance.Cleaner{Store: st, Tables: lp.cat, Requeue: &bodies{}, Logger: discard, Sources: formats.Open, OpenOpts: lp.opts}
	for _, b := range lp.bodies {
		if _, err := c.Clean(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	// An orphan (a failed write's file), old by the sweep's clock.
	if err := st.Put(ctx, lp.ref.Root+"data/orphan-0001.lance", []byte("orphan")); err != nil {
		t.Fatal(err)
	}
	ks := &kindCounting{Store: st, n: map[string]int{}}
	res, err := maintenance.SweepTable(ctx, ks, lp.ref, maintenance.SweepOptions{Now: time.Now().Add(30 * 24 * time.Hour), Sources: formats.Open, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	dry := ks.n
	ks.n = map[string]int{}
	res2, err := maintenance.SweepTable(ctx, ks, lp.ref, maintenance.SweepOptions{Now: time.Now().Add(30 * 24 * time.Hour), Sources: formats.Open})
	if err != nil || res2.Deleted == 0 || len(res.Planned) != res2.Deleted {
		t.Fatalf("sweep: %+v %v (dry run planned %d)", res2, err, len(res.Planned))
	}
	if ks.n["LIST _versions/"] != dry["LIST _versions/"]+1 || ks.n["GET _versions/"] != dry["GET _versions/"]+1 {
		t.Fatalf("sweep %v, dry run (no guard) %v: want one LIST and one GET of _versions/ more", ks.n, dry)
	}
	t.Logf("sweep pass: %v (dry run %v)", ks.n, dry)
	var _ objstore.Store = ks
}
