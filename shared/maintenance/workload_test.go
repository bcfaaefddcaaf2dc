package maintenance_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/internal/fakeclock"
	"github.com/tablekeep/tablekeep/shared/internal/testkit"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/queue"
	"github.com/tablekeep/tablekeep/shared/table"
)

// workload runs writers for a bounded time while scheduled maintenance
// (Runner.MaintainTable every MaintainEvery) and cleaners (queue.Drain
// loops on the embedded queue) run, then finishes maintenance (grace
// expired on the fake clock, final sweep) and checks the model: the latest
// version equals the writes replayed in commit-version order (no row lost,
// duplicated or resurrected), every retained version reads exactly the
// model at that version, and no unreferenced file older than grace is left.
type workload struct {
	Writers       int
	Cleaners      int
	Duration      time.Duration
	MaintainEvery time.Duration
	KeySpace      int
	Seed          uint64
	// Quiet, if set, is called with true before each verification (model
	// check) and with false after it: a fault test turns injection off for
	// the verification reads only; the final maintenance runs with faults.
	Quiet func(bool)
	// AfterCreate runs once the table exists, before the load starts.
	AfterCreate func()
	// AfterLoad runs once writers, maintenance and cleaners have stopped.
	AfterLoad func()
	// Queue, if set, is what the cleaners drain instead of e.q, with
	// visibility Visibility (zero: 10 grace windows); FinalDrain then
	// replaces the final e.drain.
	Queue      queue.Queue
	Visibility time.Duration
	FinalDrain func(t testing.TB)
	// Runners maintain the table in loops beside e.runner; their runs
	// never span a step of the fake clock.
	Runners []*maintenance.Runner
	// Tolerate, if set, reports errors of maintenance runs and drains
	// during the load that are expected (counted in Tolerated, not fatal).
	Tolerate func(error) bool
	// WritePause, if set, is each writer's pause between operations: fewer
	// versions, so maintenance runs complete often enough under faults.
	WritePause time.Duration
}

type workloadReport struct {
	Commits       int
	Deletes       int // of Commits
	Retried       int // sum of CommitResult.Attempts-1
	NoOps         int // deletes that found nothing to delete
	Elapsed       time.Duration
	P50, P99, Max time.Duration
	Maintenance   int // MaintainTable runs during the load
	Compactions   int
	Dropped       int // compaction groups dropped (inputs changed by writers)
	Cleaned       int // cleanup messages handled successfully
	CleanFailed   int // failed deliveries (retried)
	VersionsAtEnd int // stored versions when the writers stopped
	GarbageAtEnd  int64
	VersionsLeft  int // after the final maintenance and sweep
	GarbageLeft   int64
	Swept         int
	Tolerated     int // errors of runs and drains during the load passed by Tolerate
}

func (r workloadReport) String() string {
	return fmt.Sprintf("%d commits in %s (%.0f commits/s, %d deletes), %d conflicts retried, commit p50 %s p99 %s max %s; "+
		"%d maintenance runs, %d compaction commits (%d groups dropped), %d cleanup messages (%d failed deliveries retried); "+
		"at end of load %d versions, %d B unreferenced; after final maintenance+sweep %d versions, %d B unreferenced (%d swept)",
		r.Commits, r.Elapsed.Round(time.Millisecond), float64(r.Commits)/r.Elapsed.Seconds(), r.Deletes, r.Retried,
		r.P50.Round(time.Microsecond*100), r.P99.Round(time.Microsecond*100), r.Max.Round(time.Millisecond),
		r.Maintenance, r.Compactions, r.Dropped, r.Cleaned, r.CleanFailed, r.VersionsAtEnd, r.GarbageAtEnd, r.VersionsLeft, r.GarbageLeft, r.Swept)
}

func loadPolicy() maintenance.Policy {
	p := testPolicy()
	p.KeepLast = 10
	p.TargetRows = 64
	p.RangeVersions = 50
	p.MaxKeysPerRun = 200
	return p
}

