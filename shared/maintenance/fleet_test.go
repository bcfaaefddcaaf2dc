package maintenance_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	fleetidx "github.com/tablekeep/tablekeep/shared/fleet"
	"github.com/tablekeep/tablekeep/shared/internal/fakeclock"
	"github.com/tablekeep/tablekeep/shared/lock"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/queue"
	"github.com/tablekeep/tablekeep/shared/table"
)

// fleet is N tables under one warehouse root "wh/", maintained by a Runner
// with a fleet index, on a counting store dated by a fake clock.
type fleet struct {
	clock  *fakeclock.Clock
	cnt    *objstore.Counting
	store  objstore.Store // what tables are written through (not counted)
	cat    *memCatalog
	runner *maintenance.Runner
	scan   fleetidx.Options // the scan's (IndexRoot "wh/")
	q      *queue.Embedded
	sent   *sendLog
	clean  *maintenance.Cleaner
	tables map[string]*table.Table
}

// sendLog records every cleanup message sent (and when), and can drop the
// messages of chosen tables (a lost SQS message).
type sendLog struct {
	mu    sync.Mutex
	clock *fakeclock.Clock
	next  maintenance.Enqueuer
	drop  map[string]bool
	at    map[string][]time.Time
}

func (s *sendLog) Send(ctx context.Context, bodies [][]byte) error {
	s.mu.Lock()
	var keep [][]byte
	for _, b := range bodies {
		m, err := maintenance.DecodeRangeMessage(b)
		if err != nil {
			s.mu.Unlock()
			return err
		}
		s.at[m.Table] = append(s.at[m.Table], s.clock.Now())
		if !s.drop[m.Table] {
			keep = append(keep, b)
		}
	}
	s.mu.Unlock()
	if len(keep) == 0 {
		return nil
	}
	return s.next.Send(ctx, keep)
}

func newFleet(t testing.TB, n int, p maintenance.Policy, wrap func(objstore.Store) objstore.Store) *fleet {
	t.Helper()
	disk, err := objstore.NewDisk(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	clock := fakeclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	dated := fakeclock.NewStore(disk, clock)
	f := &fleet{clock: clock, store: dated, cat: &memCatalog{}, tables: map[string]*table.Table{}}
	var inner objstore.Store = dated
	if wrap != nil {
		inner = wrap(dated)
	}
	f.cnt = objstore.NewCounting(inner)
	f.q = queue.NewEmbedded(queue.EmbeddedOptions{Clock: clock})
	f.sent = &sendLog{clock: clock, next: maintenance.QueueEnqueuer{Q: f.q}, drop: map[string]bool{}, at: map[string][]time.Time{}}
	f.runner = &maintenance.Runner{Store: f.cnt, Catalog: f.cat, Locker: lock.NewInProcess(clock), Queue: f.sent,
		Clock: clock, Logger: discard, Owner: "fleet", KeepAlive: -1}
	f.scan = fleetidx.Options{IndexRoot: "wh/"}
	f.clean = &maintenance.Cleaner{Store: dated, Tables: f.cat, Logger: discard, OpenOpts: table.Options{Clock: clock}}
	for i := range n {
		name := fmt.Sprintf("t%03d", i)
		ref := maintenance.TableRef{Name: name, Root: "wh/" + name + "/", Policy: p}
		tb, err := table.Create(context.Background(), dated, ref.Root, kvSchema, "name", f.opts(p))
		if err != nil {
			t.Fatal(err)
		}
		f.tables[name] = tb
		f.cat.refs = append(f.cat.refs, ref)
	}
	return f
}

func (f *fleet) opts(p maintenance.Policy) table.Options {
	return table.Options{Clock: fakeclock.NoSleep(f.clock), Grace: p.WithDefaults().Grace, Format: 2} // pinned
}

// addFormat3 creates and registers the format-3 table name (root
// "wh/<name>/") under policy p, and returns its ref.
func (f *fleet) addFormat3(t testing.TB, name string, p maintenance.Policy) maintenance.TableRef {
	t.Helper()
	ref := maintenance.TableRef{Name: name, Root: "wh/" + name + "/", Policy: p}
	opts := f.opts(p)
	opts.Format = 3
	tb, err := table.Create(context.Background(), f.store, ref.Root, kvSchema, "name", opts)
	if err != nil {
		t.Fatal(err)
	}
	f.tables[name] = tb
	f.cat.refs = append(f.cat.refs, ref)
	return ref
}

func (f *fleet) write(t testing.TB, name string, i int) {
	t.Helper()
	upsert(t, f.tables[name], fmt.Sprintf("k%d", i), "v")
}

// pass runs one scheduled pass and returns its report and its requests.
func (f *fleet) pass(t testing.TB) (fleetidx.RunReport, objstore.Counts) {
	t.Helper()
	before := f.cnt.Counts()
	rep, err := fleetidx.New(f.runner, f.scan).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return rep, f.cnt.Counts().Sub(before)
}

func maintained(rep fleetidx.RunReport) map[string]bool {
	out := map[string]bool{}
	for _, tr := range rep.Tables {
		out[tr.Table] = true
	}
	return out
}

// An idle table costs exactly one LIST per pass, and the pass's requests
// per idle table do not grow with the number of tables: the fleet costs
// its index on top (one LIST of the shards' folder, one GET per shard
// holding marks: one shard up to 512 tables, 16 up to 8,192, at most
// fleetidx.Shards whatever the number of tables, fleetidx.TargetShards),
// and nothing is written. (Before the shard count followed the fleet: a
// GET per shard holding marks of 256, 10 GETs at 10 tables, 82 at 100.)
func TestFleetIdleTableCostsOneList(t *testing.T) {
	for _, n := range []int{10, 100} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			f := newFleet(t, n, maintenance.DefaultPolicy(), nil)
			for name := range f.tables {
				f.write(t, name, 1)
			}
			rep, _ := f.pass(t)
			if len(rep.Tables) != n {
				t.Fatalf("first pass maintained %d tables, want %d (no marks yet)", len(rep.Tables), n)
			}
			if rep.StatsWritten != n || rep.MarksWritten != n {
				t.Fatalf("first pass wrote %d stats rows and %d marks, want %d each", rep.StatsWritten, rep.MarksWritten, n)
			}
			for range 3 {
				f.clock.Advance(15 * time.Minute)
				rep, c := f.pass(t)
				if len(rep.Tables) != 0 || rep.Idle != n {
					t.Fatalf("idle pass maintained %v, idle %d of %d", maintained(rep), rep.Idle, n)
				}
				shards := map[int]bool{}
				for name := range f.tables {
					shards[fleetidx.ShardOf(name, 1)] = true // up to 256 tables: one shard
				}
				want := objstore.Counts{List: int64(n) + 1, Get: int64(len(shards))}
				if c != want {
					t.Fatalf("idle pass over %d tables: %v, want %v (1 LIST per table, the index's LIST and a GET per shard)", n, c, want)
				}
				if rep.StatsWritten != 0 || rep.MarksWritten != 0 {
					t.Fatalf("idle pass wrote %d stats rows, %d marks", rep.StatsWritten, rep.MarksWritten)
				}
			}
		})
	}
}

