package bench

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"golang.org/x/sync/errgroup"

	"github.com/tablekeep/tablekeep/shared/catalog"
	"github.com/tablekeep/tablekeep/shared/fleet"
	"github.com/tablekeep/tablekeep/shared/internal/fakeclock"
	"github.com/tablekeep/tablekeep/shared/lock"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/queue"
	"github.com/tablekeep/tablekeep/shared/table"
)

// Prices of the other services in the fleet cost model (us-east-1, list
// prices as recorded on PricesDate; check the current price lists:
// aws.amazon.com/lambda/pricing, /sqs/pricing, /dynamodb/pricing/on-demand).
const (
	PriceLambdaGBSecondArm = 0.0000133334 // arm64, first 6 billion GB-s a month
	PriceLambdaPerMillion  = 0.20         // requests
	PriceSQSPerMillion     = 0.40         // standard queue requests (64 KB chunks)
	PriceDynamoWRUMillion  = 0.625        // on-demand write request units (since Nov 2024)
	PriceDynamoRRUMillion  = 0.125        // on-demand read request units
	// LambdaMemoryGB is the functions' memory in the model (template.yaml: 512 MB).
	LambdaMemoryGB = 0.5
	// PassesPerMonth: one scheduled pass every 15 min for 30 days.
	PassesPerMonth = 30 * 24 * 4
)

// FleetConfig sizes the fleet simulation.
type FleetConfig struct {
	Tables      int           // registered tables
	ActiveEvery int           // one table in ActiveEvery is written (100: 1%)
	Duration    time.Duration // simulated time
	Period      time.Duration // between scheduled passes
	Settle      int           // passes before measuring (the first maintains every table)
	Profile     objstore.Profile
	// Linearity: fleet sizes whose idle pass is measured on its own.
	Linearity []int
	// Embedded: table counts of the embedded-warehouse table
	// (local disk, real time), re-measured.
	Embedded []int
	WorkDir  string
	// Format is the table format the fleet's tables are created with
	// (0: table.Create's default, format 3).
	Format uint64
}

// DefaultFleetConfig is make bench's (quick: seconds).
func DefaultFleetConfig(quick bool) FleetConfig {
	if quick {
		return FleetConfig{Tables: 300, ActiveEvery: 100, Duration: 3 * time.Hour, Period: 15 * time.Minute, Settle: 2,
			Profile: objstore.S3Profile(), Linearity: []int{10, 100}, Embedded: []int{5, 20}}
	}
	return FleetConfig{Tables: 10000, ActiveEvery: 100, Duration: 24 * time.Hour, Period: 15 * time.Minute, Settle: 2,
		Profile: objstore.S3Profile(), Linearity: []int{100, 1000}, Embedded: []int{50, 200, 400}}
}

// FleetClass is what one class of tables (idle, active) or the fleet's
// shared objects cost, summed over the measured passes.
type FleetClass struct {
	Tables   int
	Requests objstore.Counts
	LockW    int64 // DynamoDB writes (acquire, renew, release)
	LockR    int64 // DynamoDB reads (check)
	Messages int64 // cleanup messages sent
}

// FleetPass is one measured pass.
type FleetPass struct {
	Maintained int
	Wall       time.Duration // modelled at the profile
}

// FleetResult is the simulation's outcome.
type FleetResult struct {
	Cfg            FleetConfig
	Passes         int // measured passes
	Idle, Active   FleetClass
	Shared         FleetClass // fleet index, registry, _stats
	Cleaner        objstore.Counts
	MeanMaintained float64
	Failed         int           // table maintenances that failed (settling passes included)
	ScanWall       time.Duration // modelled scan of one pass
	MeanWall       time.Duration // modelled pass (scan + maintenance), mean
	MaxWall        time.Duration
	CleanWall      time.Duration    // modelled cleaner time per pass, mean
	MaxVersions    int              // most versions stored by an active table after a pass
	MaxManifest    int64            // largest latest manifest of an active table
	Scheduled      []FleetScheduled // measured scheduled invocations
	Notified       FleetNotified    // the idle fleet with S3 notifications on
	Linearity      []FleetIdle
	Embedded       []EmbeddedIdle
	Elapsed        time.Duration
}

