package maintenance_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	fleetidx "github.com/tablekeep/tablekeep/shared/fleet"
	"github.com/tablekeep/tablekeep/shared/lock"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/queue"
	"github.com/tablekeep/tablekeep/shared/table"
)

func frag(id, rows, deleted uint64) table.Fragment {
	f := table.Fragment{ID: id, Rows: rows, Bytes: rows * 10}
	if deleted > 0 {
		f.Deletion = &table.Deletion{ID: 1, Rows: deleted}
	}
	return f
}

// TestSizePlanner: small and deletion-heavy fragments are candidates;
// adjacent candidates group up to the target; a large clean fragment
// splits groups; a lone clean candidate is left alone; per-run limits hold.
func TestSizePlanner(t *testing.T) {
	p := maintenance.Policy{TargetRows: 100, DeletedThreshold: 0.1}.WithDefaults()
	m := &table.Manifest{Version: 9, Fragments: []table.Fragment{
		frag(1, 10, 0), frag(2, 20, 0), frag(3, 80, 0), // 10+20 fit, 80 would overflow: new group
		frag(4, 90, 0),     // joins 3? 80+90 > 100: own group, alone and clean: dropped
		frag(5, 1000, 0),   // big and clean: not a candidate, splits groups
		frag(6, 1000, 200), // 20% deleted: candidate alone with deletions: rewritten
		frag(7, 1000, 50),  // 5% deleted, big: not a candidate
		frag(8, 5, 0),      // lone small clean fragment at the end: left alone
	}}
	plan := maintenance.SizePlanner{}.Plan(m, p)
	var got [][]uint64
	for _, g := range plan.Groups {
		var ids []uint64
		for _, f := range g.Fragments {
			ids = append(ids, f.ID)
		}
		got = append(got, ids)
	}
	if fmt.Sprint(got) != "[[1 2] [6]]" {
		t.Fatalf("groups %v", got)
	}
	p.MaxGroups = 1
	if plan := (maintenance.SizePlanner{}).Plan(m, p); len(plan.Groups) != 1 {
		t.Fatalf("MaxGroups 1: %d groups", len(plan.Groups))
	}
	p.MaxGroups, p.MaxInputBytes = 10, 200 // group [1 2] reads 300 bytes
	if plan := (maintenance.SizePlanner{}).Plan(m, p); len(plan.Groups) != 0 {
		t.Fatalf("MaxInputBytes 200: %d groups", len(plan.Groups))
	}
}

// TestNoOpPlanCommitsNothing: a compacted table plans nothing and a run
// commits no version.
func TestNoOpPlanCommitsNothing(t *testing.T) {
	e := newEnv(t, t.TempDir(), testPolicy(), queue.EmbeddedOptions{})
	tb := e.create(t)
	upsert(t, tb, "a", "1")
	c := maintenance.NewCompactor(discard, e.clock)
	res, err := c.Run(context.Background(), tb, e.ref.Policy)
	if err != nil || res.Planned != 0 || res.Committed != 0 {
		t.Fatalf("run %+v %v", res, err)
	}
	if v := tb.Cached().Version; v != 2 {
		t.Fatalf("version %d after a no-op compaction", v)
	}
}

// TestCompactionStopsNearDeadline: groups commit one by one; with too little
// time left before the deadline the run stops cleanly and the next run
// continues.
func TestCompactionStopsNearDeadline(t *testing.T) {
	e := newEnv(t, t.TempDir(), testPolicy(), queue.EmbeddedOptions{})
	tb := e.create(t)
	// Six 400-row fragments with target 1000: three groups of two.
	for i := range 6 {
		b := make([]string, 0, 800)
		for j := range 400 {
			b = append(b, fmt.Sprintf("k%d-%03d", i, j), "v")
		}
		if _, err := tb.Upsert(context.Background(), kv(b...)); err != nil {
			t.Fatal(err)
		}
	}
	want := latestRows(t, tb)
	c := maintenance.NewCompactor(discard, e.clock)
	c.Margin = time.Minute
	// A deadline 30 s away (on the fake clock) is inside the margin: nothing runs.
	ctx, cancel := context.WithDeadline(context.Background(), e.clock.Now().Add(30*time.Second))
	res, err := c.Run(ctx, tb, e.ref.Policy)
	cancel()
	if err != nil || res.Planned != 3 || res.Committed != 0 || res.Stopped == "" {
		t.Fatalf("near deadline: %+v %v", res, err)
	}
	// A compactor whose clock jumps past the margin after the first group
	// commits exactly one group: partial progress.
	steps := 0
	c.Clock = funcClock(func() time.Time {
		steps++
		if steps > 2 {
			return e.clock.Now().Add(10 * time.Minute)
		}
		return e.clock.Now()
	})
	ctx, cancel = context.WithDeadline(context.Background(), e.clock.Now().Add(5*time.Minute))
	res, err = c.Run(ctx, tb, e.ref.Policy)
	cancel()
	if err != nil || res.Committed != 1 || res.Stopped == "" {
		t.Fatalf("partial: %+v %v", res, err)
	}
	c.Clock = e.clock
	res, err = c.Run(context.Background(), tb, e.ref.Policy)
	if err != nil || res.Committed != 2 {
		t.Fatalf("next run: %+v %v", res, err)
	}
	if err := diffRows(latestRows(t, tb), want); err != nil {
		t.Fatal(err)
	}
	if n := len(tb.Cached().Fragments); n != 3 {
		t.Fatalf("%d fragments", n)
	}
}

