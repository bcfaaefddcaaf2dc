package maintenance_test

// Maintenance benchmarks. The primary figures are object-store requests by
// kind, counted through objstore.Counting; times are secondary (local disk
// or a local versitygw, not a cloud store). docs/benchmarks-maintenance.md
// records the figures next to the seed incident's production figures, and
// the commands:
//
//	go test -run '^$' -bench 'BenchmarkMaintenanceSeedReplay' -benchtime 1x -timeout 20m ./shared/maintenance/
//	go test -run '^$' -bench 'BenchmarkCleanupBacklog/disk' -benchtime 1x -timeout 20m ./shared/maintenance/
//	STACK_DIR=/tmp/benchstack infra/stack-up.sh && source /tmp/benchstack/env
//	go test -run '^$' -bench 'BenchmarkCleanupBacklog/s3' -benchtime 1x -timeout 20m ./shared/maintenance/
//
// Every iteration builds its own history (timer stopped) because maintenance
// consumes it: run with -benchtime 1x.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tablekeep/tablekeep/shared/embedded"
	fleetidx "github.com/tablekeep/tablekeep/shared/fleet"
	"github.com/tablekeep/tablekeep/shared/internal/fakeclock"
	"github.com/tablekeep/tablekeep/shared/internal/testenv"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/queue"
	"github.com/tablekeep/tablekeep/shared/table"
)

// skewClock is the real clock shifted by off: advancing off past the grace
// window makes every existing version prunable without waiting.
type skewClock struct {
	mu  sync.Mutex
	off time.Duration
}

func (c *skewClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.off)
}
func (c *skewClock) Sleep(ctx context.Context, d time.Duration) error { return nil }
func (c *skewClock) advance(d time.Duration) {
	c.mu.Lock()
	c.off += d
	c.mu.Unlock()
}

// regSchema is the seed's registry shape.
var regSchema = arrow.NewSchema([]arrow.Field{
	{Name: "name", Type: arrow.BinaryTypes.String},
	{Name: "uri", Type: arrow.BinaryTypes.String},
	{Name: "created_at", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
}, nil)

func regRow(name string, i int) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, regSchema)
	defer b.Release()
	b.Field(0).(*array.StringBuilder).Append(name)
	b.Field(1).(*array.StringBuilder).Append("s3://bucket/rollouts/" + name + fmt.Sprintf("/%d", i))
	b.Field(2).(*array.TimestampBuilder).Append(arrow.Timestamp(1_700_000_000_000_000 + int64(i)))
	return b.NewRecordBatch()
}

func reportCounts(b *testing.B, prefix string, c objstore.Counts, ops int) {
	per := func(n int64) float64 { return float64(n) / float64(ops) }
	b.ReportMetric(per(c.List), prefix+"LIST")
	b.ReportMetric(per(c.Get), prefix+"GET")
	b.ReportMetric(per(c.Put), prefix+"PUT")
	b.ReportMetric(per(c.Head), prefix+"HEAD")
	b.ReportMetric(per(c.DeleteRequests), prefix+"DELETE")
	b.ReportMetric(per(c.DeleteKeys), prefix+"DELkeys")
}

func countObjects(b *testing.B, st objstore.Store, prefix string) int {
	n := 0
	if err := objstore.ListAll(context.Background(), st, prefix, "", func(objstore.ObjectInfo) error { n++; return nil }); err != nil {
		b.Fatal(err)
	}
	return n
}

func countFiles(b *testing.B, dir string) int {
	n := 0
	err := filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			n++
		}
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	return n
}