// A simulated day and a half, one pass every 15 min, over tables that are
// written in bursts, idle, or whose cleanup messages are all lost: after
// every pass, every table the pass skipped is checked from the store
// itself: no tracked range due for re-planning, no prunable versions over
// the threshold or waiting past the bound, no compaction need over the
// threshold. The lost ranges are re-sent within ReplanAfter + one pass
// although the table is idle.
func TestFleetSkippedTableNeverNeedsWork(t *testing.T) {
	p := maintenance.Policy{KeepLast: 3, Grace: time.Hour, TargetRows: 1000, ReplanAfter: 2 * time.Hour,
		CompactMinFragments: 8, CompactMaxWait: time.Hour, PruneMinVersions: 5, PruneMaxWait: 45 * time.Minute}.WithDefaults()
	const period = 15 * time.Minute
	f := newFleet(t, 6, p, nil)
	f.sent.drop["t001"] = true // every message of t001 is lost
	ctx := context.Background()
	writes := 0
	planner := maintenance.NewCompactor(discard, f.clock).Planner
	for pass := 0; pass < 36*4; pass++ {
		// Writes during the 15 minutes before the pass, one a minute.
		for m := 0; m < 15; m++ {
			f.clock.Advance(time.Minute)
			min := pass*15 + m
			for name := range f.tables {
				var on bool
				switch name {
				case "t000": // always written
					on = true
				case "t001", "t002": // a burst in the first hour, then idle
					on = min < 60
				case "t003": // one write every 40 minutes
					on = min%40 == 0
				case "t004": // a burst at hour 10
					on = min >= 600 && min < 630
				}
				if on {
					writes++
					f.write(t, name, writes)
				}
			}
		}
		rep, _ := f.pass(t)
		if _, err := maintenance.DrainLocal(ctx, f.q, f.clean, discard); err != nil {
			t.Fatal(err)
		}
		now := f.clock.Now()
		did := maintained(rep)
		for _, ref := range f.cat.refs {
			if did[ref.Name] {
				continue
			}
			tb, err := table.Open(ctx, f.store, ref.Root, f.opts(p))
			if err != nil {
				t.Fatal(err)
			}
			plan, err := maintenance.PlanPrune(ctx, tb, ref.Name, p, now)
			if err != nil {
				t.Fatal(err)
			}
			if plan.Replanned > 0 {
				t.Fatalf("pass %d (%s): skipped %s has %d tracked ranges due for re-planning", pass, now, ref.Name, plan.Replanned)
			}
			fresh := 0
			for _, r := range plan.Ranges {
				fresh += int(r.To - r.From + 1)
			}
			if fresh >= p.PruneMinVersions {
				t.Fatalf("pass %d: skipped %s has %d prunable versions not enqueued (threshold %d)", pass, ref.Name, fresh, p.PruneMinVersions)
			}
			if fresh > 0 {
				// The first of them became prunable when its successor
				// left the grace window: at most PruneMaxWait + a pass ago.
				vs, err := tb.Versions(ctx)
				if err != nil {
					t.Fatal(err)
				}
				first := plan.Ranges[0].From
				for i, v := range vs {
					if v.Version == first && i+1 < len(vs) {
						became := vs[i+1].Time.Add(maintenance.RetentionGrace(tb, p))
						if now.Sub(became) > p.PruneMaxWait+period {
							t.Fatalf("pass %d: skipped %s: version %d prunable since %s, past the bound", pass, ref.Name, first, now.Sub(became))
						}
					}
				}
			}
			n := 0
			for _, g := range planner.Plan(tb.Cached(), p).Groups {
				n += len(g.Fragments)
			}
			if n >= p.CompactMinFragments {
				t.Fatalf("pass %d: skipped %s has %d fragments to compact (threshold %d)", pass, ref.Name, n, p.CompactMinFragments)
			}
		}
	}
	// t001's ranges were all lost: re-sent every ReplanAfter (+ one pass)
	// for as long as they are not cleaned, while it is idle.
	at := f.sent.at["t001"]
	if len(at) < 5 {
		t.Fatalf("t001 ranges sent %d times over 36 h, want a re-send every %s", len(at), p.ReplanAfter)
	}
	var gaps []time.Duration
	for i := 1; i < len(at); i++ {
		if g := at[i].Sub(at[i-1]); g > 0 {
			gaps = append(gaps, g)
			if g > p.ReplanAfter+period {
				t.Fatalf("t001: a lost range waited %s to be re-sent, over ReplanAfter + one pass (%s)", g, p.ReplanAfter+period)
			}
		}
	}
	if last := f.clock.Now().Sub(at[len(at)-1]); last > p.ReplanAfter+period {
		t.Fatalf("t001: no re-send in the last %s", last)
	}
	// The others were cleaned: nothing stored below their floor.
	for _, name := range []string{"t002", "t004"} {
		tb := f.tables[name]
		vs, _ := tb.Versions(ctx)
		floor, _ := tb.Floor(ctx)
		if len(vs) == 0 || vs[0].Version < floor {
			t.Fatalf("%s: versions from %d stored below floor %d after a day idle", name, vs[0].Version, floor)
		}
	}
}

