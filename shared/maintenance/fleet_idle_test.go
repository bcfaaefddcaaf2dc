package maintenance_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/clock"
	fleetidx "github.com/tablekeep/tablekeep/shared/fleet"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
)

const (
	testSafetyEvery = 6 * time.Hour
	testPass        = 15 * time.Minute
)

// With the safety-net scan on (S3 notifications), a settled idle pass
// costs, exactly: the index's LIST, the scan state's GET and PUT, and for
// the shards whose phase point falls in the pass's window one GET each and
// one LIST per table. Over one cadence (24 passes of 15 min in 6 h) every
// table is listed exactly once, about 1/24 of them a pass, never all at
// once. (Without it: 1 LIST per table per pass, TestFleetIdleTableCostsOneList.)
func TestFleetIdleNotifiedRequests(t *testing.T) {
	const n = 100
	f := newFleet(t, n, maintenance.DefaultPolicy(), nil)
	f.scan.SafetyScanEvery = testSafetyEvery
	for name := range f.tables {
		f.write(t, name, 1)
	}
	if rep, _ := f.pass(t); len(rep.Tables) != n {
		t.Fatalf("first pass maintained %d tables, want %d", len(rep.Tables), n)
	}
	prev := f.clock.Now()
	f.clock.Advance(testPass)
	// The second pass has a state but no shard summaries yet: it reads
	// every shard (and lists the tables of its window).
	if rep, _ := f.pass(t); len(rep.Tables) != 0 {
		t.Fatalf("second pass maintained %v", maintained(rep))
	}
	prev = f.clock.Now()
	listed := map[string]int{}
	maxListed := 0
	var total objstore.Counts
	for p := range 24 {
		f.clock.Advance(testPass)
		now := f.clock.Now()
		wantTables, wantShards := 0, map[int]bool{}
		for name := range f.tables {
			if fleetidx.InSafetyWindow(fleetidx.ShardOf(name, fleetidx.Shards), prev, now, testSafetyEvery) {
				wantTables++
				wantShards[fleetidx.ShardOf(name, 1)] = true // 100 tables: one shard
				listed[name]++
			}
		}
		rep, c := f.pass(t)
		if len(rep.Tables) != 0 || rep.Idle != n {
			t.Fatalf("pass %d maintained %v, idle %d", p, maintained(rep), rep.Idle)
		}
		want := objstore.Counts{List: 1 + int64(wantTables), Get: 1 + int64(len(wantShards)), Put: 1}
		if c != want {
			t.Fatalf("idle pass %d: %v, want %v (index LIST, state GET+PUT, %d shards and %d tables of the window)", p, c, want, len(wantShards), wantTables)
		}
		if got := rep.Scan.Listed(); got != wantTables {
			t.Fatalf("pass %d listed %d tables, want %d", p, got, wantTables)
		}
		maxListed = max(maxListed, wantTables)
		total = total.Add(c)
		prev = now
	}
	for name := range f.tables {
		if listed[name] != 1 {
			t.Fatalf("table %s listed %d times in one cadence, want 1", name, listed[name])
		}
	}
	if maxListed > n/4 {
		t.Fatalf("a pass listed %d of %d tables: not spread over the cadence", maxListed, n)
	}
	perPass := float64(total.Get+total.Put+total.List) / 24 / n
	t.Logf("idle table, notifications on, %d tables: %.4f requests a pass (LIST %d, GET %d, PUT %d over 24 passes)", n, perPass, total.List, total.Get, total.Put)
	if total.List != n+24 {
		t.Fatalf("LISTs over one cadence: %d, want %d (each table once, the index once a pass)", total.List, n+24)
	}
}

// skewed is a clock off the fleet's by a fixed offset (another scanner's).
type skewed struct {
	clock.Clock
	off time.Duration
}

func (s skewed) Now() time.Time { return s.Clock.Now().Add(s.off) }

