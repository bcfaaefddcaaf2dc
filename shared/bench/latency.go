package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/tablekeep/tablekeep/shared/clock"
	"github.com/tablekeep/tablekeep/shared/demo"
	"github.com/tablekeep/tablekeep/shared/embedded"
	"github.com/tablekeep/tablekeep/shared/internal/fakeclock"
	"github.com/tablekeep/tablekeep/shared/lock"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/progress"
	"github.com/tablekeep/tablekeep/shared/queue"
	"github.com/tablekeep/tablekeep/shared/table"
)

// S3 Standard's request rates per prefix (per second).
const (
	s3WritesPerPrefix = 3500 // PUT, COPY, POST, DELETE
	s3ReadsPerPrefix  = 5500 // GET, HEAD
)

// LatencyResult is the section "Maintenance at object-store latency": one
// full maintenance pass over the demo's churn under each profile, and the
// seed-sized cleanup backlog drained by 1 and by several cleaner workers
// under the s3 profile.
type LatencyResult struct {
	Ops, Writers int
	FixtureBuild time.Duration
	Passes       []LatencyPass // one per profile: none, s3
	Backlog      BacklogResult
	Elapsed      time.Duration
}

// LatencyPass is one full embedded maintenance pass (compact + prune,
// drain, sweep) on a copy of the churned table under one profile.
type LatencyPass struct {
	Profile     objstore.Profile
	Pass        time.Duration   // embedded.Warehouse.Maintain, wall time
	LockStep    time.Duration   // the table's step under the lock (TableReport.Duration)
	Requests    objstore.Counts // the whole pass
	Drain       time.Duration   // cleanup: the cleaner draining the queue
	DrainReqs   objstore.Counts
	Messages    int
	KeysDeleted int64 // by the cleaner
	SweepKeys   int64 // by the sweep
	// Open + get by key after maintenance, on a fresh handle.
	OpenGet     objstore.Counts
	OpenGetPath objstore.Path
	OpenGetTime time.Duration
}

// BacklogResult is the cleanup backlog: a table of Versions versions,
// pruned once, drained by each worker count under Profile.
type BacklogResult struct {
	Versions int
	Prunable int
	Messages int
	Build    time.Duration // building the history and planning, at zero latency
	Profile  objstore.Profile
	Drains   []BacklogDrain
}

// BacklogDrain is one drain of the backlog by Workers concurrent cleaners.
type BacklogDrain struct {
	Workers  int
	Time     time.Duration
	Reqs     objstore.Counts
	Messages int
	// Throttled: DeleteObjects requests the emulated per-prefix write limit
	// answered SlowDown (retried by the cleaners, their rate lowered).
	Throttled objstore.Throttled
	// BaseHeap and PeakHeap: heap in use before and at most during the
	// drain (every worker in this process).
	BaseHeap, PeakHeap uint64
	// Retried: messages that failed (deletes still refused after the
	// cleaner's SlowDown retries) and were redelivered.
	Retried int
}

// KeysPerSec is deleted keys per second.
func (d BacklogDrain) KeysPerSec() float64 {
	return float64(d.Reqs.DeleteKeys) / max(d.Time.Seconds(), 1e-9)
}

// Rate is requests per second of count v.
func (d BacklogDrain) Rate(v int64) float64 { return float64(v) / max(d.Time.Seconds(), 1e-9) }

// latencySection measures the section in dir.
func latencySection(ctx context.Context, cfg Config, dir string) (LatencyResult, error) {
	start := time.Now()
	res := LatencyResult{Ops: cfg.LatencyOps, Writers: cfg.LatencyWriters}
	if err := fresh(dir); err != nil {
		return res, err
	}
	// The fixture: the demo's churn at zero latency, built once.
	fixture := filepath.Join(dir, "fixture", "registry")
	t0 := time.Now()
	d, err := demo.Setup(ctx, demo.Config{Dir: fixture, Ops: cfg.LatencyOps, Writers: cfg.LatencyWriters})
	if err != nil {
		return res, err
	}
	if err := d.Churn(ctx, cfg.LatencyOps); err != nil {
		return res, fmt.Errorf("churn: %w", err)
	}
	res.FixtureBuild = time.Since(t0)
	name, err := firstName(ctx, d.Raw, d.Root)
	if err != nil {
		return res, err
	}
	for _, prof := range []objstore.Profile{{Name: objstore.ProfileNone}, objstore.S3ExpressProfile(), objstore.S3Profile()} {
		cfg.logf("maintenance at latency: one pass under the %s profile", prof.Name)
		wh := filepath.Join(dir, "pass-"+prof.Name)
		if err := fresh(wh); err != nil {
			return res, err
		}
		if err := os.CopyFS(filepath.Join(wh, "registry"), os.DirFS(fixture)); err != nil {
			return res, err
		}
		lp, err := latencyPass(ctx, wh, prof, name)
		if err != nil {
			return res, fmt.Errorf("pass under %s: %w", prof.Name, err)
		}
		res.Passes = append(res.Passes, lp)
	}
	cfg.logf("maintenance at latency: cleanup backlog of %d versions", cfg.BacklogVersions)
	if res.Backlog, err = backlog(ctx, cfg, filepath.Join(dir, "backlog")); err != nil {
		return res, fmt.Errorf("backlog: %w", err)
	}
	res.Elapsed = time.Since(start)
	return res, nil
}