// FleetIdle is one idle pass over a fleet of Tables idle tables.
type FleetIdle struct {
	Tables   int
	PerTable [5]float64 // GET, HEAD, PUT, LIST, DELETE per idle table
	Total    objstore.Counts
}

// EmbeddedIdle is the table re-measured: an embedded warehouse on
// local disk, N small tables, two passes to settle, then a third with
// nothing written.
type EmbeddedIdle struct {
	Tables   int
	PerTable [5]float64
	Pass     time.Duration // real time, local disk
	Skipped  int
	// The whole embedded maintain (pass, drain, sweep of every table).
	MaintainPerTable [5]float64
	Maintain         time.Duration
}

// classStore counts requests by the class of the key's table.
type classStore struct {
	objstore.Store
	class func(key string) int
	c     [4]*objstore.Counting // per class: the inner Counting only counts
}

const (
	classIdle = iota
	classActive
	classShared
	classOther
)

func newClassStore(inner objstore.Store, class func(string) int) *classStore {
	s := &classStore{Store: inner, class: class}
	for i := range s.c {
		s.c[i] = objstore.NewCounting(nopStore{})
	}
	return s
}

// nopStore answers nothing: classStore counts through a Counting over it
// and sends the real request to the inner store.
type nopStore struct{ objstore.Store }

func (nopStore) Get(context.Context, string) ([]byte, error) { return nil, nil }
func (nopStore) Head(context.Context, string) (objstore.ObjectInfo, error) {
	return objstore.ObjectInfo{}, nil
}
func (nopStore) Put(context.Context, string, []byte) error         { return nil }
func (nopStore) PutIfAbsent(context.Context, string, []byte) error { return nil }
func (nopStore) List(context.Context, objstore.ListOptions) (objstore.ListPage, error) {
	return objstore.ListPage{}, nil
}
func (nopStore) Delete(context.Context, []string) error { return nil }

func (s *classStore) counts() [4]objstore.Counts {
	var out [4]objstore.Counts
	for i, c := range s.c {
		out[i] = c.Counts()
	}
	return out
}

func (s *classStore) Get(ctx context.Context, key string) ([]byte, error) {
	_, _ = s.c[s.class(key)].Get(ctx, key)
	return s.Store.Get(ctx, key)
}
func (s *classStore) Head(ctx context.Context, key string) (objstore.ObjectInfo, error) {
	_, _ = s.c[s.class(key)].Head(ctx, key)
	return s.Store.Head(ctx, key)
}
func (s *classStore) Put(ctx context.Context, key string, data []byte) error {
	_ = s.c[s.class(key)].Put(ctx, key, nil)
	return s.Store.Put(ctx, key, data)
}
func (s *classStore) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	_ = s.c[s.class(key)].PutIfAbsent(ctx, key, nil)
	return s.Store.PutIfAbsent(ctx, key, data)
}
func (s *classStore) List(ctx context.Context, o objstore.ListOptions) (objstore.ListPage, error) {
	_, _ = s.c[s.class(o.Prefix)].List(ctx, o)
	return s.Store.List(ctx, o)
}
func (s *classStore) Delete(ctx context.Context, keys []string) error {
	if len(keys) > 0 {
		_ = s.c[s.class(keys[0])].Delete(ctx, keys)
	}
	return s.Store.Delete(ctx, keys)
}

// countingLocker counts DynamoDB-priced lock calls by the lock's class.
type countingLocker struct {
	lock.Locker
	class  func(name string) int
	writes [4]atomic.Int64
	reads  [4]atomic.Int64
}

func (l *countingLocker) Acquire(ctx context.Context, name string, o lock.AcquireOptions) (*lock.Lease, error) {
	l.writes[l.class(name)].Add(1)
	return l.Locker.Acquire(ctx, name, o)
}
func (l *countingLocker) Renew(ctx context.Context, le *lock.Lease) (*lock.Lease, error) {
	l.writes[l.class(le.Name)].Add(1)
	return l.Locker.Renew(ctx, le)
}
func (l *countingLocker) Release(ctx context.Context, le *lock.Lease) error {
	l.writes[l.class(le.Name)].Add(1)
	return l.Locker.Release(ctx, le)
}
func (l *countingLocker) Check(ctx context.Context, le *lock.Lease) error {
	l.reads[l.class(le.Name)].Add(1)
	return l.Locker.Check(ctx, le)
}