// The bound on a change whose notification is lost (docs/reliability.md
// "Safety-net scan"): with cadence S, passes at most P apart and scanner
// clocks within δ of true time, the change is noticed (the scan records it
// in the table's mark, or a maintenance takes it) by c + S + P + 2δ. Three
// simulated days, 12 tables, writes at random minutes, half of their
// notifications delivered (the queue consumer maintains the table), half
// lost; passes alternate between two scanners whose clocks are δ ahead and
// behind. Every lost change is noticed within the bound, and (the cadence
// really is in effect) some only after hours: the test never requires one
// before the bound.
func TestFleetSafetyNetBoundForLostNotification(t *testing.T) {
	const n = 12
	const skew = 30 * time.Second
	bound := testSafetyEvery + testPass + 2*skew
	f := newFleet(t, n, maintenance.DefaultPolicy(), nil)
	f.scan.SafetyScanEvery = testSafetyEvery
	ahead, behind := *f.runner, *f.runner
	ahead.Clock, behind.Clock = skewed{f.clock, skew}, skewed{f.clock, -skew}
	ctx := context.Background()
	for name := range f.tables {
		f.write(t, name, 1)
	}
	if _, err := fleetidx.New(f.runner, f.scan).Run(ctx); err != nil {
		t.Fatal(err)
	}
	type lost struct {
		table   string
		version uint64
		at      time.Time
	}
	var pending []lost
	rng := rand.New(rand.NewPCG(23, 4))
	names := make([]string, 0, n)
	for name := range f.tables {
		names = append(names, name)
	}
	noticed, late, k := 0, 0, 1
	var longest time.Duration
	passes := 3 * 24 * 4
	for p := range passes {
		for range 15 {
			f.clock.Advance(time.Minute)
			if rng.IntN(40) != 0 {
				continue
			}
			name := names[rng.IntN(n)]
			k++
			res := upsert(t, f.tables[name], fmt.Sprintf("k%d", k), "v")
			if rng.IntN(2) == 0 {
				if _, err := fleetidx.New(f.runner, f.scan).MaintainNamed(ctx, name); err != nil {
					t.Fatal(err)
				}
				continue
			}
			pending = append(pending, lost{name, res.Version, f.clock.Now()})
		}
		r := &ahead
		if p%2 == 1 {
			r = &behind
		}
		if _, err := fleetidx.New(r, f.scan).Run(ctx); err != nil {
			t.Fatal(err)
		}
		idx, err := fleetidx.Read(ctx, f.store, "wh/")
		if err != nil {
			t.Fatal(err)
		}
		now := f.clock.Now()
		var still []lost
		for _, l := range pending {
			m := idx.Tables[l.table]
			if m.Latest >= l.version || m.Seen >= l.version {
				noticed++
				d := now.Sub(l.at)
				longest = max(longest, d)
				if d > 2*time.Hour {
					late++
				}
				continue
			}
			if now.Sub(l.at) > bound {
				t.Fatalf("pass %d: %s's version %d written at %s unnoticed after %s, beyond the bound %s", p, l.table, l.version, l.at.Format(time.TimeOnly), now.Sub(l.at), bound)
			}
			still = append(still, l)
		}
		pending = still
	}
	if noticed < 20 || late == 0 {
		t.Fatalf("%d lost changes noticed, %d after more than 2 h: the simulation does not exercise the safety net", noticed, late)
	}
	t.Logf("%d lost notifications, noticed within %s (bound %s); %d after more than 2 h", noticed, longest, bound, late)
}

// A table whose writes are not notified (awsfn: _stats) is listed, and its
// shard read, at every pass of the safety-net scan, exactly.
func TestFleetUnnotifiedTableListedEveryPass(t *testing.T) {
	const n = 20
	f := newFleet(t, n, maintenance.DefaultPolicy(), nil)
	f.scan.SafetyScanEvery = testSafetyEvery
	f.scan.Unnotified = func(ref maintenance.TableRef) bool { return ref.Name == "t000" }
	for range 2 {
		f.pass(t)
		f.clock.Advance(testPass)
	}
	prev := f.clock.Now().Add(-testPass)
	for p := range 8 {
		now := f.clock.Now()
		tables, shards := 0, map[int]bool{0: true} // a small fleet: one shard, read for t000
		for name := range f.tables {
			if name == "t000" || fleetidx.InSafetyWindow(fleetidx.ShardOf(name, fleetidx.Shards), prev, now, testSafetyEvery) {
				tables++
			}
		}
		rep, c := f.pass(t)
		if want := (objstore.Counts{List: 1 + int64(tables), Get: 1 + int64(len(shards)), Put: 1}); c != want || len(rep.Tables) != 0 {
			t.Fatalf("pass %d: %v, want %v; maintained %v", p, c, want, maintained(rep))
		}
		prev = now
		f.clock.Advance(testPass)
	}
}