// failStore fails every request under one root, or (hang) blocks it until
// its context ends: a table that always fails or always times out.
type failStore struct {
	objstore.Store
	root string
	hang bool
}

var errBroken = errors.New("broken table")

func (s *failStore) check(ctx context.Context, key string) error {
	if !strings.HasPrefix(key, s.root) {
		return nil
	}
	if s.hang {
		<-ctx.Done()
		return ctx.Err()
	}
	return errBroken
}

func (s *failStore) Get(ctx context.Context, k string) ([]byte, error) {
	if err := s.check(ctx, k); err != nil {
		return nil, err
	}
	return s.Store.Get(ctx, k)
}

func (s *failStore) List(ctx context.Context, o objstore.ListOptions) (objstore.ListPage, error) {
	if err := s.check(ctx, o.Prefix); err != nil {
		return objstore.ListPage{}, err
	}
	return s.Store.List(ctx, o)
}

// One table that always fails and one that always times out: every other
// table in need is maintained at every pass; after their first failure they
// are never picked before a table that did not fail, and are retried only
// after a backoff that grows.
func TestFleetFailingTablesDoNotDelayOthers(t *testing.T) {
	for _, hang := range []bool{false, true} {
		t.Run(map[bool]string{false: "fails", true: "times-out"}[hang], func(t *testing.T) {
			p := maintenance.Policy{KeepLast: 3, Grace: time.Hour, CompactMinFragments: 2}.WithDefaults()
			f := newFleet(t, 6, p, func(s objstore.Store) objstore.Store { return &failStore{Store: s, root: "wh/t000/", hang: hang} })
			if hang {
				// Real time: the hanging table's bound (a healthy table here
				// takes a few ms; the bound only ends the hanging one).
				f.runner.TableTimeout, f.scan.ScanTimeout = time.Second, time.Second
			}
			var tries []time.Time
			for pass := 0; pass < 32; pass++ {
				for m := 0; m < 15; m++ {
					f.clock.Advance(time.Minute)
					for name := range f.tables {
						f.write(t, name, pass*15+m)
					}
				}
				rep, _ := f.pass(t)
				did := maintained(rep)
				for name := range f.tables {
					if name != "t000" && !did[name] {
						t.Fatalf("pass %d: %s (written, in need) not maintained: %v; idle %d backoff %d index %q stopped %q scan %+v", pass, name, did, rep.Idle, rep.BackingOff, rep.IndexNote, rep.Stopped, rep.Scan)
					}
				}
				for i, tr := range rep.Tables {
					if tr.Table != "t000" {
						continue
					}
					if tr.Skipped == "" || !strings.HasPrefix(tr.Skipped, "error:") {
						t.Fatalf("pass %d: t000 did not fail: %+v", pass, tr)
					}
					tries = append(tries, f.clock.Now())
					if len(tries) > 1 && i != len(rep.Tables)-1 {
						for _, tr := range rep.Tables {
							t.Logf("%s: %q", tr.Table, tr.Skipped)
						}
						t.Fatalf("pass %d: t000, which failed before, maintained at position %d of %d", pass, i, len(rep.Tables))
					}
				}
			}
			// 8 h of passes: retried after 15 min, 30, 60, 120, 240 min: not at every pass.
			if len(tries) < 3 || len(tries) > 6 {
				t.Fatalf("t000 tried %d times in 32 passes, want a growing backoff: %v", len(tries), tries)
			}
			for i := 2; i < len(tries); i++ {
				if tries[i].Sub(tries[i-1]) < tries[i-1].Sub(tries[i-2]) {
					t.Fatalf("backoff shrank: %v", tries)
				}
			}
		})
	}
}