// countingQueue counts the cleanup messages sent, by table class.
type countingQueue struct {
	next  maintenance.Enqueuer
	class func(table string) int
	msgs  [4]atomic.Int64
}

func (q *countingQueue) Send(ctx context.Context, bodies [][]byte) error {
	for _, b := range bodies {
		if m, err := maintenance.DecodeRangeMessage(b); err == nil {
			q.msgs[q.class("wh/"+m.Table+"/")].Add(1)
		}
	}
	return q.next.Send(ctx, bodies)
}

var fleetSchema = arrow.NewSchema([]arrow.Field{
	{Name: "name", Type: arrow.BinaryTypes.String},
	{Name: "val", Type: arrow.BinaryTypes.String},
}, nil)

// fleetRow appends one row (the simulation's write: one new one-row
// fragment per write, as the seed's upserts of new names).
func fleetRow(tb *table.Table, ctx context.Context, k string) error {
	b := array.NewRecordBuilder(memory.DefaultAllocator, fleetSchema)
	defer b.Release()
	b.Field(0).(*array.StringBuilder).Append(k)
	b.Field(1).(*array.StringBuilder).Append("v")
	rec := b.NewRecordBatch()
	defer rec.Release()
	_, err := tb.Append(ctx, rec)
	return err
}

func fleetName(i int) string { return fmt.Sprintf("t%05d", i) }

// writePeriod writes each active table once a minute for minutes
// simulated minutes (keys from *k); the tables are written side by side.
func (w *fleetWorld) writePeriod(ctx context.Context, minutes int, k *int) error {
	for m := 0; m < minutes; m++ {
		w.clock.Advance(time.Minute)
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(max(runtime.GOMAXPROCS(0), 2))
		for _, tb := range w.active {
			*k++
			key := fmt.Sprintf("k%d", *k)
			g.Go(func() error { return fleetRow(tb, gctx, key) })
		}
		if err := g.Wait(); err != nil {
			return err
		}
	}
	return nil
}

// fleetWorld is a warehouse of n tables on the memory store.
type fleetWorld struct {
	clock   *fakeclock.Clock
	mem     *memStore
	cs      *classStore
	locker  *countingLocker
	q       *queue.Embedded
	cq      *countingQueue
	cat     *catalog.Catalog
	runner  *maintenance.Runner
	fleet   fleet.Options // the scan's (the safety-net scan in notifiedIdle)
	cleaner *maintenance.Cleaner
	active  map[string]*table.Table
}

