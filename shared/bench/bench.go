package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/tablekeep/tablekeep/shared/clock"
	"github.com/tablekeep/tablekeep/shared/dataset"
	"github.com/tablekeep/tablekeep/shared/embedded"
	"github.com/tablekeep/tablekeep/shared/fleet"
	"github.com/tablekeep/tablekeep/shared/internal/fakeclock"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/queue"
	"github.com/tablekeep/tablekeep/shared/table"
	"github.com/tablekeep/tablekeep/shared/warehouse"
)

// Config sizes one run.
type Config struct {
	WorkDir       string // scratch directory (tables are built here)
	DocsDir       string // where benchmarks.md and the plot go
	Quick         bool   // tiny sizes (the generator's test)
	ChurnOps      int    // writes per churn run (one simulated minute each)
	CompactEvery  int    // compactor period in writes (minutes); the seed's scanner ran every 15 min
	SweepEvery    int    // sweeper period in writes (minutes): daily
	Samples       int    // points per churn series
	Scales        []int  // history sizes for open/commit
	KeySpace      int    // names the histories upsert over
	Repeat        int    // timed repetitions per figure
	GrowthUpserts int    // upserts of new names in the growth figure
	CompactFrags  int    // fragments in the compaction fixture
	CompactRows   int    // rows per fragment there
	Log           io.Writer
	Clock         clock.Clock // reads the report date; nil: the real clock
	// Latency is added to every measured request (not to building the
	// fixtures): `tkbench -latency s3`. Zero: local disk as it is.
	Latency objstore.Profile
	// OpenGetProfile is the profile of the "open + get at scale" section
	// (default objstore.S3Profile()), whatever Latency is.
	OpenGetProfile objstore.Profile
	// The section "Maintenance at object-store latency": the demo's churn
	// (LatencyOps writes by LatencyWriters writers), one pass under the
	// none and s3 profiles; a cleanup backlog of BacklogVersions versions
	// drained by 1 and 5 cleaner workers under s3. LatencyOps 0 skips it.
	LatencyOps, LatencyWriters int
	BacklogVersions            int
	// Only, if "latency", "fleet" or "goals", measures only that section and
	// writes nothing to DocsDir (Run returns it; tkbench prints it).
	Only string
	// Fleet sizes the fleet simulation (DefaultFleetConfig); Tables 0 skips it.
	Fleet FleetConfig
	// Format is the table format the churn creates (0: table.Create's
	// default, format 3); the goals section runs a format-2 churn beside it.
	Format uint64
	// GoalFleetTables sizes the goals section's fleet simulations, one per
	// format (0: Fleet.Tables); Fleet.Tables 0 skips them.
	GoalFleetTables int
}

// measured wraps a store that measured requests go through with the run's
// latency profile.
func (c *Config) measured(st objstore.Store) objstore.Store {
	return objstore.WithLatency(st, c.Latency)
}

// Defaults returns the sizes of `make bench` (or of -quick).
func Defaults(quick bool) Config {
	if quick {
		return Config{Quick: true, ChurnOps: 150, CompactEvery: 15, SweepEvery: 60, Samples: 15,
			Scales: []int{10, 50, 200}, KeySpace: 50, Repeat: 3, GrowthUpserts: 50, CompactFrags: 40, CompactRows: 10,
			LatencyOps: 40, LatencyWriters: 4, BacklogVersions: 60, Fleet: DefaultFleetConfig(true)}
	}
	return Config{ChurnOps: 10000, CompactEvery: 15, SweepEvery: 1440, Samples: 60,
		Scales: []int{10, 1000, 20000}, KeySpace: 1000, Repeat: 20, GrowthUpserts: 1000, CompactFrags: 2000, CompactRows: 50,
		LatencyOps: 2000, LatencyWriters: 4, BacklogVersions: BacklogFull, Fleet: DefaultFleetConfig(false)}
}