// newWorkloadEnv wires maintenance over store with fake-clock object times.
func newWorkloadEnv(t testing.TB, store objstore.Store, p maintenance.Policy) *env {
	t.Helper()
	e := newEnv(t, t.TempDir(), p, queue.EmbeddedOptions{MaxReceives: 5})
	ts := fakeclock.NewStore(store, e.clock)
	e.disk = ts
	e.faulty = objstore.NewFaulty(ts)
	e.runner.Store, e.clean.Store = e.faulty, e.faulty
	return e
}

// loadDuration reads TABLEKEEP_LOAD_DURATION (a Go duration), else def.
func loadDuration(t testing.TB, def time.Duration) time.Duration {
	if s := os.Getenv("TABLEKEEP_LOAD_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("TABLEKEEP_LOAD_DURATION=%q: %v", s, err)
		}
		return d
	}
	return def
}

func (w workload) run(t testing.TB, e *env) workloadReport {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := e.ref.Policy
	e.create(t)
	if w.AfterCreate != nil {
		w.AfterCreate()
	}
	step := p.Grace/2 + time.Minute
	// Writers hold inOp (read) through each op; a clock step takes it
	// (write), so no op spans a step and none outlives the grace window.
	var inOp sync.RWMutex
	var (
		mu      sync.Mutex
		ops     []committedOp
		lat     []time.Duration
		rep     workloadReport
		errList []error
	)
	fail := func(err error) {
		mu.Lock()
		errList = append(errList, err)
		mu.Unlock()
		cancel()
	}
	tolerate := func(err error) bool {
		if w.Tolerate == nil || !w.Tolerate(err) {
			return false
		}
		mu.Lock()
		if rep.Tolerated < 5 {
			t.Logf("tolerated: %v", err)
		}
		rep.Tolerated++
		mu.Unlock()
		return true
	}
	cq, visibility := queue.Queue(e.q), 10*p.Grace
	if w.Queue != nil {
		cq = w.Queue
	}
	if w.Visibility > 0 {
		visibility = w.Visibility
	}
	// runMu: extra runners' runs take it shared, clock steps exclusively.
	var runMu sync.RWMutex
	stop := make(chan struct{})
	var writers, background sync.WaitGroup
	start := time.Now()
	for wi := range w.Writers {
		h := e.open(t)
		writers.Add(1)
		go func() {
			defer writers.Done()
			rng := rand.New(rand.NewPCG(w.Seed, uint64(wi)))
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				case <-ctx.Done():
					return
				default:
				}
				name := fmt.Sprintf("k%03d", rng.IntN(w.KeySpace))
				del := rng.IntN(4) == 0
				val := fmt.Sprintf("w%d-%d", wi, i)
				inOp.RLock()
				t0 := time.Now()
				var res *table.CommitResult
				var err error
				if del {
					res, err = h.Delete(ctx, name)
				} else {
					rec := kv(name, val)
					res, err = h.Upsert(ctx, rec)
					rec.Release()
				}
				d := time.Since(t0)
				inOp.RUnlock()
				if err != nil {
					if ctx.Err() == nil {
						fail(fmt.Errorf("writer %d op %d (%s): %w", wi, i, name, err))
					}
					return
				}
				mu.Lock()
				rep.Retried += res.Attempts - 1
				switch {
				case del && res.RowsDeleted == 0:
					rep.NoOps++
				case del:
					ops = append(ops, committedOp{res.Version, name, ""})
					rep.Deletes++
					lat = append(lat, d)
				default:
					ops = append(ops, committedOp{res.Version, name, val})
					lat = append(lat, d)
				}
				mu.Unlock()
				if w.WritePause > 0 {
					select {
					case <-stop:
						return
					case <-time.After(w.WritePause):
					}
				}
			}
		}()
	}
	background.Add(1)
	go func() { // scheduled maintenance
		defer background.Done()
		tick := time.NewTicker(w.MaintainEvery)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			inOp.Lock()
			runMu.Lock()
			e.clock.Advance(step)
			runMu.Unlock()
			inOp.Unlock()
			tr, err := e.runner.MaintainTable(ctx, e.ref)
			if err != nil && tolerate(err) {
				continue
			}
			if err != nil {
				if ctx.Err() == nil {
					fail(fmt.Errorf("maintain: %w", err))
				}
				return
			}
			mu.Lock()
			rep.Maintenance++
			rep.Compactions += tr.Compacted.Committed
			rep.Dropped += tr.Compacted.Dropped
			if tr.Compacted.Stopped != "" {
				t.Logf("compaction stopped: %s", tr.Compacted.Stopped)
			}
			mu.Unlock()
		}
	}()
	for ri, r := range w.Runners {
		background.Add(1)
		go func() { // another runner on the same table
			defer background.Done()
			for {
				select {
				case <-stop:
					return
				case <-ctx.Done():
					return
				case <-time.After(w.MaintainEvery):
				}
				runMu.RLock()
				tr, err := r.MaintainTable(ctx, e.ref)
				runMu.RUnlock()
				if err != nil && tolerate(err) {
					continue
				}
				if err != nil {
					if ctx.Err() == nil {
						fail(fmt.Errorf("runner %d: maintain: %w", ri+1, err))
					}
					return
				}
				mu.Lock()
				rep.Maintenance++
				rep.Compactions += tr.Compacted.Committed
				rep.Dropped += tr.Compacted.Dropped
				mu.Unlock()
			}
		}()
	}
	for ci := range w.Cleaners {
		background.Add(1)
		go func() { // a cleaner: drain, idle briefly when empty
			defer background.Done()
			for {
				select {
				case <-stop:
					return
				case <-ctx.Done():
					return
				default:
				}
				st, err := queue.Drain(ctx, cq, e.clean.Handle, queue.DrainOptions{Logger: discard, Visibility: visibility})
				if err != nil && ctx.Err() == nil && !tolerate(err) {
					fail(fmt.Errorf("cleaner %d: %w", ci, err))
					return
				}
				mu.Lock()
				rep.Cleaned += st.Succeeded
				rep.CleanFailed += st.Failed
				mu.Unlock()
				if st.DeadLettered > 0 {
					fail(fmt.Errorf("cleaner %d: %d messages dead-lettered: %v", ci, st.DeadLettered, e.q.DeadLetters()))
					return
				}
				if st.Received == 0 {
					time.Sleep(20 * time.Millisecond)
				}
			}
		}()
	}
	select {
	case <-time.After(w.Duration):
	case <-ctx.Done():
	}
	close(stop)
	writers.Wait()
	rep.Elapsed = time.Since(start)
	background.Wait()
	if w.AfterLoad != nil {
		w.AfterLoad()
	}
	if len(errList) > 0 {
		t.Fatalf("load failed: %v", errors.Join(errList...))
	}
	rep.Commits = len(ops)
	if len(lat) > 0 {
		slices.Sort(lat)
		rep.P50, rep.P99, rep.Max = lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)-1]
	}
	bg := context.Background()
	sort.Slice(ops, func(i, j int) bool { return ops[i].version < ops[j].version })
	for i := 1; i < len(ops); i++ {
		if ops[i].version == ops[i-1].version {
			t.Fatalf("two commits claim version %d: %+v and %+v", ops[i].version, ops[i-1], ops[i])
		}
	}
	check := func(when string) (versions int, garbage int64, tb *table.Table) {
		if w.Quiet != nil {
			w.Quiet(true)
			defer w.Quiet(false)
		}
		tb = e.open(t)
		latest := tb.Cached().Version
		if err := diffRows(latestRows(t, tb), modelAt(ops, latest)); err != nil {
			t.Fatalf("%s: latest v%d: %v", when, latest, err)
		}
		vs, err := tb.Versions(bg)
		if err != nil {
			t.Fatal(err)
		}
		want := map[uint64]map[string]string{}
		for _, v := range vs {
			want[v.Version] = modelAt(ops, v.Version)
		}
		refs := checkRetained(t, tb, want)
		for _, prefix := range []string{table.DataPrefix, table.DeletionsPrefix} {
			for k, size := range listing(t, tb.Store(), tb.Root()+prefix) {
				if !refs[strings.TrimPrefix(k, tb.Root())] {
					garbage += size
				}
			}
		}
		return len(vs), garbage, tb
	}
	rep.VersionsAtEnd, rep.GarbageAtEnd, _ = check("end of load")
	// Final maintenance: grace expires twice over, ranges drain, then sweep.
	for range 3 {
		e.clock.Advance(p.Grace + time.Minute)
		tr, err := e.runner.MaintainTable(bg, e.ref)
		if err != nil {
			t.Fatalf("final maintain: %v", err)
		}
		// The final passes count too: a loaded machine may get through
		// too few passes during the load for cleanup to start (TestLoad
		// failed on "maintenance did no work" under load).
		rep.Maintenance++
		rep.Compactions += tr.Compacted.Committed
		rep.Dropped += tr.Compacted.Dropped
		if w.FinalDrain != nil {
			w.FinalDrain(t)
		} else if st := e.drain(t); st.DeadLettered > 0 {
			t.Fatalf("final drain: %+v", st)
		} else {
			rep.Cleaned += st.Succeeded
		}
	}
	tb := e.open(t)
	sw, err := maintenance.Sweep(bg, tb, p, e.clock.Now(), 0, false)
	if err != nil {
		t.Fatalf("sweep: %v", err)
	}
	rep.Swept = sw.Deleted
	rep.VersionsLeft, rep.GarbageLeft, tb = check("after final sweep")
	if w.Quiet != nil {
		w.Quiet(true)
	}
	checkNoOrphans(t, tb, checkRetained(t, tb, nil), e.clock.Now(), p.Grace)
	if rep.Commits == 0 || rep.Maintenance == 0 {
		t.Fatalf("workload did nothing: %s", rep)
	}
	return rep
}