func newFleetWorld(ctx context.Context, n, activeEvery int, format uint64) (*fleetWorld, error) {
	w := &fleetWorld{clock: fakeclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), active: map[string]*table.Table{}}
	w.mem = newMemStore(w.clock)
	isActive := func(name string) bool {
		var i int
		if _, err := fmt.Sscanf(name, "t%05d", &i); err != nil {
			return false
		}
		return activeEvery > 0 && i%activeEvery == 0
	}
	classOf := func(key string) int {
		rest, ok := strings.CutPrefix(key, "wh/")
		if !ok {
			return classOther
		}
		name, _, _ := strings.Cut(rest, "/")
		switch {
		case strings.HasPrefix(name, "_"):
			return classShared
		case isActive(name):
			return classActive
		default:
			return classIdle
		}
	}
	lockClass := func(name string) int {
		if _, root, ok := strings.Cut(name, "table/"); ok {
			return classOf(root)
		}
		return classShared
	}
	w.cs = newClassStore(w.mem, classOf)
	opts := table.Options{Clock: fakeclock.NoSleep(w.clock)}
	var err error
	if w.cat, err = catalog.Open(ctx, w.cs, "wh/", opts); err != nil {
		return nil, err
	}
	regs := make([]catalog.Registration, n)
	for i := range n {
		name := fleetName(i)
		topts := opts
		topts.Format = format
		tb, err := table.Create(ctx, w.mem, "wh/"+name, fleetSchema, "name", topts)
		if err != nil {
			return nil, err
		}
		if err := fleetRow(tb, ctx, "k0"); err != nil {
			return nil, err
		}
		if isActive(name) {
			w.active[name] = tb
		}
		regs[i] = catalog.Registration{Name: name, Rel: name, Policy: maintenance.DefaultPolicy()}
	}
	if err := w.cat.RegisterBatch(ctx, regs); err != nil {
		return nil, err
	}
	w.locker = &countingLocker{Locker: lock.NewInProcess(w.clock), class: lockClass}
	w.q = queue.NewEmbedded(queue.EmbeddedOptions{Clock: w.clock})
	w.cq = &countingQueue{next: maintenance.QueueEnqueuer{Q: w.q}, class: classOf}
	w.runner = &maintenance.Runner{Store: w.cs, Catalog: w.cat, Locker: w.locker, Queue: w.cq, Clock: w.clock,
		Owner: "fleet", KeepAlive: -1}
	// As the Lambda cleaner is configured (shared/awsfn): no size listings.
	w.cleaner = &maintenance.Cleaner{Store: w.cs, Tables: w.cat, Requeue: w.cq, OpenOpts: opts, SkipSizes: true}
	return w, nil
}

// pass runs one scheduled pass and drains the cleanup queue.
func (w *fleetWorld) pass(ctx context.Context) (fleet.RunReport, error) {
	rep, err := fleet.New(w.runner, w.fleet).Run(ctx)
	if err != nil {
		return rep, err
	}
	_, err = maintenance.DrainLocal(ctx, w.q, w.cleaner, nil)
	return rep, err
}

func perTable(c objstore.Counts, d float64) [5]float64 {
	return [5]float64{float64(c.Get) / d, float64(c.Head) / d, float64(c.Put) / d, float64(c.List) / d, float64(c.DeleteRequests) / d}
}

// idlePass measures one pass over a settled fleet of n idle tables.
func idlePass(ctx context.Context, n int) (FleetIdle, error) {
	w, err := newFleetWorld(ctx, n, 0, 0)
	if err != nil {
		return FleetIdle{}, err
	}
	for range 2 {
		w.clock.Advance(15 * time.Minute)
		if _, err := w.pass(ctx); err != nil {
			return FleetIdle{}, err
		}
	}
	w.clock.Advance(15 * time.Minute)
	before := w.cs.counts()
	if _, err := w.pass(ctx); err != nil {
		return FleetIdle{}, err
	}
	c := w.cs.counts()[classIdle].Sub(before[classIdle])
	return FleetIdle{Tables: n, PerTable: perTable(c, float64(n)), Total: c}, nil
}