// TestCleanerContinuation: a range with more keys than MaxKeysPerRun is
// cleaned over several invocations, each enqueueing the rest; the result
// equals an unbounded run.
func TestCleanerContinuation(t *testing.T) {
	p := testPolicy()
	p.MaxKeysPerRun = 5
	e := newEnv(t, t.TempDir(), p, queue.EmbeddedOptions{})
	tb := e.create(t)
	for i := range 40 {
		upsert(t, tb, fmt.Sprint("k", i%4), fmt.Sprint(i))
	}
	want := latestRows(t, tb)
	e.clock.Advance(2 * time.Hour)
	if _, err := e.runner.MaintainTable(context.Background(), e.ref); err != nil {
		t.Fatal(err)
	}
	var invocations, continued int
	for {
		ds, err := e.q.Receive(context.Background(), 1, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) == 0 {
			break
		}
		res, err := e.clean.Clean(context.Background(), ds[0].Body)
		if err != nil {
			t.Fatal(err)
		}
		if res.DataKeys > p.MaxKeysPerRun+2 { // the budget is checked per change record
			t.Fatalf("invocation deleted %d data keys, budget %d", res.DataKeys, p.MaxKeysPerRun)
		}
		invocations++
		if res.Continuation != nil {
			continued++
		}
		if err := e.q.Ack(context.Background(), ds[0]); err != nil {
			t.Fatal(err)
		}
	}
	if continued == 0 || invocations != continued+1 {
		t.Fatalf("%d invocations, %d continuations", invocations, continued)
	}
	vs, _ := tb.Versions(context.Background())
	if len(vs) != p.KeepLast {
		t.Fatalf("%d versions left, want %d", len(vs), p.KeepLast)
	}
	if err := diffRows(latestRows(t, tb), want); err != nil {
		t.Fatal(err)
	}
}

// TestStatsRefreshWaitsBounded: when another master holds the stats-writer
// lock, the refresh waits at most StatsWait and leaves the row to the next
// run; the maintenance it reports on is committed.
func TestStatsRefreshWaitsBounded(t *testing.T) {
	e := newEnv(t, t.TempDir(), testPolicy(), queue.EmbeddedOptions{})
	tb := e.create(t)
	for i := range 6 {
		upsert(t, tb, fmt.Sprint("k", i), "v")
	}
	held, err := e.locker.Acquire(context.Background(), e.runner.StatsLockName(), lock.AcquireOptions{Owner: "master-2", Lease: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	e.runner.StatsWait = 10 * time.Second
	start := e.clock.Now()
	rep, err := e.runner.MaintainTable(context.Background(), e.ref)
	if err != nil {
		t.Fatal(err)
	}
	// MaintainTable writes no stats row: RecordTables does.
	if _, ok := e.cat.stats[tblName]; ok {
		t.Fatal("MaintainTable wrote a stats row")
	}
	rep = fleetidx.New(e.runner, fleetidx.Options{}).RecordTables(context.Background(), rep).Tables[0]
	waited := e.clock.Now().Sub(start)
	if rep.StatsNote == "" || waited < 10*time.Second || waited > 11*time.Second {
		t.Fatalf("stats note %q after %s", rep.StatsNote, waited)
	}
	if rep.Compacted.Committed != 1 {
		t.Fatalf("compaction not committed: %+v", rep.Compacted)
	}
	if _, ok := e.cat.stats[tblName]; ok {
		t.Fatal("stats written without the lock")
	}
	e.locker.Release(context.Background(), held)
	if rep, err = e.runner.MaintainTable(context.Background(), e.ref); err != nil {
		t.Fatal(err)
	}
	fleetidx.New(e.runner, fleetidx.Options{}).RecordTables(context.Background(), rep)
	if s, ok := e.cat.stats[tblName]; !ok || s.Rows != 6 || s.Fragments != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// TestPolicyGraceNotShorterThanWriters: a maintenance grace shorter than the
// writers' stale-read window would let cleanup delete what a slow writer is
// about to commit on.
func TestPolicyGraceNotShorterThanWriters(t *testing.T) {
	p := maintenance.Policy{Grace: 10 * time.Minute}.WithDefaults()
	if err := p.Validate(); !errors.Is(err, maintenance.ErrInvalidPolicy) {
		t.Fatalf("grace 10m: %v", err)
	}
	p.Grace = table.DefaultGrace
	if err := p.Validate(); err != nil {
		t.Fatalf("grace %s: %v", p.Grace, err)
	}
}

// funcClock is a clock.Clock reading f; it does not sleep.
type funcClock func() time.Time

func (f funcClock) Now() time.Time                                 { return f() }
func (funcClock) Sleep(ctx context.Context, _ time.Duration) error { return ctx.Err() }