// firstName is a live key of the table at root.
func firstName(ctx context.Context, st objstore.Store, root string) (string, error) {
	t, err := table.Open(ctx, st, root, table.Options{})
	if err != nil {
		return "", err
	}
	snap, err := t.Latest(ctx)
	if err != nil {
		return "", err
	}
	var name string
	if err := snap.Scan(ctx, table.ScanOptions{Columns: []string{"name"}}, func(rec arrowRecord) error {
		if name == "" && rec.NumRows() > 0 {
			name = firstString(rec)
		}
		return nil
	}); err != nil {
		return "", err
	}
	if name == "" {
		return "", fmt.Errorf("table %s has no rows", root)
	}
	return name, nil
}

// stamp records the time and counts when the cleanup drain starts and ends,
// through embedded.Options.Progress (Maintain opens a "cleanup" bar before
// draining and finishes it after).
type stamp struct {
	cnt        *objstore.Counting
	mu         sync.Mutex
	start, end time.Time
	c0, c1     objstore.Counts
}

type stampBar struct{ s *stamp }

func (b stampBar) Add(int) error { return nil }
func (b stampBar) Finish() error {
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	b.s.end, b.s.c1 = time.Now(), b.s.cnt.Counts()
	return nil
}

func (s *stamp) progress(desc string, _ int) progress.Bar {
	if desc != "cleanup" {
		return progress.New(io.Discard, desc, 0)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.start, s.c0 = time.Now(), s.cnt.Counts()
	return stampBar{s}
}

// latencyPass runs one embedded maintenance pass over the registry table in
// warehouse wh, every request through prof, as shared/demo's Maintain does.
func latencyPass(ctx context.Context, wh string, prof objstore.Profile, name string) (LatencyPass, error) {
	res := LatencyPass{Profile: prof}
	disk, err := objstore.NewDisk(wh)
	if err != nil {
		return res, err
	}
	cnt := objstore.NewCounting(objstore.WithLatency(disk, prof))
	policy := maintenance.DefaultPolicy()
	// The churn's versions are seconds old: act as if the grace window passed.
	w, err := embedded.Open(ctx, wh, lock.AheadClock{Clock: clock.System(), Ahead: policy.Grace + time.Minute}, nil,
		func(objstore.Store) objstore.Store { return cnt })
	if err != nil {
		return res, err
	}
	if err := w.Catalog.Register(ctx, "registry", "registry", policy); err != nil {
		return res, err
	}
	cnt.Reset() // catalog creation and registration are not the pass
	st := &stamp{cnt: cnt}
	t0 := time.Now()
	rep, err := w.Maintain(ctx, embedded.Options{Progress: st.progress})
	res.Pass = time.Since(t0)
	if err != nil {
		return res, err
	}
	res.Requests = cnt.Counts()
	for _, tr := range rep.Run.Tables {
		if tr.Table == "registry" {
			res.LockStep = tr.Duration
		}
	}
	res.Drain, res.DrainReqs, res.Messages = st.end.Sub(st.start), st.c1.Sub(st.c0), rep.Drain.Succeeded
	res.KeysDeleted = res.DrainReqs.DeleteKeys
	res.SweepKeys = int64(rep.Sweeps["registry"].Deleted)

	// Open + get by key after maintenance: requests, round trips, time.
	oc := objstore.NewCounting(disk)
	tr := objstore.NewPathTracker(objstore.WithLatency(oc, prof), prof)
	t0 = time.Now()
	t, err := table.Open(ctx, tr, "registry", table.Options{})
	if err != nil {
		return res, err
	}
	rec, err := t.Snapshot().Get(ctx, name)
	if err != nil {
		return res, fmt.Errorf("get %q: %w", name, err)
	}
	rec.Release()
	res.OpenGetTime, res.OpenGet, res.OpenGetPath = time.Since(t0), oc.Counts(), tr.Path()
	return res, nil
}

// recorder is an Enqueuer keeping the bodies, so the one plan can be
// replayed into a fresh queue for each drain.
type recorder struct {
	mu     sync.Mutex
	bodies [][]byte
}

func (r *recorder) Send(_ context.Context, bodies [][]byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.bodies = append(r.bodies, bodies...)
	return nil
}

// backlog builds a history of cfg.BacklogVersions one-row upserts over
// backlogKeySpace names at zero latency (as scale() does), plans and applies
// the prune once, then for each worker count drains a copy of the table
// under the s3 profile with that many cleaners receiving from one queue.
func backlog(ctx context.Context, cfg Config, dir string) (BacklogResult, error) {
	res := BacklogResult{Versions: cfg.BacklogVersions, Profile: objstore.S3Profile()}
	if err := fresh(dir); err != nil {
		return res, err
	}
	base := filepath.Join(dir, "base")
	disk, err := objstore.NewDisk(base)
	if err != nil {
		return res, err
	}
	clock := newFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cs := fakeclock.NewStore(disk, clock)
	opts := table.Options{Clock: fakeclock.NoSleep(clock)}
	t0 := time.Now()
	t, err := table.Create(ctx, cs, "hist", Schema, "name", opts)
	if err != nil {
		return res, err
	}
	for i := 0; i < cfg.BacklogVersions-1; i++ {
		clock.Advance(time.Second)
		rec := rows("rollout", i%backlogKeySpace, 1, clock.Now())
		_, err := t.Upsert(ctx, rec)
		rec.Release()
		if err != nil {
			return res, err
		}
	}
	clock.Advance(2 * time.Hour)
	ref := maintenance.TableRef{Name: "hist", Root: "hist/", Policy: maintenance.DefaultPolicy()}
	plan, err := maintenance.PlanPrune(ctx, t, "hist", ref.Policy, clock.Now())
	if err != nil {
		return res, err
	}
	var rec recorder
	if err := maintenance.ApplyPrune(ctx, t, &plan, &rec); err != nil {
		return res, err
	}
	res.Build, res.Prunable, res.Messages = time.Since(t0), plan.Prunable, len(rec.bodies)
	for _, workers := range []int{1, 5} {
		cfg.logf("maintenance at latency: backlog drained by %d cleaner workers under s3", workers)
		cp := filepath.Join(dir, fmt.Sprintf("drain-%d", workers))
		if err := fresh(cp); err != nil {
			return res, err
		}
		if err := os.CopyFS(filepath.Join(cp, "hist"), os.DirFS(filepath.Join(base, "hist"))); err != nil {
			return res, err
		}
		bd, err := drainBacklog(ctx, cp, ref, clock, cs.Stamps(), rec.bodies, workers)
		if err != nil {
			return res, fmt.Errorf("%d workers: %w", workers, err)
		}
		res.Drains = append(res.Drains, bd)
	}
	return res, nil
}

// drainBacklog sends bodies to a fresh in-process queue and drains it with
// workers cleaners concurrently (each working on LocalMessagesInFlight
// messages at a time, receiving one at a time, so the messages spread over
// the workers), every request under the s3 profile.
func drainBacklog(ctx context.Context, wh string, ref maintenance.TableRef, clock *fakeClock, stamps map[string]time.Time, bodies [][]byte, workers int) (BacklogDrain, error) {
	res := BacklogDrain{Workers: workers}
	dir, err := objstore.NewDisk(wh)
	if err != nil {
		return res, err
	}
	// The copy's objects keep the times the history's writers saw (the
	// fake clock's), as the floor's stamp and the cleaner's age rule read
	// them: the copy's mtimes are today's.
	disk := fakeclock.NewStoreStamped(dir, clock, stamps)
	// S3's per-prefix write rate is emulated (each deleted key one write):
	// cleaners that together ask for more are answered SlowDown and lower
	// their rates (AIMD), as on S3.
	thr := objstore.WithWriteThrottle(disk, objstore.ThrottleOptions{WritesPerSecond: s3WritesPerPrefix})
	cnt := objstore.NewCounting(objstore.WithLatency(thr, objstore.S3Profile()))
	// The fake clock stands still: no message becomes visible again while
	// another worker handles it.
	q := queue.NewEmbedded(queue.EmbeddedOptions{Clock: clock, MaxReceives: 5})
	if err := (maintenance.QueueEnqueuer{Q: q}).Send(ctx, bodies); err != nil {
		return res, err
	}
	var mu sync.Mutex
	stopHeap := sampleHeap()
	t0 := time.Now()
	// One worker is one cleaner (its limiters shared) working on
	// LocalMessagesInFlight messages at once, as one Lambda invocation
	// does; each receiver takes one message at a time.
	cleaners := make([]*maintenance.Cleaner, workers)
	for i := range cleaners {
		cleaners[i] = &maintenance.Cleaner{Store: cnt, Tables: staticResolver{ref}, Requeue: maintenance.QueueEnqueuer{Q: q},
			OpenOpts: table.Options{Clock: clock}}
	}
	// A message whose deletes were still refused after the cleaner's
	// SlowDown retries fails and comes back after the queue's visibility
	// timeout, as SQS redelivers it: the fake clock is moved past it and
	// the workers drain again (their limiters keep the rates they found).
	for round := 0; ; round++ {
		failed := 0
		g, gctx := errgroup.WithContext(ctx)
		for _, cl := range cleaners {
			for range maintenance.LocalMessagesInFlight {
				g.Go(func() error {
					st, err := queue.Drain(gctx, q, cl.Handle, queue.DrainOptions{BatchSize: 1, MaxReceives: 5})
					mu.Lock()
					res.Messages += st.Succeeded
					failed += st.Failed
					mu.Unlock()
					if err == nil && st.DeadLettered > 0 {
						err = fmt.Errorf("%d messages dead-lettered", st.DeadLettered)
					}
					return err
				})
			}
		}
		if err = g.Wait(); err != nil {
			break
		}
		res.Retried += failed
		if failed == 0 {
			break
		}
		if round == 10 {
			err = fmt.Errorf("%d messages still failing after %d redeliveries", failed, round)
			break
		}
		clock.Advance(time.Minute)
	}
	res.Time, res.Reqs, res.Throttled = time.Since(t0), cnt.Counts(), thr.Throttled()
	res.BaseHeap, res.PeakHeap = stopHeap()
	res.Reqs.DeleteKeys -= res.Throttled.Keys // refused keys were not deleted
	return res, err
}

// BacklogFull is the backlog's size in `make bench`: the seed's backlog of
// ~34,000 versions (about 100,000 keys: ~30 s for one worker at S3's
// per-prefix write rate).
const BacklogFull = 34000

// backlogKeySpace is the names the backlog's upserts cycle over: few, so
// the manifest stays small and the history is cheap to build.
const backlogKeySpace = 100

// MarkdownLatency renders the section "Maintenance at object-store latency".
func MarkdownLatency(r LatencyResult) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	if len(r.Passes) == 0 {
		return ""
	}
	p("## Maintenance at object-store latency\n\n")
	p("The workload of issue 10's table: the demo's churn (`shared/demo`, %s writes by %d concurrent writers, built once at zero latency in %s), then, for each profile, ", n(int64(r.Ops)), r.Writers, dur(r.FixtureBuild))
	p("a copy of the table gets **one full maintenance pass** the way `tkdemo` runs it (`embedded.Open` with the clock past the grace window, `Register`, `Maintain`: compaction and prune planning under the lock, the cleaner draining the in-process queue with no lock, the orphan sweep), ")
	p("every request through `objstore.NewCounting(objstore.WithLatency(disk, profile))`, waiting its latency in real time. ")
	p("The lock step is the runner's `TableReport.Duration`; cleanup is the drain (requests and time between its start and end); open + get is a fresh handle getting one live name after the pass, with round trips from `objstore.PathTracker`. Times are wall time on this machine.\n\n")
	p("| |")
	for _, lp := range r.Passes {
		p(" %s |", lp.Profile.Name)
	}
	p("\n| --- |")
	for range r.Passes {
		p(" --- |")
	}
	p("\n")
	row := func(label string, cell func(LatencyPass) string) {
		p("| %s |", label)
		for _, lp := range r.Passes {
			p(" %s |", cell(lp))
		}
		p("\n")
	}
	row("whole pass (compact + prune, drain, sweep)", func(lp LatencyPass) string { return dur(lp.Pass) })
	row("requests, whole pass", func(lp LatencyPass) string { return reqText(lp.Requests) })
	row("the table's step under the lock", func(lp LatencyPass) string { return dur(lp.LockStep) })
	row("cleanup: keys deleted (messages)", func(lp LatencyPass) string {
		return fmt.Sprintf("%s (%d); sweep %s", n(lp.KeysDeleted), lp.Messages, n(lp.SweepKeys))
	})
	row("cleanup: drain time", func(lp LatencyPass) string { return dur(lp.Drain) })
	row("cleanup: keys/s", func(lp LatencyPass) string {
		return n(int64(float64(lp.KeysDeleted) / max(lp.Drain.Seconds(), 1e-9)))
	})
	row("cleanup: requests", func(lp LatencyPass) string { return reqText(lp.DrainReqs) })
	row("open + get by key after maintenance: requests", func(lp LatencyPass) string { return reqText(lp.OpenGet) })
	row("open + get: round trips (critical path)", func(lp LatencyPass) string {
		kinds := make([]string, len(lp.OpenGetPath.Kinds))
		for i, k := range lp.OpenGetPath.Kinds {
			kinds[i] = string(k)
		}
		return fmt.Sprintf("%d: %s", lp.OpenGetPath.RoundTrips(), strings.Join(kinds, " -> "))
	})
	row("open + get: time", func(lp LatencyPass) string { return dur(lp.OpenGetTime) })
	p("\nIssue 10's goals under s3: whole pass <= 5 s, lock step <= 2 s, cleaner >= 3,000 keys/s per worker, open + get <= 1 LIST + 2 GET round trips (~80 ms).\n\n")

	bl := r.Backlog
	if len(bl.Drains) == 0 {
		return b.String()
	}
	p("**Cleanup backlog.** A history of %s versions (Create plus one-row upserts over %d names, as in \"Open and commit at scale\"; built and planned at zero latency in %s) is pruned once: %s prunable versions in %d range messages. ",
		n(int64(bl.Versions)), backlogKeySpace, dur(bl.Build), n(int64(bl.Prunable)), bl.Messages)
	if bl.Versions < 34000 {
		p("(The seed's backlog was ~34,000 versions; this run uses %s (`tkbench -backlog 34000` for the seed's size): drain times scale with the versions, rates do not.) ", n(int64(bl.Versions)))
	}
	p("A copy of the table is drained under the %s profile by 1 and by 5 workers from one in-process queue, concurrently; a worker is one cleaner (one set of rate limiters) working on %d messages at once, as one Lambda invocation does (a message is a range of up to 1,000 versions). ", bl.Profile.Name, maintenance.LocalMessagesInFlight)
	p("Every key is under the table's prefix, so the rates are per-prefix rates. The store emulates S3's per-prefix write limit of %s writes per second (each key of a DeleteObjects one write; a token bucket of one second; a request that would exceed it is answered SlowDown and deletes nothing), so workers that together ask for more are slowed down and lower their own rates (AIMD) as on S3; S3's read limit is %s GET per second.\n\n", n(s3WritesPerPrefix), n(s3ReadsPerPrefix))
	p("| cleaner workers | messages | keys deleted | time | keys/s (per prefix; limit %s) | keys/s per worker | GET/s per prefix (limit %s) | SlowDown answers (keys refused) | messages redelivered | requests | peak heap in use (base) |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n",
		n(s3WritesPerPrefix), n(s3ReadsPerPrefix))
	for _, d := range bl.Drains {
		p("| %d | %d | %s | %s | %s | %s | %s | %d (%s) | %d | %s | %s (%s) |\n", d.Workers, d.Messages, n(d.Reqs.DeleteKeys), dur(d.Time),
			n(int64(d.KeysPerSec())), n(int64(d.KeysPerSec()/float64(d.Workers))), n(int64(d.Rate(d.Reqs.Get+d.Reqs.Head))),
			d.Throttled.Requests, n(d.Throttled.Keys), d.Retried, reqText(d.Reqs), fmt.Sprintf("%.0f MB", float64(d.PeakHeap)/(1<<20)), fmt.Sprintf("%.0f MB", float64(d.BaseHeap)/(1<<20)))
	}
	p("\nThe goal per worker is >= 3,000 keys/s: one worker runs at its own limiter's %s keys/s less the time its first message is read before anything can be deleted. Five workers on one table share the prefix's %s writes per second: more workers drain a single table no faster (they do drain several tables at once, each under its own prefix).\n", n(s3WritesPerPrefix), n(s3WritesPerPrefix))
	p("\n")
	return b.String()
}
