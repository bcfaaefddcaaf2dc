package maintenance_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/internal/fakeclock"
	"github.com/tablekeep/tablekeep/shared/lock"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/queue"
	"github.com/tablekeep/tablekeep/shared/table"
)

// newTimedEnv is newEnv over a store that dates objects by the fake clock,
// with maintenance behind a Faulty on it (e.faulty) and the lease renewed
// only at each step (no real-time heartbeat).
func newTimedEnv(t testing.TB, p maintenance.Policy) (*env, *fakeclock.Store) {
	t.Helper()
	e := newEnv(t, t.TempDir(), p, queue.EmbeddedOptions{})
	ts := fakeclock.NewStore(e.disk, e.clock)
	e.disk = ts
	e.faulty = objstore.NewFaulty(ts)
	e.runner.Store, e.clean.Store = e.faulty, e.faulty
	e.runner.KeepAlive = -1
	return e, ts
}

func storedVersions(t testing.TB, tb *table.Table) []uint64 {
	t.Helper()
	vs, err := tb.Versions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []uint64
	for _, v := range vs {
		out = append(out, v.Version)
	}
	return out
}

// TestSweepKeepsSlowWritersFile: a writer's data file is exactly the
// writers' grace window old when its manifest PUT is in flight, and the
// sweeper's clock is 2 s ahead. The file survives and the table reads
// after the commit.
func TestSweepKeepsSlowWritersFile(t *testing.T) {
	ctx := context.Background()
	e, ts := newTimedEnv(t, testPolicy())
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
	var swept *maintenance.SweepResult
	wf.SetBefore(func(_ int64, op objstore.Op) error {
		if swept != nil || op.Kind != objstore.KindPut || !op.Conditional || !strings.Contains(op.Key, table.VersionsPrefix) {
			return nil
		}
		// The writer's data file is now at the writers' bound, and its
		// manifest PUT takes 100 ms; the sweeper's clock is 2 s ahead.
		e.clock.Advance(w.WriterGrace() + 100*time.Millisecond)
		st, err := table.Open(ctx, e.faulty, e.ref.Root, e.opts())
		if err != nil {
			t.Fatal(err)
		}
		res, err := maintenance.Sweep(ctx, st, e.ref.Policy, e.clock.Now().Add(2*time.Second), 0, false)
		if err != nil {
			t.Fatalf("sweep: %v", err)
		}
		swept = &res
		return nil
	})
	rec := kv("slow", "writer")
	_, err = w.Upsert(ctx, rec)
	rec.Release()
	if swept == nil {
		t.Fatal("writer never reached its manifest put")
	}
	if err == nil {
		model["slow"] = "writer"
	}
	t.Logf("writer: %v; sweep %+v", err, *swept)
	if swept.Deleted != 0 {
		t.Fatalf("sweep deleted %d files while a writer's manifest was in flight", swept.Deleted)
	}
	tb := e.open(t)
	snap, err := tb.Latest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := scanSnap(ctx, snap)
	if err != nil {
		t.Fatalf("latest version %d unreadable: %v", snap.Version(), err)
	}
	if _, ok := rows["slow"]; ok {
		model["slow"] = "writer" // committed even if the writer was unsure
	}
	if err := diffRows(rows, model); err != nil {
		t.Fatal(err)
	}
}