// Results is everything one run measured.
type Results struct {
	Cfg        Config
	Date       time.Time
	Machine    string
	Without    ChurnResult
	With       ChurnResult
	Replay     ReplayResult
	Scales     []ScaleResult
	Compaction []CompactionResult
	Cleanup    CleanupResult
	Growth     GrowthResult
	OpenGet    OpenGetResult // open + get by key at the largest history, under OpenGetProfile
	Latency    LatencyResult // maintenance at object-store latency (none and s3)
	Heap       []HeapResult  // compaction peak heap (CompactionHeapCases; not in -quick)
	Fleet      *FleetResult  // the fleet simulation (nil if skipped)
	Goals      *GoalsResult  // issue 23's goals, format 3 beside format 2
	Elapsed    time.Duration
}

func (c *Config) logf(format string, args ...any) {
	if c.Log != nil {
		fmt.Fprintf(c.Log, format+"\n", args...)
	}
}

// Run measures everything and writes the report.
func Run(ctx context.Context, cfg Config) (*Results, error) {
	start := time.Now()
	cfg.Clock = clock.Or(cfg.Clock)
	if cfg.OpenGetProfile.IsZero() {
		cfg.OpenGetProfile = objstore.S3Profile()
	}
	if err := os.MkdirAll(cfg.WorkDir, 0o755); err != nil {
		return nil, err
	}
	res := &Results{Cfg: cfg, Date: cfg.Clock.Now().UTC(),
		Machine: fmt.Sprintf("%s/%s, %d CPUs, %s, local disk", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version())}
	var err error
	fleet := func() error {
		if cfg.Fleet.Tables == 0 {
			return nil
		}
		fc := cfg.Fleet
		fc.WorkDir = filepath.Join(cfg.WorkDir, "fleet")
		if err := os.MkdirAll(fc.WorkDir, 0o755); err != nil {
			return err
		}
		cfg.logf("fleet: %d tables, one written in %d, a pass every %s for %s", fc.Tables, fc.ActiveEvery, fc.Period, fc.Duration)
		fr, err := FleetSim(ctx, fc, cfg.logf)
		if err != nil {
			return fmt.Errorf("fleet: %w", err)
		}
		res.Fleet = &fr
		return nil
	}
	if cfg.Only == "fleet" {
		if err := fleet(); err != nil {
			return nil, err
		}
		res.Elapsed = time.Since(start)
		return res, nil
	}
	goals := func() error {
		cfg.logf("goals: format 3 beside format 2")
		gr, err := goalsSection(ctx, cfg, filepath.Join(cfg.WorkDir, "goals"), res.With, res.Fleet)
		if err != nil {
			return fmt.Errorf("goals: %w", err)
		}
		res.Goals = &gr
		return nil
	}
	if cfg.Only == "goals" {
		if err := goals(); err != nil {
			return nil, err
		}
		res.Elapsed = time.Since(start)
		return res, nil
	}
	if cfg.Only == "latency" {
		if res.Latency, err = latencySection(ctx, cfg, filepath.Join(cfg.WorkDir, "latency")); err != nil {
			return nil, fmt.Errorf("maintenance at latency: %w", err)
		}
		res.Elapsed = time.Since(start)
		return res, nil
	}
	cfg.logf("churn without maintenance: %d writes", cfg.ChurnOps)
	if res.Without, err = churn(ctx, cfg, filepath.Join(cfg.WorkDir, "churn-without"), false); err != nil {
		return nil, fmt.Errorf("churn without maintenance: %w", err)
	}
	cfg.logf("seed replay: one maintenance pass over that table")
	if res.Replay, err = replay(ctx, cfg, res.Without); err != nil {
		return nil, fmt.Errorf("seed replay: %w", err)
	}
	cfg.logf("churn with maintenance every %d writes", cfg.CompactEvery)
	if res.With, err = churn(ctx, cfg, filepath.Join(cfg.WorkDir, "churn-with"), true); err != nil {
		return nil, fmt.Errorf("churn with maintenance: %w", err)
	}
	for i, n := range cfg.Scales {
		cfg.logf("open/commit at %d versions", n)
		sr, err := scale(ctx, cfg, filepath.Join(cfg.WorkDir, fmt.Sprintf("scale-%d", n)), n, i == len(cfg.Scales)-1, res)
		if err != nil {
			return nil, fmt.Errorf("scale %d: %w", n, err)
		}
		res.Scales = append(res.Scales, sr)
	}
	cfg.logf("compaction of %d fragments x %d rows", cfg.CompactFrags, cfg.CompactRows)
	cr, err := compactFixture(ctx, cfg, filepath.Join(cfg.WorkDir, "compact"))
	if err != nil {
		return nil, fmt.Errorf("compaction: %w", err)
	}
	res.Compaction = append(res.Compaction, cr)
	cfg.logf("upsert growth: %d upserts", cfg.GrowthUpserts)
	if res.Growth, err = growth(ctx, cfg, filepath.Join(cfg.WorkDir, "growth")); err != nil {
		return nil, fmt.Errorf("growth: %w", err)
	}
	if cfg.LatencyOps > 0 {
		cfg.logf("maintenance at object-store latency: %d churn writes by %d writers", cfg.LatencyOps, cfg.LatencyWriters)
		if res.Latency, err = latencySection(ctx, cfg, filepath.Join(cfg.WorkDir, "latency")); err != nil {
			return nil, fmt.Errorf("maintenance at latency: %w", err)
		}
	}
	if !cfg.Quick {
		for i, c := range CompactionHeapCases() {
			cfg.logf("compaction peak heap: %s", c.Label)
			hr, err := CompactionHeap(ctx, filepath.Join(cfg.WorkDir, fmt.Sprintf("heap-%d", i)), c)
			if err != nil {
				return nil, fmt.Errorf("compaction heap %s: %w", c.Label, err)
			}
			res.Heap = append(res.Heap, hr)
		}
	}
	if err := fleet(); err != nil {
		return nil, err
	}
	if err := goals(); err != nil {
		return nil, err
	}
	res.Elapsed = time.Since(start)
	if err := Write(res); err != nil {
		return nil, err
	}
	return res, nil
}