// FleetSim runs the fleet simulation.
func FleetSim(ctx context.Context, cfg FleetConfig, logf func(string, ...any)) (FleetResult, error) {
	start := time.Now()
	// The simulation allocates a lot of short-lived Arrow/Parquet buffers:
	// collect less often while it runs (figures are request counts and
	// modelled times, not this process's speed).
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	res := FleetResult{Cfg: cfg}
	w, err := newFleetWorld(ctx, cfg.Tables, cfg.ActiveEvery, cfg.Format)
	if err != nil {
		return res, err
	}
	logf("fleet: %d tables registered (%d active) in %s", cfg.Tables, len(w.active), time.Since(start).Round(time.Second))
	passStart := time.Now()
	passes := int(cfg.Duration / cfg.Period)
	minutes := int(cfg.Period / time.Minute)
	var base [4]objstore.Counts
	var baseLW, baseLR, baseM [4]int64
	snap := func() {
		base = w.cs.counts()
		for i := range 4 {
			baseLW[i], baseLR[i], baseM[i] = w.locker.writes[i].Load(), w.locker.reads[i].Load(), w.cq.msgs[i].Load()
		}
	}
	var wallSum time.Duration
	maintainedSum := 0
	k := 1
	for p := 0; p < cfg.Settle+passes; p++ {
		if p == cfg.Settle {
			snap()
		}
		if err := w.writePeriod(ctx, minutes, &k); err != nil {
			return res, err
		}
		before := w.cs.counts()
		rep, err := fleet.New(w.runner, w.fleet).Run(ctx)
		if err != nil {
			return res, err
		}
		mid := w.cs.counts()
		if _, err := maintenance.DrainLocal(ctx, w.q, w.cleaner, nil); err != nil {
			return res, err
		}
		after := w.cs.counts()
		failed := 0
		for _, tr := range rep.Tables {
			if tr.Skipped != "" {
				failed++
				if failed == 1 {
					logf("fleet: %s not maintained: %s", tr.Table, tr.Skipped)
				}
			}
		}
		res.Failed += failed
		if p < cfg.Settle {
			logf("fleet: settling pass %d: %d maintained (%d failed) in %s", p+1, len(rep.Tables), failed, time.Since(passStart).Round(time.Second))
			passStart = time.Now()
			continue
		}
		var runC, cleanC objstore.Counts
		for i := range 4 {
			runC = runC.Add(mid[i].Sub(before[i]))
			cleanC = cleanC.Add(after[i].Sub(mid[i]))
		}
		// The scan's LISTs go ScanConcurrency at a time; maintenance is
		// modelled serially (an upper bound: its reads overlap).
		scanLists := int64(rep.Registered - len(rep.Tables))
		scan := time.Duration(math.Ceil(float64(rep.Registered)/float64(fleet.DefaultScanConcurrency))) * cfg.Profile.List
		rest := runC
		rest.List -= min(scanLists, rest.List)
		wall := scan + cfg.Profile.Of(rest)
		res.ScanWall = scan
		wallSum += wall
		res.MaxWall = max(res.MaxWall, wall)
		res.CleanWall += cfg.Profile.Of(cleanC)
		res.Cleaner = res.Cleaner.Add(cleanC)
		maintainedSum += len(rep.Tables)
		for _, tb := range w.active {
			vs, err := tb.Versions(ctx)
			if err != nil {
				return res, err
			}
			res.MaxVersions = max(res.MaxVersions, len(vs))
			if len(vs) > 0 {
				if o, err := w.mem.Head(ctx, tb.Root()+table.ManifestKey(vs[len(vs)-1].Version)); err == nil {
					res.MaxManifest = max(res.MaxManifest, o.Size)
				}
			}
		}
		if (p-cfg.Settle)%16 == 15 {
			logf("fleet: pass %d of %d (simulated %s), %d maintained, %s since the last line", p-cfg.Settle+1, passes, time.Duration(p+1)*cfg.Period, len(rep.Tables), time.Since(passStart).Round(time.Second))
			passStart = time.Now()
		}
	}
	res.Passes = passes
	end := w.cs.counts()
	cls := func(i, tables int) FleetClass {
		return FleetClass{Tables: tables, Requests: end[i].Sub(base[i]), LockW: w.locker.writes[i].Load() - baseLW[i],
			LockR: w.locker.reads[i].Load() - baseLR[i], Messages: w.cq.msgs[i].Load() - baseM[i]}
	}
	res.Idle = cls(classIdle, cfg.Tables-len(w.active))
	res.Active = cls(classActive, len(w.active))
	res.Shared = cls(classShared, 0)
	// The scheduled invocation itself, measured in real time at the
	// latency profile after one more period of writes each: first with
	// every table in need fanned out (the scan and the sends), then with
	// the template's defaults (inline while InlineTime allows).
	// Periods of writes until a scan finds tables in need (the active
	// tables are maintained in step, every third pass); both invocations
	// then see the same tables in need (the first only sends jobs).
	for range 4 {
		if err := w.writePeriod(ctx, minutes, &k); err != nil {
			return res, err
		}
		sc, err := fleet.New(w.runner, w.fleet).Scan(ctx)
		if err != nil {
			return res, err
		}
		if len(sc.Need) > 0 {
			break
		}
	}
	for _, m := range []struct {
		tables int
		time   time.Duration
		desc   string
	}{{0, 0, "InlineTables 0: every table in need sent as a job"}, {-1, 45 * time.Second, "the template's defaults: inline for InlineTime 45s, the rest as jobs"}} {
		logf("fleet: one scheduled invocation at %s (%s)", cfg.Profile, m.desc)
		sc, err := measureScheduled(ctx, w, cfg.Profile, m.tables, m.time, m.desc)
		if err != nil {
			return res, err
		}
		res.Scheduled = append(res.Scheduled, sc)
	}
	if res.Notified, err = notifiedIdle(ctx, w, cfg, logf); err != nil {
		return res, err
	}
	res.MeanMaintained = float64(maintainedSum) / float64(max(passes, 1))
	res.MeanWall = wallSum / time.Duration(max(passes, 1))
	res.CleanWall /= time.Duration(max(passes, 1))
	for _, n := range cfg.Linearity {
		logf("fleet: idle pass over %d tables", n)
		li, err := idlePass(ctx, n)
		if err != nil {
			return res, err
		}
		res.Linearity = append(res.Linearity, li)
	}
	// The main simulation's idle tables are the largest point.
	res.Linearity = append(res.Linearity, FleetIdle{Tables: cfg.Tables, PerTable: perTable(res.Idle.Requests, float64(res.Idle.Tables*max(passes, 1))), Total: res.Idle.Requests})
	for _, n := range cfg.Embedded {
		logf("fleet: embedded warehouse, %d tables, local disk (%s so far)", n, time.Since(start).Round(time.Second))
		e, err := embeddedIdle(ctx, cfg.WorkDir, n)
		if err != nil {
			return res, err
		}
		res.Embedded = append(res.Embedded, e)
	}
	res.Elapsed = time.Since(start)
	return res, nil
}