// TestRetentionSkewMargin: a version superseded a little more than the
// grace window ago (by the store's clock) is still retained: prunable only
// past grace + table.SafetyMargin.
func TestRetentionSkewMargin(t *testing.T) {
	ctx := context.Background()
	p := testPolicy() // KeepLast 3, grace 1h
	e, _ := newTimedEnv(t, p)
	tb := e.create(t)
	for i := range 5 { // v2..v6, all at T0
		upsert(t, tb, fmt.Sprint("k", i), "a")
	}
	e.clock.Advance(p.Grace + 10*time.Second)
	plan, err := maintenance.PlanPrune(ctx, tb, tblName, p, e.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if plan.Floor != 1 || len(plan.Ranges) != 0 {
		t.Fatalf("superseded grace+10s ago: floor %d ranges %+v, want floor 1 and nothing enqueued", plan.Floor, plan.Ranges)
	}
	e.clock.Advance(table.SafetyMargin)
	if plan, err = maintenance.PlanPrune(ctx, tb, tblName, p, e.clock.Now()); err != nil {
		t.Fatal(err)
	}
	if plan.Floor != 4 {
		t.Fatalf("superseded grace+margin+10s ago: floor %d, want 4 (keep-last 3)", plan.Floor)
	}
}

// TestSweepDoesNotRecreateChangeRecords: a change record missing in
// (floor, latest] is computed by the sweep, never written back (a cleaner
// may just have deleted it).
func TestSweepDoesNotRecreateChangeRecords(t *testing.T) {
	ctx := context.Background()
	e, _ := newTimedEnv(t, testPolicy())
	tb := e.create(t)
	model := map[string]string{}
	for i := range 6 {
		k := fmt.Sprint("k", i%2)
		upsert(t, tb, k, fmt.Sprint(i))
		model[k] = fmt.Sprint(i)
	}
	key := tb.Root() + table.ChangeKey(5)
	if err := e.disk.Delete(ctx, []string{key}); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(3 * time.Hour)
	st, err := table.Open(ctx, e.faulty, e.ref.Root, e.opts())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := maintenance.Sweep(ctx, st, e.ref.Policy, e.clock.Now(), 0, false); err != nil {
		t.Fatal(err)
	}
	if _, err := e.disk.Head(ctx, key); !errors.Is(err, objstore.ErrNotExist) {
		t.Fatalf("sweep re-created change record 5: %v", err)
	}
	refs := checkRetained(t, e.open(t), nil)
	checkNoOrphans(t, tb, refs, e.clock.Now(), maintenance.RetentionGrace(tb, e.ref.Policy)+time.Second)
	if err := diffRows(latestRows(t, e.open(t)), model); err != nil {
		t.Fatal(err)
	}
}

// dropper is an Enqueuer that loses the messages of the sends drop says.
type dropper struct {
	mu    sync.Mutex
	inner maintenance.Enqueuer
	drop  func(sends int, body []byte) bool
	sends int
	lost  []string
}

func (d *dropper) Send(ctx context.Context, bodies [][]byte) error {
	d.mu.Lock()
	d.sends++
	var keep [][]byte
	for _, b := range bodies {
		if d.drop(d.sends, b) {
			d.lost = append(d.lost, string(b))
			continue
		}
		keep = append(keep, b)
	}
	d.mu.Unlock()
	if len(keep) == 0 {
		return nil
	}
	return d.inner.Send(ctx, keep)
}

// passes runs hourly maintenance passes with writes; after each pass check
// is called with the pass number and the floor.
func hourlyPasses(t *testing.T, e *env, tb *table.Table, n, writes int, check func(pass int, floor uint64)) {
	t.Helper()
	ctx := context.Background()
	for pass := 1; pass <= n; pass++ {
		for i := range writes {
			upsert(t, tb, fmt.Sprint("k", i), fmt.Sprint(pass))
		}
		e.clock.Advance(time.Hour)
		rep, err := e.runner.MaintainTable(ctx, e.ref)
		if err != nil {
			t.Fatalf("pass %d: %v", pass, err)
		}
		e.drain(t)
		check(pass, rep.Prune.Floor)
	}
}

// TestLostRangeReplannedWhileWritesContinue: one cleanup message of the
// first pass is lost; 24 hourly passes with writes follow. Every version
// below the floor is deleted within ReplanAfter + one pass of falling
// below it, and so is its change record.
func TestLostRangeReplannedWhileWritesContinue(t *testing.T) {
	ctx := context.Background()
	p := testPolicy()
	e, _ := newTimedEnv(t, p)
	d := &dropper{inner: e.runner.Queue, drop: func(sends int, _ []byte) bool { return sends == 1 }}
	e.runner.Queue = d
	tb := e.create(t)
	below := map[uint64]time.Time{} // version -> when it first fell below the floor
	bound := p.ReplanAfter + time.Hour
	hourlyPasses(t, e, tb, 24, 3, func(pass int, floor uint64) {
		now := e.clock.Now()
		for v := uint64(1); v < floor; v++ {
			if _, ok := below[v]; !ok {
				below[v] = now
			}
		}
		for _, v := range storedVersions(t, tb) {
			if at, ok := below[v]; ok && now.Sub(at) > bound {
				t.Fatalf("pass %d: version %d below the floor %d since %s, still stored (lost %v)", pass, v, floor, now.Sub(at), d.lost)
			}
		}
		for v, at := range below {
			if now.Sub(at) <= bound {
				continue
			}
			if _, err := e.disk.Head(ctx, tb.Root()+table.ChangeKey(v)); !errors.Is(err, objstore.ErrNotExist) {
				t.Fatalf("pass %d: change record %d of a version pruned %s ago: %v", pass, v, now.Sub(at), err)
			}
		}
	})
	if len(d.lost) == 0 {
		t.Fatal("no message was lost")
	}
}

// TestUntaggedVersionBelowFloorIsPruned: a version kept for a tag while
// its range was cleaned is deleted once the tag is removed, while writes
// and passes continue.
func TestUntaggedVersionBelowFloorIsPruned(t *testing.T) {
	ctx := context.Background()
	p := testPolicy()
	e, _ := newTimedEnv(t, p)
	tb := e.create(t)
	upsert(t, tb, "x", "1") // v2
	if err := tb.Tag(ctx, "keep", 2); err != nil {
		t.Fatal(err)
	}
	hourlyPasses(t, e, tb, 4, 3, func(pass int, floor uint64) {})
	if vs := storedVersions(t, tb); vs[0] != 2 || vs[1] < 5 {
		t.Fatalf("tagged version not kept alone below the floor: %v", vs)
	}
	if err := tb.Untag(ctx, "keep"); err != nil {
		t.Fatal(err)
	}
	gone := 0
	hourlyPasses(t, e, tb, 8, 3, func(pass int, floor uint64) {
		if gone == 0 && storedVersions(t, tb)[0] != 2 {
			gone = pass
		}
	})
	if gone == 0 || gone > 1 {
		t.Fatalf("untagged version 2 below the floor deleted after pass %d (0: never), want the next pass", gone)
	}
}

// slowGroups makes every compaction output upload take d (fake clock).
func slowGroups(e *env, d time.Duration) {
	e.faulty.SetBefore(func(_ int64, op objstore.Op) error {
		if op.Kind == objstore.KindPut && strings.Contains(op.Key, table.DataPrefix) {
			e.clock.Advance(d)
		}
		return nil
	})
}

func backlogPolicy() maintenance.Policy {
	return maintenance.Policy{KeepLast: 3, Grace: time.Hour, TargetRows: 4}.WithDefaults()
}

// TestLeaseRenewedDuringCompaction: a compaction of 12 groups, each taking
// a minute, outlives the 5-minute lease: the lease is renewed as it goes,
// every group commits, and the lease taken stays the one released.
func TestLeaseRenewedDuringCompaction(t *testing.T) {
	ctx := context.Background()
	e, _ := newTimedEnv(t, backlogPolicy())
	tb := e.create(t)
	for i := range 48 {
		upsert(t, tb, fmt.Sprint("k", i), "v")
	}
	slowGroups(e, time.Minute)
	rep, err := e.runner.MaintainTable(ctx, e.ref)
	e.faulty.SetBefore(nil)
	if err != nil {
		t.Fatalf("maintain: %v", err)
	}
	c := rep.Compacted
	if c.Planned < 10 || c.Committed != c.Planned || c.Stopped != "" {
		t.Fatalf("compaction: planned %d committed %d stopped %q", c.Planned, c.Committed, c.Stopped)
	}
	// Released: the next holder gets the next token at once.
	l, err := e.locker.Acquire(ctx, e.runner.TableLockName(e.ref), lock.AcquireOptions{Owner: "next", Lease: time.Minute, MaxWait: -1})
	if err != nil || l.Token != rep.Token+1 {
		t.Fatalf("after the pass: %v %v (token %d)", l, err, rep.Token)
	}
}

// TestLongCompactionStillPrunes: compactions that outlive their lease, or
// fail, still leave the pass pruning; under a standing compaction backlog
// the stored versions stay bounded.
func TestLongCompactionStillPrunes(t *testing.T) {
	ctx := context.Background()
	p := backlogPolicy()
	e, _ := newTimedEnv(t, p)
	tb := e.create(t)
	for pass := 1; pass <= 6; pass++ {
		for i := range 40 {
			upsert(t, tb, fmt.Sprint("p", pass, "k", i), "v")
		}
		e.clock.Advance(time.Hour)
		slowGroups(e, 2*time.Minute) // 10 groups: 20 minutes under a 5-minute lease
		rep, err := e.runner.MaintainTable(ctx, e.ref)
		e.faulty.SetBefore(nil)
		if err != nil {
			t.Fatalf("pass %d: %v", pass, err)
		}
		e.drain(t)
		if rep.Prune.Floor == 0 || rep.Prune.Floor < rep.Prune.Latest-uint64(p.KeepLast)-20 {
			t.Fatalf("pass %d: floor %d latest %d: not pruned", pass, rep.Prune.Floor, rep.Prune.Latest)
		}
		// Kept: the versions of this pass's writes and compaction (and
		// the last of the pass before), nothing older.
		if n := len(storedVersions(t, tb)); n > 40+rep.Compacted.Committed+p.KeepLast+1 {
			t.Fatalf("pass %d: %d versions stored", pass, n)
		}
	}
	// A compaction that fails outright still lets the pass prune.
	for i := range 8 {
		upsert(t, tb, fmt.Sprint("f", i), "v")
	}
	e.clock.Advance(3 * time.Hour)
	boom := errors.New("injected read failure")
	e.faulty.SetBefore(func(_ int64, op objstore.Op) error {
		if op.Kind == objstore.KindGet && strings.Contains(op.Key, table.DataPrefix) {
			return boom
		}
		return nil
	})
	rep, err := e.runner.MaintainTable(ctx, e.ref)
	e.faulty.SetBefore(nil)
	if !errors.Is(err, boom) || rep.CompactionError == "" {
		t.Fatalf("failed compaction not reported: %v (%q)", err, rep.CompactionError)
	}
	if want := rep.Prune.Latest - uint64(p.KeepLast) + 1; rep.Prune.Floor != want {
		t.Fatalf("after a failed compaction: floor %d, want %d (pruning skipped?)", rep.Prune.Floor, want)
	}
}

// TestStaleHolderCannotRollBackPruneState: holder A stalls right before
// writing its prune state, past its lease; B takes the lock and runs a
// whole pass. A's late write does not roll B's state back: the next plan
// re-enqueues nothing B enqueued.
func TestStaleHolderCannotRollBackPruneState(t *testing.T) {
	ctx := context.Background()
	p := testPolicy()
	e, ts := newTimedEnv(t, p)
	tb := e.create(t)
	for i := range 10 {
		upsert(t, tb, fmt.Sprint("k", i), "a")
	}
	e.clock.Advance(2 * time.Hour)
	b := *e.runner
	b.Owner, b.Store = "master-2", objstore.NewFaulty(ts)
	var bRep maintenance.TableReport
	stalled := false
	e.faulty.SetBefore(func(_ int64, op objstore.Op) error {
		if stalled || op.Kind != objstore.KindPut || !strings.Contains(op.Key, "_maintenance/prune-state") {
			return nil
		}
		stalled = true
		e.clock.Advance(10 * time.Minute) // A's lease is gone
		for i := range 10 {
			upsert(t, tb, fmt.Sprint("k", i), "b")
		}
		e.clock.Advance(2 * time.Hour)
		var err error
		if bRep, err = b.MaintainTable(ctx, e.ref); err != nil {
			t.Errorf("holder B: %v", err)
		}
		return nil
	})
	aRep, aErr := e.runner.MaintainTable(ctx, e.ref)
	e.faulty.SetBefore(nil)
	if !stalled {
		t.Fatal("holder A never wrote its prune state")
	}
	t.Logf("A: token %d floor %d ranges %d err %v; B: token %d floor %d ranges %d",
		aRep.Token, aRep.Prune.Floor, len(aRep.Prune.Ranges), aErr, bRep.Token, bRep.Prune.Floor, len(bRep.Prune.Ranges))
	if len(bRep.Prune.Ranges) == 0 || bRep.Token <= aRep.Token {
		t.Fatalf("holder B planned nothing: %+v", bRep.Prune)
	}
	plan, err := maintenance.PlanPrune(ctx, e.open(t), tblName, p, e.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Ranges) != 0 {
		t.Fatalf("prune state rolled back: the next plan re-enqueues %+v", plan.Ranges)
	}
	if f, _ := tb.Floor(ctx); f < bRep.Prune.Floor {
		t.Fatalf("floor %d, lowered below holder B's %d", f, bRep.Prune.Floor)
	}
}

// TestStaleHolderCannotLowerFloor: holder A stalls right before writing
// its (lower) floor, past its lease; B raises the floor further. A's late
// write must not lower it. This depends on table.SetFloor being monotonic
// by construction (a read-then-write cannot be fenced).
func TestStaleHolderCannotLowerFloor(t *testing.T) {
	ctx := context.Background()
	p := testPolicy()
	e, ts := newTimedEnv(t, p)
	tb := e.create(t)
	for i := range 10 {
		upsert(t, tb, fmt.Sprint("k", i), "a")
	}
	e.clock.Advance(2 * time.Hour)
	b := *e.runner
	b.Owner, b.Store = "master-2", objstore.NewFaulty(ts)
	var bRep maintenance.TableReport
	stalled := false
	e.faulty.SetBefore(func(_ int64, op objstore.Op) error {
		if stalled || op.Kind != objstore.KindPut || !strings.Contains(op.Key, "_refs/floor") {
			return nil
		}
		stalled = true
		e.clock.Advance(10 * time.Minute)
		for i := range 10 {
			upsert(t, tb, fmt.Sprint("k", i), "b")
		}
		e.clock.Advance(2 * time.Hour)
		var err error
		if bRep, err = b.MaintainTable(ctx, e.ref); err != nil {
			t.Errorf("holder B: %v", err)
		}
		return nil
	})
	aRep, aErr := e.runner.MaintainTable(ctx, e.ref)
	e.faulty.SetBefore(nil)
	if !stalled {
		t.Fatal("holder A never wrote its floor")
	}
	t.Logf("A: floor %d err %v; B: floor %d", aRep.Prune.Floor, aErr, bRep.Prune.Floor)
	if f, _ := tb.Floor(ctx); f < bRep.Prune.Floor {
		t.Fatalf("stale holder lowered the floor to %d (holder B set %d)", f, bRep.Prune.Floor)
	}
	e.drain(t)
	checkRetained(t, e.open(t), nil)
}

// TestTagRacingPrunePlan: a Tag lands on a version the pass is about to
// put below the floor, right before the floor is written (its own floor
// re-check passes). The planner reads tags after writing the floor, so it
// reports the version as tagged and cleanup keeps it readable.
func TestTagRacingPrunePlan(t *testing.T) {
	ctx := context.Background()
	p := testPolicy()
	e, _ := newTimedEnv(t, p)
	tb := e.create(t)
	want := map[uint64]map[string]string{}
	model := map[string]string{}
	for i := range 10 {
		k := fmt.Sprint("k", i%4)
		upsert(t, tb, k, fmt.Sprint(i))
		model[k] = fmt.Sprint(i)
		want[uint64(i+2)] = maps_clone(model)
	}
	e.clock.Advance(3 * time.Hour)
	tagger := e.open(t)
	tagged := false
	e.faulty.SetBefore(func(_ int64, op objstore.Op) error {
		if tagged || op.Kind != objstore.KindPut || !strings.Contains(op.Key, "_refs/floor") {
			return nil
		}
		tagged = true
		if err := tagger.Tag(ctx, "race", 5); err != nil {
			t.Errorf("tag: %v", err)
		}
		return nil
	})
	rep, err := e.runner.MaintainTable(ctx, e.ref)
	e.faulty.SetBefore(nil)
	if err != nil || !tagged {
		t.Fatalf("maintain: %v (tagged %v)", err, tagged)
	}
	if !slices.Contains(rep.Prune.Tagged, 5) {
		t.Fatalf("plan (floor %d) did not see the tag: tagged %v", rep.Prune.Floor, rep.Prune.Tagged)
	}
	e.drain(t)
	st, _ := table.Open(ctx, e.faulty, e.ref.Root, e.opts())
	e.clock.Advance(3 * time.Hour)
	if _, err := maintenance.Sweep(ctx, st, p, e.clock.Now(), 0, false); err != nil {
		t.Fatal(err)
	}
	snap, err := e.open(t).Checkout(ctx, 5)
	if err != nil {
		t.Fatalf("tagged version: %v", err)
	}
	rows, err := scanSnap(ctx, snap)
	if err != nil {
		t.Fatalf("tagged version: %v", err)
	}
	if err := diffRows(rows, want[5]); err != nil {
		t.Fatal(err)
	}
}

func maps_clone(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// TestSweepToleratesDanglingTag: a tag whose version's manifest is gone is
// reported; the sweep still deletes the table's orphans.
func TestSweepToleratesDanglingTag(t *testing.T) {
	ctx := context.Background()
	e, _ := newTimedEnv(t, testPolicy())
	tb := e.create(t)
	for i := range 6 {
		upsert(t, tb, "k", fmt.Sprint(i))
	}
	if err := tb.Tag(ctx, "gone", 3); err != nil {
		t.Fatal(err)
	}
	if err := e.disk.Delete(ctx, []string{tb.Root() + table.ManifestKey(3)}); err != nil {
		t.Fatal(err)
	}
	orphan := tb.Root() + table.DataPrefix + "00000000000000ff.parquet"
	if err := e.disk.Put(ctx, orphan, []byte("x")); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(3 * time.Hour)
	st, _ := table.Open(ctx, e.faulty, e.ref.Root, e.opts())
	res, err := maintenance.Sweep(ctx, st, e.ref.Policy, e.clock.Now(), 0, false)
	if err != nil {
		t.Fatalf("sweep: %v", err)
	}
	if fmt.Sprint(res.DanglingTags) != "[gone@3]" || res.Deleted == 0 {
		t.Fatalf("sweep: %+v", res)
	}
	if _, err := e.disk.Head(ctx, orphan); !errors.Is(err, objstore.ErrNotExist) {
		t.Fatalf("orphan kept: %v", err)
	}
}

// noRenew is a locker whose renewals time out (the lease is not lost, it
// just cannot be extended).
type noRenew struct{ *lock.InProcess }

func (noRenew) Renew(ctx context.Context, l *lock.Lease) (*lock.Lease, error) {
	return nil, context.DeadlineExceeded
}

// TestCompactionStopsAtLease: when the lease cannot be renewed, compaction
// stops at it (as at a deadline) and commits nothing past what the fence
// allows; the pass reports the lease in its prune step.
func TestCompactionStopsAtLease(t *testing.T) {
	ctx := context.Background()
	e, _ := newTimedEnv(t, backlogPolicy())
	e.runner.Locker = noRenew{e.locker}
	tb := e.create(t)
	for i := range 48 {
		upsert(t, tb, fmt.Sprint("k", i), "v")
	}
	before := storedVersions(t, tb)
	slowGroups(e, time.Minute)
	rep, err := e.runner.MaintainTable(ctx, e.ref)
	e.faulty.SetBefore(nil)
	c := rep.Compacted
	t.Logf("compaction %d/%d stopped %q; err %v", c.Committed, c.Planned, c.Stopped, err)
	if !strings.HasPrefix(c.Stopped, "lease") || c.Committed == 0 || c.Committed >= c.Planned {
		t.Fatalf("compaction did not stop at the lease: %+v", c)
	}
	if !errors.Is(err, lock.ErrLeaseExpired) || rep.Prune.Floor != 0 && len(rep.Prune.Ranges) > 0 {
		t.Fatalf("pass: %v, prune %+v", err, rep.Prune)
	}
	// Committed within the lease: 5 min lease, 1 min a group, a quarter
	// of the lease as the fence's margin.
	if got := len(storedVersions(t, tb)) - len(before); got != c.Committed || got > 4 {
		t.Fatalf("%d versions committed, report says %d", got, c.Committed)
	}
}

// TestPruneStateBounded: with every cleanup message lost for 100 hourly
// passes with writes, the prune state stays one object of at most
// MaxTrackedRanges ranges, and every stored version below the floor is
// still re-sent at least every ReplanAfter + one pass.
func TestPruneStateBounded(t *testing.T) {
	ctx := context.Background()
	p := testPolicy()
	p.ReplanAfter = 3 * time.Hour
	e, _ := newTimedEnv(t, p)
	lastSent := map[uint64]time.Time{}
	d := &dropper{inner: e.runner.Queue, drop: func(_ int, b []byte) bool {
		m, err := maintenance.DecodeRangeMessage(b)
		if err != nil {
			t.Fatal(err)
		}
		for v := m.From; v <= m.To; v++ {
			lastSent[v] = e.clock.Now()
		}
		return true
	}}
	e.runner.Queue = d
	tb := e.create(t)
	below := map[uint64]time.Time{}
	hourlyPasses(t, e, tb, 100, 2, func(pass int, floor uint64) {
		now := e.clock.Now()
		for _, v := range storedVersions(t, tb) {
			if v >= floor {
				continue
			}
			if _, ok := below[v]; !ok {
				below[v] = now
			}
			if now.Sub(below[v]) > p.ReplanAfter+time.Hour && now.Sub(lastSent[v]) > p.ReplanAfter+time.Hour {
				t.Fatalf("pass %d: version %d below the floor, last sent %s ago", pass, v, now.Sub(lastSent[v]))
			}
		}
		keys := listing(t, e.disk, tb.Root()+"_maintenance/prune-state/")
		if len(keys) > 1 || pass > 10 && len(keys) != 1 {
			t.Fatalf("pass %d: %d prune state objects", pass, len(keys))
		}
		for k := range keys {
			b, err := e.disk.Get(ctx, k)
			if err != nil {
				t.Fatal(err)
			}
			if n := strings.Count(string(b), `"from"`); n > maintenance.MaxTrackedRanges {
				t.Fatalf("pass %d: %d ranges tracked", pass, n)
			} else if pass == 100 {
				t.Logf("%d ranges tracked, %d bytes, %d messages lost", n, len(b), len(d.lost))
			}
		}
	})
}

// TestPruneStateAfterTokenRestart: a lock whose token sequence restarted
// (a DynamoDB item removed by TTL after a week unused) does not leave the
// new holder's prune state shadowed by the old, higher token's.
func TestPruneStateAfterTokenRestart(t *testing.T) {
	ctx := context.Background()
	p := testPolicy()
	e, _ := newTimedEnv(t, p)
	tb := e.create(t)
	hourlyPasses(t, e, tb, 5, 3, func(int, uint64) {})
	e.clock.Advance(8 * 24 * time.Hour)
	e.runner.Locker = lock.NewInProcess(e.clock)
	for i := range 5 {
		upsert(t, tb, fmt.Sprint("r", i), "x")
	}
	e.clock.Advance(3 * time.Hour)
	rep, err := e.runner.MaintainTable(ctx, e.ref)
	if err != nil || rep.Token != 1 || len(rep.Prune.Ranges) == 0 {
		t.Fatalf("after the restart: token %d ranges %+v err %v", rep.Token, rep.Prune.Ranges, err)
	}
	plan, err := maintenance.PlanPrune(ctx, e.open(t), tblName, p, e.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Ranges) != 0 {
		t.Fatalf("new holder's state shadowed: the next plan re-enqueues %+v", plan.Ranges)
	}
}