// Sample is one point of a churn series.
type Sample struct {
	Minute              int
	Versions            int   // manifests stored
	LatestManifestBytes int64 // the manifest every open reads
	ManifestBytes       int64 // all stored manifests
}

// ChurnResult is one churn run.
type ChurnResult struct {
	Dir           string // warehouse directory; the table is "registry" in it
	Ops           int
	Creates       int
	Deletes       int
	Retries       int
	Series        []Sample
	Writes        Reqs // requests of the writes
	Maint         Reqs // requests of maintenance (N = compactor passes)
	Sweeps        int
	WriteTimeLast time.Duration // mean write time over the last tenth
	Final         dataset.Stats
	Objects       int   // files under the table directory
	ObjectBytes   int64 // their bytes
	Elapsed       time.Duration
}

// churn replays the seed's registry workload with one writer: 55% creates
// (upsert of a new name), 35% deletes of a live name, 10% retried creates
// (upsert of a live name), one commit each, one simulated minute apart.
// With maintain, a compactor pass (compact, plan prune, enqueue; then the
// cleaner drains the queue with no lock held) runs every CompactEvery
// minutes and the sweep every SweepEvery minutes, as the Lambda schedule
// does.
func churn(ctx context.Context, cfg Config, dir string, maintain bool) (ChurnResult, error) {
	res := ChurnResult{Dir: dir, Ops: cfg.ChurnOps}
	if err := fresh(dir); err != nil {
		return res, err
	}
	disk, err := objstore.NewDisk(dir)
	if err != nil {
		return res, err
	}
	clock := newFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cs := fakeclock.NewStore(disk, clock)
	writes, maint := objstore.NewCounting(cfg.measured(cs)), objstore.NewCounting(cfg.measured(cs))
	opts := table.Options{Clock: fakeclock.NoSleep(clock), Format: cfg.Format}
	t, err := table.Create(ctx, writes, "registry", Schema, "name", opts)
	if err != nil {
		return res, err
	}
	var w *embedded.Warehouse
	var runner *maintenance.Runner
	if maintain {
		if w, err = embedded.Open(ctx, dir, clock, nil, func(objstore.Store) objstore.Store { return maint }); err != nil {
			return res, err
		}
		if err := w.Catalog.Register(ctx, "registry", "registry", maintenance.DefaultPolicy()); err != nil {
			return res, err
		}
		runner = w.NewRunner(warehouse.Options{Owner: "bench"})
		maint.Reset() // setup (catalog creation, registration) is not maintenance
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var live []string
	seq := 0
	every := max(cfg.ChurnOps/max(cfg.Samples, 1), 1)
	var lastTenth time.Duration
	start := time.Now()
	for i := 1; i <= cfg.ChurnOps; i++ {
		clock.Advance(time.Minute)
		p := rng.Float64()
		opStart := time.Now()
		switch {
		case len(live) == 0 || p < 0.55:
			seq++
			rec := rows("rollout", seq, 1, clock.Now())
			_, err = t.Upsert(ctx, rec)
			rec.Release()
			live = append(live, fmt.Sprintf("rollout-%06d", seq))
			res.Creates++
		case p < 0.90:
			j := rng.IntN(len(live))
			_, err = t.Delete(ctx, live[j])
			live[j] = live[len(live)-1]
			live = live[:len(live)-1]
			res.Deletes++
		default:
			var n int
			fmt.Sscanf(live[rng.IntN(len(live))], "rollout-%d", &n)
			rec := rows("rollout", n, 1, clock.Now())
			_, err = t.Upsert(ctx, rec)
			rec.Release()
			res.Retries++
		}
		if err != nil {
			return res, fmt.Errorf("write %d: %w", i, err)
		}
		if i > cfg.ChurnOps-cfg.ChurnOps/10 {
			lastTenth += time.Since(opStart)
		}
		if maintain && i%cfg.CompactEvery == 0 {
			if _, err := fleet.New(runner, fleet.Options{}).Run(ctx); err != nil {
				return res, err
			}
			if _, err := maintenance.DrainLocal(ctx, w.Queue, w.Cleaner(), nil); err != nil {
				return res, err
			}
			res.Maint.N++
		}
		if maintain && i%cfg.SweepEvery == 0 {
			refs, err := w.Catalog.Tables(ctx)
			if err != nil {
				return res, err
			}
			for _, ref := range refs {
				if _, err := w.NewSweeper(warehouse.Options{}).Sweep(ctx, ref); err != nil {
					return res, err
				}
			}
			res.Sweeps++
		}
		if i%every == 0 || i == cfg.ChurnOps {
			s, err := sample(ctx, cs, i)
			if err != nil {
				return res, err
			}
			res.Series = append(res.Series, s)
		}
	}
	res.Elapsed = time.Since(start)
	res.WriteTimeLast = lastTenth / time.Duration(max(cfg.ChurnOps/10, 1))
	res.Writes = Reqs{C: writes.Counts(), N: cfg.ChurnOps}
	res.Maint.C = maint.Counts()
	ft, err := table.Open(ctx, cs, "registry", opts)
	if err != nil {
		return res, err
	}
	if res.Final, err = ft.Stats(ctx); err != nil {
		return res, err
	}
	if int(res.Final.Rows) != len(live) {
		return res, fmt.Errorf("table has %d rows, the model %d", res.Final.Rows, len(live))
	}
	res.Objects, res.ObjectBytes, err = objstore.DirUsage(filepath.Join(dir, "registry"))
	return res, err
}

func sample(ctx context.Context, st objstore.Store, minute int) (Sample, error) {
	t, err := table.Open(ctx, st, "registry", table.Options{})
	if err != nil {
		return Sample{}, err
	}
	s, err := t.Stats(ctx)
	if err != nil {
		return Sample{}, err
	}
	return Sample{Minute: minute, Versions: s.Versions, LatestManifestBytes: s.LatestManifestBytes, ManifestBytes: s.ManifestBytes}, nil
}

// ReplayResult is the seed replay: the unmaintained churn table, then one
// maintenance pass, with a key lookup before and after.
type ReplayResult struct {
	Before, After         dataset.Stats
	ObjectsBefore         int
	ObjectsAfter          int
	Compact, Drain, Sweep Reqs
	CompactTime           time.Duration
	DrainTime             time.Duration
	SweepTime             time.Duration
	KeysDeleted           int64
	GetBefore, GetAfter   Reqs
	GetTimeBefore         time.Duration
	GetTimeAfter          time.Duration
	OpenBefore, OpenAfter time.Duration
}

func replay(ctx context.Context, cfg Config, ch ChurnResult) (ReplayResult, error) {
	var res ReplayResult
	disk, err := objstore.NewDisk(ch.Dir)
	if err != nil {
		return res, err
	}
	// Two hours after the last write: everything but the newest versions
	// is past the grace window.
	clock := newFakeClock(time.Now().Add(2 * time.Hour))
	cnt := objstore.NewCounting(cfg.measured(disk))
	lookup := func() (Reqs, time.Duration, error) {
		t0, err := table.Open(ctx, disk, "registry", table.Options{})
		if err != nil {
			return Reqs{}, 0, err
		}
		snap, err := t0.Latest(ctx)
		if err != nil {
			return Reqs{}, 0, err
		}
		var name string
		if err := snap.Scan(ctx, table.ScanOptions{Columns: []string{"name"}}, func(rec arrowRecord) error {
			if name == "" && rec.NumRows() > 0 {
				name = firstString(rec)
			}
			return nil
		}); err != nil {
			return Reqs{}, 0, err
		}
		return timed(cfg.Repeat, cnt, func(int) error {
			t, err := table.Open(ctx, cnt, "registry", table.Options{})
			if err != nil {
				return err
			}
			rec, err := t.Snapshot().Get(ctx, name)
			if err != nil {
				return err
			}
			rec.Release()
			return nil
		})
	}
	if res.GetBefore, res.GetTimeBefore, err = lookup(); err != nil {
		return res, err
	}
	res.Before = ch.Final
	res.ObjectsBefore = ch.Objects
	w, err := embedded.Open(ctx, ch.Dir, clock, nil, func(objstore.Store) objstore.Store { return cnt })
	if err != nil {
		return res, err
	}
	if err := w.Catalog.Register(ctx, "registry", "registry", maintenance.DefaultPolicy()); err != nil {
		return res, err
	}
	ref, err := w.Catalog.Resolve(ctx, "registry")
	if err != nil {
		return res, err
	}
	runner := w.NewRunner(warehouse.Options{Owner: "bench"})
	base := cnt.Counts()
	t0 := time.Now()
	if _, err := runner.MaintainTable(ctx, ref); err != nil {
		return res, err
	}
	res.CompactTime = time.Since(t0)
	res.Compact = Reqs{C: cnt.Counts().Sub(base), N: 1}
	base, t0 = cnt.Counts(), time.Now()
	if _, err := maintenance.DrainLocal(ctx, w.Queue, w.Cleaner(), nil); err != nil {
		return res, err
	}
	res.DrainTime = time.Since(t0)
	res.Drain = Reqs{C: cnt.Counts().Sub(base), N: 1}
	base, t0 = cnt.Counts(), time.Now()
	if _, err := w.NewSweeper(warehouse.Options{}).Sweep(ctx, ref); err != nil {
		return res, err
	}
	res.SweepTime = time.Since(t0)
	res.Sweep = Reqs{C: cnt.Counts().Sub(base), N: 1}
	res.KeysDeleted = res.Drain.C.DeleteKeys + res.Sweep.C.DeleteKeys
	t, err := table.Open(ctx, disk, "registry", table.Options{})
	if err != nil {
		return res, err
	}
	if res.After, err = t.Stats(ctx); err != nil {
		return res, err
	}
	if res.After.Rows != res.Before.Rows {
		return res, fmt.Errorf("maintenance changed the rows: %d -> %d", res.Before.Rows, res.After.Rows)
	}
	if res.ObjectsAfter, _, err = objstore.DirUsage(filepath.Join(ch.Dir, "registry")); err != nil {
		return res, err
	}
	res.GetAfter, res.GetTimeAfter, err = lookup()
	return res, err
}

// ScaleResult is open/commit at one history size.
type ScaleResult struct {
	Versions      int
	Fragments     int
	ManifestBytes int64
	Build         time.Duration
	Open          Reqs
	OpenTime      time.Duration
	Append        Reqs
	AppendTime    time.Duration
	Upsert        Reqs
	UpsertTime    time.Duration
	Create        Reqs // open + get (absent) + upsert: the seed's POST /rollouts
	CreateTime    time.Duration
	Lookup        Reqs // open + get: the seed's GET /rollouts/{name}
	LookupTime    time.Duration
	// After maintenance (largest size only).
	Maintained                  bool
	OpenAfter, LookupAfter      Reqs
	OpenTimeAfter, LookupTAfter time.Duration
	ManifestBytesAfter          int64
	VersionsAfter               int
}

// CleanupResult is cleanup throughput on the largest history.
type CleanupResult struct {
	Versions  int
	Plan      Reqs
	PlanTime  time.Duration
	Drain     Reqs
	DrainTime time.Duration
	Messages  int
}

func scale(ctx context.Context, cfg Config, dir string, n int, last bool, all *Results) (ScaleResult, error) {
	res := ScaleResult{Versions: n}
	if err := fresh(dir); err != nil {
		return res, err
	}
	disk, err := objstore.NewDisk(dir)
	if err != nil {
		return res, err
	}
	clock := newFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cs := fakeclock.NewStore(disk, clock)
	cnt := objstore.NewCounting(cfg.measured(cs))
	opts := table.Options{Clock: fakeclock.NoSleep(clock)}
	start := time.Now()
	t, err := table.Create(ctx, cs, "hist", Schema, "name", opts)
	if err != nil {
		return res, err
	}
	for i := 0; i < n-1; i++ {
		clock.Advance(time.Second)
		rec := rows("rollout", i%cfg.KeySpace, 1, clock.Now())
		_, err := t.Upsert(ctx, rec)
		rec.Release()
		if err != nil {
			return res, err
		}
	}
	res.Build = time.Since(start)
	res.Fragments = len(t.Cached().Fragments)
	st, err := t.Stats(ctx)
	if err != nil {
		return res, err
	}
	res.ManifestBytes = st.LatestManifestBytes
	open := func(int) error { _, err := table.Open(ctx, cnt, "hist", opts); return err }
	if res.Open, res.OpenTime, err = timed(cfg.Repeat, cnt, open); err != nil {
		return res, err
	}
	lookup := func(i int) error {
		h, err := table.Open(ctx, cnt, "hist", opts)
		if err != nil {
			return err
		}
		rec, err := h.Snapshot().Get(ctx, fmt.Sprintf("rollout-%06d", i%min(cfg.KeySpace, n-1)))
		if err != nil {
			return err
		}
		rec.Release()
		return nil
	}
	if res.Lookup, res.LookupTime, err = timed(cfg.Repeat, cnt, lookup); err != nil {
		return res, err
	}
	if last {
		cfg.logf("open + get by key at %d versions under the %s profile", n, cfg.OpenGetProfile.Name)
		if all.OpenGet, err = openGet(ctx, cfg, cs, n); err != nil {
			return res, err
		}
	}
	// Commits add versions; measured after the reads, on a warm handle.
	h, err := table.Open(ctx, cnt, "hist", opts)
	if err != nil {
		return res, err
	}
	if res.Upsert, res.UpsertTime, err = timed(cfg.Repeat, cnt, func(i int) error {
		rec := rows("rollout", i%min(cfg.KeySpace, n-1), 1, clock.Now())
		defer rec.Release()
		_, err := h.Upsert(ctx, rec)
		return err
	}); err != nil {
		return res, err
	}
	if res.Append, res.AppendTime, err = timed(cfg.Repeat, cnt, func(i int) error {
		rec := rows("appended", i, 1, clock.Now())
		defer rec.Release()
		_, err := h.Append(ctx, rec)
		return err
	}); err != nil {
		return res, err
	}
	if res.Create, res.CreateTime, err = timed(cfg.Repeat, cnt, func(i int) error {
		c, err := table.Open(ctx, cnt, "hist", opts)
		if err != nil {
			return err
		}
		name := fmt.Sprintf("created-%06d", i)
		if _, err := c.Snapshot().Get(ctx, name); !errors.Is(err, table.ErrNotFound) {
			return fmt.Errorf("contains(%s): %v", name, err)
		}
		rec := rows("created", i, 1, clock.Now())
		defer rec.Release()
		_, err = c.Upsert(ctx, rec)
		return err
	}); err != nil {
		return res, err
	}
	if !last {
		return res, nil
	}
	// The largest history: compaction and cleanup throughput, then the
	// reads again.
	clock.Advance(2 * time.Hour)
	ref := maintenance.TableRef{Name: "hist", Root: "hist/", Policy: maintenance.DefaultPolicy()}
	comp := maintenance.NewCompactor(nil, clock)
	ct, err := table.Open(ctx, cnt, "hist", opts)
	if err != nil {
		return res, err
	}
	base, t0 := cnt.Counts(), time.Now()
	cr, err := comp.Run(ctx, ct, ref.Policy)
	if err != nil {
		return res, err
	}
	all.Compaction = append(all.Compaction, CompactionResult{
		Label: fmt.Sprintf("one-row fragments of the %s-version history", commas(int64(n))),
		Res:   cr, Reqs: Reqs{C: cnt.Counts().Sub(base), N: 1}, Time: time.Since(t0)})
	clock.Advance(2 * time.Hour)
	q := queue.NewEmbedded(queue.EmbeddedOptions{Clock: clock, MaxReceives: 5})
	base, t0 = cnt.Counts(), time.Now()
	plan, err := maintenance.PlanPrune(ctx, ct, "hist", ref.Policy, clock.Now())
	if err != nil {
		return res, err
	}
	if err := maintenance.ApplyPrune(ctx, ct, &plan, maintenance.QueueEnqueuer{Q: q}); err != nil {
		return res, err
	}
	cl := &all.Cleanup
	cl.Versions, cl.PlanTime, cl.Plan = plan.Prunable, time.Since(t0), Reqs{C: cnt.Counts().Sub(base), N: 1}
	cleaner := &maintenance.Cleaner{Store: cnt, Tables: staticResolver{ref}, Requeue: maintenance.QueueEnqueuer{Q: q},
		OpenOpts: table.Options{Clock: clock}}
	base, t0 = cnt.Counts(), time.Now()
	ds, err := maintenance.DrainLocal(ctx, q, cleaner, nil)
	if err != nil {
		return res, err
	}
	cl.DrainTime, cl.Drain, cl.Messages = time.Since(t0), Reqs{C: cnt.Counts().Sub(base), N: 1}, ds.Succeeded
	res.Maintained = true
	if res.OpenAfter, res.OpenTimeAfter, err = timed(cfg.Repeat, cnt, open); err != nil {
		return res, err
	}
	if res.LookupAfter, res.LookupTAfter, err = timed(cfg.Repeat, cnt, lookup); err != nil {
		return res, err
	}
	if st, err = ct.Stats(ctx); err != nil {
		return res, err
	}
	res.ManifestBytesAfter, res.VersionsAfter = st.LatestManifestBytes, st.Versions
	return res, nil
}

// OpenGetResult is open + get by key under a latency profile: a reader's
// cold path (the seed's GET /rollouts/{name}), by requests and round trips.
type OpenGetResult struct {
	Versions int
	Profile  objstore.Profile
	Reqs     Reqs          // over Reqs.N runs
	Path     objstore.Path // the longest critical path of any run
	Time     time.Duration // mean wall time per run
	Ideal    time.Duration // the path's latency under the profile
}

// openGet measures open + get by key on the "hist" table of n versions in
// st, each run on a fresh handle, through the OpenGetProfile's latency
// (real time) and a path tracker outside it.
func openGet(ctx context.Context, cfg Config, st objstore.Store, n int) (OpenGetResult, error) {
	prof := cfg.OpenGetProfile
	res := OpenGetResult{Versions: n, Profile: prof}
	cnt := objstore.NewCounting(st)
	var total time.Duration
	for i := range cfg.Repeat {
		tr := objstore.NewPathTracker(objstore.NewLatency(cnt, prof, nil), prof)
		start := time.Now()
		h, err := table.Open(ctx, tr, "hist", table.Options{})
		if err != nil {
			return res, err
		}
		rec, err := h.Snapshot().Get(ctx, fmt.Sprintf("rollout-%06d", i%min(cfg.KeySpace, n-1)))
		if err != nil {
			return res, err
		}
		rec.Release()
		total += time.Since(start)
		if p := tr.Path(); p.Latency > res.Path.Latency || p.RoundTrips() > res.Path.RoundTrips() {
			res.Path = p
		}
	}
	res.Reqs = Reqs{C: cnt.Counts(), N: cfg.Repeat}
	res.Time = total / time.Duration(max(cfg.Repeat, 1))
	res.Ideal = res.Path.Latency
	return res, nil
}

type staticResolver struct{ ref maintenance.TableRef }

func (r staticResolver) Resolve(_ context.Context, name string) (maintenance.TableRef, error) {
	if name != r.ref.Name {
		return maintenance.TableRef{}, fmt.Errorf("%w: %q", maintenance.ErrUnknownTable, name)
	}
	return r.ref, nil
}

// CompactionResult is one compaction run.
type CompactionResult struct {
	Label string
	Res   maintenance.CompactionResult
	Reqs  Reqs
	Time  time.Duration
}

func compactFixture(ctx context.Context, cfg Config, dir string) (CompactionResult, error) {
	res := CompactionResult{Label: fmt.Sprintf("%d fragments of %d rows (one append each)", cfg.CompactFrags, cfg.CompactRows)}
	if err := fresh(dir); err != nil {
		return res, err
	}
	disk, err := objstore.NewDisk(dir)
	if err != nil {
		return res, err
	}
	cnt := objstore.NewCounting(cfg.measured(disk))
	opts := table.Options{Clock: fakeclock.NoSleep(nil)}
	t, err := table.Create(ctx, disk, "frags", Schema, "name", opts)
	if err != nil {
		return res, err
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range cfg.CompactFrags {
		rec := rows("row", i*cfg.CompactRows, cfg.CompactRows, now)
		_, err := t.Append(ctx, rec)
		rec.Release()
		if err != nil {
			return res, err
		}
	}
	ct, err := table.Open(ctx, cnt, "frags", opts)
	if err != nil {
		return res, err
	}
	base, t0 := cnt.Counts(), time.Now()
	res.Res, err = maintenance.NewCompactor(nil, nil).Run(ctx, ct, maintenance.DefaultPolicy())
	res.Time, res.Reqs = time.Since(t0), Reqs{C: cnt.Counts().Sub(base), N: 1}
	return res, err
}

// GrowthResult is upserts of new names into a never-compacted table.
type GrowthResult struct {
	Upserts             int
	Reqs                Reqs
	FirstTenth          time.Duration // mean
	LastTenth           time.Duration // mean
	FinalManifestBytes  int64
	BytesPerFragment    float64
	FragmentsAtMeasured int
}

func growth(ctx context.Context, cfg Config, dir string) (GrowthResult, error) {
	res := GrowthResult{Upserts: cfg.GrowthUpserts}
	if err := fresh(dir); err != nil {
		return res, err
	}
	disk, err := objstore.NewDisk(dir)
	if err != nil {
		return res, err
	}
	cnt := objstore.NewCounting(cfg.measured(disk))
	// Format 2: the figure is manifest bytes per one-row fragment (the
	// seed's layout, which the cost model's storage without maintenance uses).
	t, err := table.Create(ctx, cnt, "grow", Schema, "name", table.Options{Clock: fakeclock.NoSleep(nil), Format: 2})
	if err != nil {
		return res, err
	}
	cnt.Reset()
	tenth := max(cfg.GrowthUpserts/10, 1)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range cfg.GrowthUpserts {
		rec := rows("rollout", i, 1, now)
		t0 := time.Now()
		_, err := t.Upsert(ctx, rec)
		d := time.Since(t0)
		rec.Release()
		if err != nil {
			return res, err
		}
		if i < tenth {
			res.FirstTenth += d
		}
		if i >= cfg.GrowthUpserts-tenth {
			res.LastTenth += d
		}
	}
	res.FirstTenth /= time.Duration(tenth)
	res.LastTenth /= time.Duration(tenth)
	res.Reqs = Reqs{C: cnt.Counts(), N: cfg.GrowthUpserts}
	st, err := t.Stats(ctx)
	if err != nil {
		return res, err
	}
	res.FinalManifestBytes, res.FragmentsAtMeasured = st.LatestManifestBytes, st.Fragments
	res.BytesPerFragment = float64(st.LatestManifestBytes) / float64(max(st.Fragments, 1))
	return res, nil
}

// fresh empties dir (a scratch directory of this generator).
func fresh(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	return os.MkdirAll(dir, 0o755)
}