// TestLoad: 16 writers for TABLEKEEP_LOAD_DURATION (default 8 s) on local
// disk while maintenance runs every second and 4 cleaners drain; the model
// check passes afterwards. BenchmarkLoad is the long variant.
func TestLoad(t *testing.T) {
	p := loadPolicy()
	e := newWorkloadEnv(t, testkit.DiskStore(t), p)
	w := workload{Writers: 16, Cleaners: 4, Duration: loadDuration(t, 8*time.Second), MaintainEvery: time.Second, KeySpace: 200, Seed: 1}
	rep := w.run(t, e)
	if rep.Cleaned == 0 || rep.Compactions+rep.Dropped == 0 {
		t.Fatalf("maintenance did no work: %s", rep)
	}
	t.Logf("disk load: %s", rep)
}

// BenchmarkLoad is TestLoad for longer (TABLEKEEP_LOAD_DURATION, default
// 60 s): go test -run '^$' -bench BenchmarkLoad -benchtime 1x ./shared/maintenance
func BenchmarkLoad(b *testing.B) {
	for range b.N {
		p := loadPolicy()
		e := newWorkloadEnv(b, testkit.DiskStore(b), p)
		w := workload{Writers: 16, Cleaners: 4, Duration: loadDuration(b, 60*time.Second), MaintainEvery: time.Second, KeySpace: 200, Seed: 1}
		rep := w.run(b, e)
		b.ReportMetric(float64(rep.Commits)/rep.Elapsed.Seconds(), "commits/s")
		b.ReportMetric(float64(rep.Retried), "conflicts-retried")
		b.ReportMetric(float64(rep.P50.Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(rep.P99.Microseconds())/1000, "p99-ms")
		b.ReportMetric(float64(rep.VersionsAtEnd), "versions-at-end")
		b.ReportMetric(float64(rep.GarbageAtEnd), "garbage-B-at-end")
		b.Logf("disk load: %s", rep)
	}
}