func scanAll(b *testing.B, tb *table.Table) map[string]string {
	snap, err := tb.Latest(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	got := map[string]string{}
	err = snap.Scan(context.Background(), table.ScanOptions{}, func(r arrow.RecordBatch) error {
		for i := 0; i < int(r.NumRows()); i++ {
			k := r.Column(0).(*array.String).Value(i)
			if _, dup := got[k]; dup {
				return fmt.Errorf("key %q twice", k)
			}
			got[k] = r.Column(1).(*array.String).Value(i)
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return got
}

const (
	seedWriters  = 4
	seedUpserts  = 10000
	seedDeletes  = 2000
	seedKeySpace = 500 // names per writer: ~2,000 rows, ~2,000 fragments before compaction
)

// BenchmarkMaintenanceSeedReplay replays the seed's registry: 4 concurrent
// writers (own handles) do 10,000 one-row upserts and 2,000 deletes in
// total, then one maintenance pass (compact + prune plan under the lock,
// cleaner drain, orphan sweep) runs with the clock 2 h ahead.
func BenchmarkMaintenanceSeedReplay(b *testing.B) {
	for range b.N {
		seedReplay(b)
	}
}

func seedReplay(b *testing.B) {
	b.StopTimer()
	ctx := context.Background()
	dir := b.TempDir()
	clk := &skewClock{}
	var cnt *objstore.Counting
	w, err := embedded.Open(ctx, dir, clk, nil, func(s objstore.Store) objstore.Store { cnt = objstore.NewCounting(s); return cnt })
	if err != nil {
		b.Fatal(err)
	}
	const root = "tables/_registry.rollout"
	// Writers back off between commit attempts (the default backoff). With
	// the default MaxRetries (50) one of four writers regularly exhausts its
	// retries on the others (ErrConflict), so the replay allows more and
	// reports the attempts.
	opts := table.Options{Clock: clk, MaxRetries: 10000}
	var attempts, commits, maxAttempts atomic.Int64
	if _, err := table.Create(ctx, w.Store, root, regSchema, "name", opts); err != nil {
		b.Fatal(err)
	}
	if err := w.Catalog.Register(ctx, "rollout", root, maintenance.Policy{}); err != nil {
		b.Fatal(err)
	}

	// Writers: each owns its names (so the final rows are known exactly) and
	// does 2,500 upserts and 500 deletes, interleaved (every 6th op a delete).
	start := time.Now()
	models := make([]map[string]string, seedWriters)
	var wg sync.WaitGroup
	errs := make(chan error, seedWriters)
	for wi := range seedWriters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tb, err := table.Open(ctx, w.Store, root, opts)
			if err != nil {
				errs <- err
				return
			}
			model := map[string]string{}
			models[wi] = model
			ups, dels := 0, 0
			for i := 0; ups < seedUpserts/seedWriters || dels < seedDeletes/seedWriters; i++ {
				if i%6 == 5 && dels < seedDeletes/seedWriters {
					// delete a name this writer upserted earlier
					name := fmt.Sprintf("w%d-rollout-%05d", wi, (i*7919)%max(ups, 1)%seedKeySpace)
					if _, err := tb.Delete(ctx, name); err != nil {
						errs <- fmt.Errorf("writer %d delete: %w", wi, err)
						return
					}
					delete(model, name)
					dels++
					continue
				}
				if ups >= seedUpserts/seedWriters {
					continue
				}
				name := fmt.Sprintf("w%d-rollout-%05d", wi, ups%seedKeySpace)
				rec := regRow(name, ups)
				res, err := tb.Upsert(ctx, rec)
				rec.Release()
				if err != nil {
					errs <- fmt.Errorf("writer %d upsert: %w", wi, err)
					return
				}
				commits.Add(1)
				attempts.Add(int64(res.Attempts))
				for a := maxAttempts.Load(); int64(res.Attempts) > a && !maxAttempts.CompareAndSwap(a, int64(res.Attempts)); a = maxAttempts.Load() {
				}
				model[name] = fmt.Sprintf("s3://bucket/rollouts/%s/%d", name, ups)
				ups++
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	build := time.Since(start)
	b.Logf("seed history: %d upserts + %d deletes by %d writers in %s; upsert attempts mean %.2f max %d",
		seedUpserts, seedDeletes, seedWriters, build.Round(time.Millisecond), float64(attempts.Load())/float64(commits.Load()), maxAttempts.Load())
	b.ReportMetric(build.Seconds(), "build-s")
	b.ReportMetric(float64(maxAttempts.Load()), "upsert-max-attempts")
	model := map[string]string{}
	for _, m := range models {
		for k, v := range m {
			model[k] = v
		}
	}

	tb, err := table.Open(ctx, w.Store, root, opts)
	if err != nil {
		b.Fatal(err)
	}
	if got := scanAll(b, tb); fmt.Sprint(got) != fmt.Sprint(model) {
		b.Fatalf("before maintenance: %d rows, model %d", len(got), len(model))
	}
	before, err := tb.Stats(ctx)
	if err != nil {
		b.Fatal(err)
	}
	objBefore := countFiles(b, filepath.Join(dir, "tables"))
	names := make([]string, 0, len(model))
	for k := range model {
		names = append(names, k)
	}
	getBefore, getBeforeT := measureGets(b, cnt, w.Store, root, opts, names)
	upBefore, upBeforeT := measureUpserts(b, cnt, w.Store, root, opts, "before", model)

	// One maintenance pass, phase by phase (what embedded.Maintain does).
	clk.advance(2 * time.Hour)
	b.StartTimer()
	host, _ := os.Hostname()
	r := &maintenance.Runner{Store: w.Store, Catalog: w.Catalog, Locker: w.Locker, Queue: maintenance.QueueEnqueuer{Q: w.Queue},
		Clock: clk, Logger: w.Logger, Owner: host}
	c0 := cnt.Counts()
	t0 := time.Now()
	run, err := fleetidx.New(r, fleetidx.Options{}).Run(ctx)
	if err != nil {
		b.Fatal(err)
	}
	compactT := time.Since(t0)
	c1 := cnt.Counts()
	t1 := time.Now()
	drain, err := maintenance.DrainLocal(ctx, w.Queue, w.Cleaner(), w.Logger)
	if err != nil {
		b.Fatal(err)
	}
	drainT := time.Since(t1)
	c2 := cnt.Counts()
	t2 := time.Now()
	refs, err := w.Catalog.Tables(ctx)
	if err != nil {
		b.Fatal(err)
	}
	swept := 0
	for _, ref := range refs {
		st, err := table.Open(ctx, w.Store, ref.Root, table.Options{Clock: clk, Grace: ref.Policy.Grace})
		if err != nil {
			b.Fatal(err)
		}
		sr, err := maintenance.Sweep(ctx, st, ref.Policy, clk.Now(), 0, false)
		if err != nil {
			b.Fatal(err)
		}
		swept += sr.Deleted
	}
	sweepT := time.Since(t2)
	c3 := cnt.Counts()
	b.StopTimer()
	for _, tr := range run.Tables {
		b.Logf("table %s skipped=%q compacted groups=%d in=%d out=%d floor=%d ranges=%d prunable=%d note=%q",
			tr.Table, tr.Skipped, tr.Compacted.Committed, tr.Compacted.InputFrags, tr.Compacted.OutputFrags,
			tr.Prune.Floor, len(tr.Prune.Ranges), tr.Prune.Prunable, tr.StatsNote)
		if tr.Skipped != "" {
			b.Fatalf("table %s skipped: %s", tr.Table, tr.Skipped)
		}
	}
	if drain.Failed > 0 || drain.DeadLettered > 0 {
		b.Fatalf("drain: %+v", drain)
	}

	tb, err = table.Open(ctx, w.Store, root, opts)
	if err != nil {
		b.Fatal(err)
	}
	if got := scanAll(b, tb); fmt.Sprint(got) != fmt.Sprint(model) {
		b.Fatalf("after maintenance: %d rows, model %d", len(got), len(model))
	}
	after, err := tb.Stats(ctx)
	if err != nil {
		b.Fatal(err)
	}
	objAfter := countFiles(b, filepath.Join(dir, "tables"))
	getAfter, getAfterT := measureGets(b, cnt, w.Store, root, opts, names)
	upAfter, upAfterT := measureUpserts(b, cnt, w.Store, root, opts, "after", model)

	pass, cleanup := c3.Sub(c0), c3.Sub(c1)
	b.Logf("before: version %d, %d versions, %d fragments, %d rows, manifests %d B (latest %d B), %d objects",
		before.Version, before.Versions, before.Fragments, before.Rows, before.ManifestBytes, before.LatestManifestBytes, objBefore)
	b.Logf("after:  version %d, %d versions, %d fragments, %d rows, manifests %d B (latest %d B), %d objects",
		after.Version, after.Versions, after.Fragments, after.Rows, after.ManifestBytes, after.LatestManifestBytes, objAfter)
	b.Logf("pass requests: compact+plan %v; drain %v; sweep %v (swept %d)", c1.Sub(c0), c2.Sub(c1), c3.Sub(c2), swept)
	b.Logf("times: compact+plan %s, drain %s, sweep %s", compactT.Round(time.Millisecond), drainT.Round(time.Millisecond), sweepT.Round(time.Millisecond))
	b.Logf("get-by-key (fresh handle: Latest + Get): before %v %s/op; after %v %s/op", getBefore, getBeforeT, getAfter, getAfterT)
	b.Logf("upsert (warm handle): before %v %s/op; after %v %s/op", upBefore, upBeforeT, upAfter, upAfterT)

	b.ReportMetric(float64(before.Versions), "versions-before")
	b.ReportMetric(float64(after.Versions), "versions-after")
	b.ReportMetric(float64(before.Fragments), "frags-before")
	b.ReportMetric(float64(after.Fragments), "frags-after")
	b.ReportMetric(float64(before.ManifestBytes), "manifestB-before")
	b.ReportMetric(float64(after.ManifestBytes), "manifestB-after")
	b.ReportMetric(float64(before.LatestManifestBytes), "latestManifestB-before")
	b.ReportMetric(float64(after.LatestManifestBytes), "latestManifestB-after")
	b.ReportMetric(float64(objBefore), "objects-before")
	b.ReportMetric(float64(objAfter), "objects-after")
	reportCounts(b, "pass-", pass, 1)
	b.ReportMetric(compactT.Seconds(), "compact+plan-s")
	b.ReportMetric((drainT + sweepT).Seconds(), "cleanup-s")
	if cleanup.DeleteRequests > 0 {
		b.ReportMetric(float64(cleanup.DeleteKeys)/float64(cleanup.DeleteRequests), "keys/DELETE")
		b.ReportMetric(float64(cleanup.DeleteKeys)/(drainT+sweepT).Seconds(), "cleanup-keys/s")
	}
	reportCounts(b, "get-before-", getBefore, 1)
	reportCounts(b, "get-after-", getAfter, 1)
	b.ReportMetric(float64(getBeforeT.Microseconds()), "get-before-us")
	b.ReportMetric(float64(getAfterT.Microseconds()), "get-after-us")
	reportCounts(b, "upsert-before-", upBefore, 1)
	reportCounts(b, "upsert-after-", upAfter, 1)
	b.ReportMetric(float64(upBeforeT.Microseconds()), "upsert-before-us")
	b.ReportMetric(float64(upAfterT.Microseconds()), "upsert-after-us")
}

const probes = 200

// measureGets is the seed's GET /rollouts/{name}: a fresh handle reads the
// latest version, then looks one key up. Returns requests and time per op.
func measureGets(b *testing.B, cnt *objstore.Counting, st objstore.Store, root string, opts table.Options, names []string) (objstore.Counts, time.Duration) {
	ctx := context.Background()
	c0 := cnt.Counts()
	t0 := time.Now()
	for i := range probes {
		tb, err := table.Open(ctx, st, root, opts)
		if err != nil {
			b.Fatal(err)
		}
		rec, err := tb.Snapshot().Get(ctx, names[(i*7919)%len(names)])
		if err != nil {
			b.Fatal(err)
		}
		rec.Release()
	}
	return perOp(cnt.Counts().Sub(c0), probes), time.Since(t0) / probes
}

// measureUpserts upserts new names through one warm handle (its own
// commits keep it current). Returns requests and time per op.
func measureUpserts(b *testing.B, cnt *objstore.Counting, st objstore.Store, root string, opts table.Options, tag string, model map[string]string) (objstore.Counts, time.Duration) {
	ctx := context.Background()
	tb, err := table.Open(ctx, st, root, opts)
	if err != nil {
		b.Fatal(err)
	}
	const n = 50
	c0 := cnt.Counts()
	t0 := time.Now()
	for i := range n {
		name := fmt.Sprintf("probe-%s-%03d", tag, i)
		rec := regRow(name, i)
		if _, err := tb.Upsert(ctx, rec); err != nil {
			b.Fatal(err)
		}
		rec.Release()
		model[name] = fmt.Sprintf("s3://bucket/rollouts/%s/%d", name, i)
	}
	return perOp(cnt.Counts().Sub(c0), n), time.Since(t0) / n
}

// perOp divides counts, rounding to the nearest integer.
func perOp(c objstore.Counts, n int64) objstore.Counts {
	d := func(x int64) int64 { return (x + n/2) / n }
	return objstore.Counts{Get: d(c.Get), Head: d(c.Head), Put: d(c.Put), List: d(c.List), DeleteRequests: d(c.DeleteRequests), DeleteKeys: d(c.DeleteKeys)}
}

// resolver resolves the one table of a backlog benchmark.
type resolver struct{ ref maintenance.TableRef }

func (r resolver) Resolve(ctx context.Context, name string) (maintenance.TableRef, error) {
	if name != r.ref.Name {
		return maintenance.TableRef{}, maintenance.ErrUnknownTable
	}
	return r.ref, nil
}

// BenchmarkCleanupBacklog measures the cleaner draining a backlog of
// one-row-upsert versions (the seed's ~30 deletes/s at 68k versions). The
// backlog is built by real commits over 100 names (small manifests, so the
// build is fast); pruning is planned with the clock 2 h ahead, then the
// cleaner drains every range with no lock held.
func BenchmarkCleanupBacklog(b *testing.B) {
	b.Run("disk/versions=50000", func(b *testing.B) {
		for range b.N {
			st, err := objstore.NewDisk(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			cleanupBacklog(b, st, 50000)
		}
	})
	b.Run("s3/versions=50000", func(b *testing.B) {
		for range b.N {
			cleanupBacklog(b, testenv.S3Store(b), 50000)
		}
	})
}

func cleanupBacklog(b *testing.B, inner objstore.Store, versions int) {
	b.StopTimer()
	ctx := context.Background()
	clk := &skewClock{}
	cnt := objstore.NewCounting(inner)
	const root = "tables/backlog"
	tb, err := table.Create(ctx, cnt, root, regSchema, "name", table.Options{Clock: fakeclock.NoSleep(clk)})
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	for i := 0; i < versions-1; i++ {
		rec := regRow(fmt.Sprintf("rollout-%03d", i%100), i)
		if _, err := tb.Upsert(ctx, rec); err != nil {
			b.Fatal(err)
		}
		rec.Release()
	}
	build := time.Since(start)
	objBefore := countObjects(b, cnt, tb.Root())
	b.Logf("backlog: %d versions by real commits in %s (%.0f commits/s), %d objects", versions, build.Round(time.Millisecond),
		float64(versions)/build.Seconds(), objBefore)
	want := scanAll(b, tb)

	clk.advance(2 * time.Hour)
	p := maintenance.Policy{}
	ref := maintenance.TableRef{Name: "backlog", Root: tb.Root(), Policy: p}
	q := queue.NewEmbedded(queue.EmbeddedOptions{Clock: clk, MaxReceives: 5})
	enq := maintenance.QueueEnqueuer{Q: q}
	c0 := cnt.Counts()
	t0 := time.Now()
	plan, err := maintenance.PlanPrune(ctx, tb, ref.Name, p, clk.Now())
	if err != nil {
		b.Fatal(err)
	}
	if err := maintenance.ApplyPrune(ctx, tb, &plan, enq); err != nil {
		b.Fatal(err)
	}
	planT := time.Since(t0)
	c1 := cnt.Counts()
	cl := &maintenance.Cleaner{Store: cnt, Tables: resolver{ref}, Requeue: enq, OpenOpts: table.Options{Clock: clk}}
	b.StartTimer()
	t1 := time.Now()
	ds, err := maintenance.DrainLocal(ctx, q, cl, nil)
	drainT := time.Since(t1)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	if ds.Failed > 0 || ds.DeadLettered > 0 {
		b.Fatalf("drain: %+v", ds)
	}
	c2 := cnt.Counts()
	drain := c2.Sub(c1)
	objAfter := countObjects(b, cnt, tb.Root())
	vs, err := tb.Versions(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if got := scanAll(b, tb); fmt.Sprint(got) != fmt.Sprint(want) {
		b.Fatalf("rows changed by cleanup: %d vs %d", len(got), len(want))
	}
	b.Logf("plan+apply: %d ranges, floor %d, %s, requests %v", len(plan.Ranges), plan.Floor, planT.Round(time.Millisecond), c1.Sub(c0))
	b.Logf("drain: %d messages, %s, requests %v; objects %d -> %d; versions stored after %d",
		ds.Received, drainT.Round(time.Millisecond), drain, objBefore, objAfter, len(vs))
	b.ReportMetric(build.Seconds(), "build-s")
	b.ReportMetric(float64(objBefore), "objects-before")
	b.ReportMetric(float64(objAfter), "objects-after")
	b.ReportMetric(float64(len(vs)), "versions-after")
	reportCounts(b, "plan-", c1.Sub(c0), 1)
	reportCounts(b, "drain-", drain, 1)
	b.ReportMetric(drainT.Seconds(), "drain-s")
	if drain.DeleteRequests > 0 {
		b.ReportMetric(float64(drain.DeleteKeys)/drainT.Seconds(), "keys/s")
		b.ReportMetric(float64(drain.DeleteKeys)/float64(drain.DeleteRequests), "keys/DELETE")
	}
}