// Two index writers that read the same index both land their marks: the
// loser of the PutIfAbsent race re-reads and merges. A fan-out consumer's
// MaintainNamed records its table's mark, so the next scan finds it idle.
func TestFleetIndexMergeAndMaintainNamed(t *testing.T) {
	f := newFleet(t, 3, maintenance.DefaultPolicy(), nil)
	for name := range f.tables {
		f.write(t, name, 1)
	}
	ctx := context.Background()
	// Two consumers, one table each, at once.
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, name := range []string{"t000", "t001"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := *f.runner // same store and index, separate runner
			rep, err := fleetidx.New(&r, f.scan).MaintainNamed(ctx, name)
			if err == nil && (len(rep.Tables) != 1 || rep.Tables[0].Skipped != "" || rep.MarksWritten != 1) {
				err = fmt.Errorf("maintain %s: %+v", name, rep)
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	idx, err := fleetidx.Read(ctx, f.cnt, "wh/")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"t000", "t001"} {
		if m, ok := idx.Tables[name]; !ok || m.Latest == 0 || m.Root != "wh/"+name+"/" {
			t.Fatalf("mark of %s lost in the race: %+v", name, idx.Tables)
		}
	}
	sc, err := fleetidx.New(f.runner, f.scan).Scan(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(sc.Need) != 1 || sc.Need[0].Table != "t002" || sc.Idle != 2 {
		t.Fatalf("scan after MaintainNamed(t000), (t001): need %+v, idle %d; want only t002 (no mark)", sc.Need, sc.Idle)
	}
	if _, err := fleetidx.New(f.runner, f.scan).MaintainNamed(ctx, "nope"); err != nil {
		t.Fatal(err)
	}
	// A maintenance under another policy than the registry's (the CLI's
	// compaction-only pass keeps every version) leaves its table due.
	ref := f.cat.refs[0]
	ref.Policy = ref.Policy.WithDefaults()
	ref.Policy.KeepLast = 1 << 30
	tr, err := f.runner.MaintainTable(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	// MaintainTable writes no mark: RecordTables does.
	if sc, err = fleetidx.New(f.runner, f.scan).Scan(ctx); err != nil || len(sc.Need) != 1 {
		t.Fatalf("MaintainTable alone recorded something: need %+v, %v", sc.Need, err)
	}
	if rec := fleetidx.New(f.runner, f.scan).RecordTables(ctx, tr); rec.MarksWritten != 1 || rec.IndexNote != "" {
		t.Fatalf("RecordTables: %d marks, %q", rec.MarksWritten, rec.IndexNote)
	}
	if sc, err = fleetidx.New(f.runner, f.scan).Scan(ctx); err != nil {
		t.Fatal(err)
	}
	if len(sc.Need) != 2 || sc.Need[0].Table != "t002" && sc.Need[1].Table != "t002" {
		t.Fatalf("after a compaction-only maintenance of %s: need %+v", ref.Name, sc.Need)
	}
}