// FleetCost is the monthly cost of one table of a class, by service.
type FleetCost struct {
	S3, Lambda, SQS, Dynamo float64
	Requests                objstore.Counts // S3 requests per month
}

// Total is the sum over services.
func (c FleetCost) Total() float64 { return c.S3 + c.Lambda + c.SQS + c.Dynamo }

// Costs prices one idle and one active table per month: its own requests
// (S3; DynamoDB lock calls; SQS send, receive and delete per cleanup
// message), plus an equal share of the fleet's shared requests (index,
// registry, _stats) and of the scheduled function (1 request and the
// modelled scan per pass). The maintenance and cleaning time of active
// tables is charged to them.
func (r FleetResult) Costs() (idle, active FleetCost) {
	passes := float64(max(r.Passes, 1))
	month := float64(PassesPerMonth) / passes // scale measured passes to a month
	n := float64(max(r.Idle.Tables+r.Active.Tables, 1))
	shareReq := scaleCounts(r.Shared.Requests, month/n)
	share := FleetCost{
		S3:     requestCost(shareReq),
		Lambda: PassesPerMonth * (PriceLambdaPerMillion/1e6 + r.ScanWall.Seconds()*LambdaMemoryGB*PriceLambdaGBSecondArm) / n,
		Dynamo: float64(r.Shared.LockW) * month / n * PriceDynamoWRUMillion / 1e6,
	}
	of := func(c FleetClass, wall time.Duration) FleetCost {
		t := float64(max(c.Tables, 1))
		req := scaleCounts(c.Requests, month/t)
		return FleetCost{
			Requests: req.Add(shareReq),
			S3:       requestCost(req) + share.S3,
			Lambda:   wall.Seconds()*month/t*LambdaMemoryGB*PriceLambdaGBSecondArm + share.Lambda,
			SQS:      float64(c.Messages) * 3 * month / t * PriceSQSPerMillion / 1e6,
			Dynamo:   (float64(c.LockW)*PriceDynamoWRUMillion+float64(c.LockR)*PriceDynamoRRUMillion)*month/t/1e6 + share.Dynamo,
		}
	}
	idle = of(r.Idle, 0)
	// Active tables: the modelled maintenance and cleaning time of every pass.
	maint := (r.MeanWall-r.ScanWall)*time.Duration(r.Passes) + r.CleanWall*time.Duration(r.Passes)
	active = of(r.Active, maint)
	return idle, active
}
