package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/tablekeep/tablekeep/shared/embedded"
	"github.com/tablekeep/tablekeep/shared/internal/fakeclock"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/table"
)

// GoalFigures are issue 23's figures for one table format, each measured
// by counting the requests of one operation (exact) and, for the cold
// paths, the critical path under the s3 profile (objstore.PathTracker over
// objstore.Latency, real waits).
type GoalFigures struct {
	Format     uint64
	WarmUpsert objstore.Counts // one-row upsert of an existing name, warm handle
	WarmNew    objstore.Counts // one-row upsert of a new name, warm handle
	ColdCreate objstore.Counts // registry create: open + get (absent) + upsert, fresh handle
	CreatePath objstore.Path
	ColdGet    objstore.Counts // open + get of a row written since the last compaction
	GetPath    objstore.Path
	// The cleaner over a history of one-row upserts: pruned versions, of
	// which those that added no file (no change record), and the
	// cleaner's GETs of change records for each kind.
	Pruned, PrunedNoFile     int
	RecordGets, NoFileGets   int64
	CleanerGets              int64 // every GET of the drain
	Churn                    ChurnResult
	Fleet                    *FleetResult
	LatestMax, LatestAtEnd   int64 // latest manifest bytes over the churn's samples, and at its end
	InlineRowsAtMax          int
	FleetActive, FleetIdle   FleetCost
	WriterMonth, WriterCount objstore.Counts // writer's requests per table-month (43,200 writes)
}

// GoalsResult is format 3 (the default) beside format 2.
type GoalsResult struct {
	F3, F2 GoalFigures
}

// goalsSection measures both formats. with is the run's churn with
// maintenance (format 3 unless Config.Format says otherwise) and fleet
// its fleet simulation (nil if none); a format-2 churn with maintenance
// and a format-2 fleet simulation are run here.
func goalsSection(ctx context.Context, cfg Config, dir string, with ChurnResult, fleet *FleetResult) (GoalsResult, error) {
	var res GoalsResult
	for _, f := range []uint64{3, 2} {
		g, err := goalFigures(ctx, cfg, filepath.Join(dir, fmt.Sprintf("format%d", f)), f)
		if err != nil {
			return res, fmt.Errorf("format %d: %w", f, err)
		}
		if f == 3 && (cfg.Format == 0 || cfg.Format == 3) && with.Ops > 0 {
			g.Churn = with
		} else {
			c := cfg
			c.Format = f
			cfg.logf("goals: churn with maintenance on format %d", f)
			if g.Churn, err = churn(ctx, c, filepath.Join(dir, fmt.Sprintf("churn%d", f)), true); err != nil {
				return res, fmt.Errorf("format %d churn: %w", f, err)
			}
		}
		for _, s := range g.Churn.Series {
			g.LatestMax = max(g.LatestMax, s.LatestManifestBytes)
		}
		if n := len(g.Churn.Series); n > 0 {
			g.LatestAtEnd = g.Churn.Series[n-1].LatestManifestBytes
		}
		g.WriterMonth = scaleCounts(g.Churn.Writes.C, float64(WritesPerMonth)/float64(max(g.Churn.Ops, 1)))
		def := f == 3 && (cfg.Format == 0 || cfg.Format == 3)
		if def && fleet != nil && fleet.Cfg.Format != 2 && (cfg.GoalFleetTables == 0 || cfg.GoalFleetTables == fleet.Cfg.Tables) {
			g.Fleet = fleet // the run's own fleet simulation is on format 3
			g.FleetIdle, g.FleetActive = fleet.Costs()
		} else if cfg.Fleet.Tables > 0 {
			fc := cfg.Fleet
			fc.Format = f
			fc.Linearity, fc.Embedded = nil, nil
			if cfg.GoalFleetTables > 0 {
				fc.Tables = cfg.GoalFleetTables
			}
			cfg.logf("goals: fleet of %d tables on format %d", fc.Tables, f)
			fr, err := FleetSim(ctx, fc, cfg.logf)
			if err != nil {
				return res, fmt.Errorf("format %d fleet: %w", f, err)
			}
			g.Fleet = &fr
			g.FleetIdle, g.FleetActive = fr.Costs()
		}
		if f == 3 {
			res.F3 = g
		} else {
			res.F2 = g
		}
	}
	return res, nil
}

// goalFigures measures the request counts of one format on a registry
// table of 100 rows in one data file (one bulk upsert), as
// TestInlineRequestCounts does, and the cleaner over a history.
func goalFigures(ctx context.Context, cfg Config, dir string, format uint64) (GoalFigures, error) {
	g := GoalFigures{Format: format}
	if err := fresh(dir); err != nil {
		return g, err
	}
	disk, err := objstore.NewDisk(dir)
	if err != nil {
		return g, err
	}
	cnt := objstore.NewCounting(disk)
	opts := table.Options{Clock: fakeclock.NoSleep(nil), Format: format}
	tb, err := table.Create(ctx, cnt, "reg", Schema, "name", opts)
	if err != nil {
		return g, err
	}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	upsert := func(h *table.Table, first, n int) error {
		rec := rows("rollout", first, n, at)
		defer rec.Release()
		_, err := h.Upsert(ctx, rec)
		return err
	}
	if err := upsert(tb, 0, 100); err != nil {
		return g, err
	}
	// Warm: the handle has read the fragment's key column once.
	if err := upsert(tb, 5, 1); err != nil {
		return g, err
	}
	cnt.Reset()
	if err := upsert(tb, 7, 1); err != nil {
		return g, err
	}
	g.WarmUpsert = cnt.Counts()
	cnt.Reset()
	if err := upsert(tb, 1000, 1); err != nil {
		return g, err
	}
	g.WarmNew = cnt.Counts()

	prof := objstore.S3Profile()
	cold := func(fn func(st objstore.Store) error) (objstore.Counts, objstore.Path, error) {
		c := objstore.NewCounting(disk)
		tr := objstore.NewPathTracker(objstore.NewLatency(c, prof, nil), prof)
		err := fn(tr)
		return c.Counts(), tr.Path(), err
	}
	// Cold registry create of a new name (after every existing one, as
	// the registry's names are).
	g.ColdCreate, g.CreatePath, err = cold(func(st objstore.Store) error {
		h, err := table.Open(ctx, st, "reg", table.Options{Clock: fakeclock.NoSleep(nil)})
		if err != nil {
			return err
		}
		if _, err := h.Snapshot().Get(ctx, "rollout-002000"); err == nil {
			return fmt.Errorf("rollout-002000 present before its create")
		}
		return upsert(h, 2000, 1)
	})
	if err != nil {
		return g, err
	}
	// Cold get of the row the warm upsert of a new name wrote.
	g.ColdGet, g.GetPath, err = cold(func(st objstore.Store) error {
		h, err := table.Open(ctx, st, "reg", table.Options{Clock: fakeclock.NoSleep(nil)})
		if err != nil {
			return err
		}
		rec, err := h.Snapshot().Get(ctx, "rollout-001000")
		if err != nil {
			return err
		}
		rec.Release()
		return nil
	})
	if err != nil {
		return g, err
	}
	err = goalCleaner(ctx, cfg, filepath.Join(dir, "cleaner"), format, &g)
	return g, err
}

// getLog records the keys of GETs while on.
type getLog struct {
	objstore.Store
	mu   sync.Mutex
	on   bool
	keys []string
}

func (l *getLog) Get(ctx context.Context, key string) ([]byte, error) {
	l.mu.Lock()
	if l.on {
		l.keys = append(l.keys, key)
	}
	l.mu.Unlock()
	return l.Store.Get(ctx, key)
}

func (l *getLog) set(on bool) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.on = on
	k := l.keys
	l.keys = nil
	return k
}

// goalCleaner: an embedded warehouse with one registered table, 200
// one-row upserts of new names one simulated minute apart, then, two hours
// later, one maintenance (compaction, prune plan) and the cleaner's drain,
// whose GETs are logged.
func goalCleaner(ctx context.Context, cfg Config, dir string, format uint64, g *GoalFigures) error {
	if err := fresh(dir); err != nil {
		return err
	}
	clock := newFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var log *getLog
	w, err := embedded.Open(ctx, dir, clock, nil, func(st objstore.Store) objstore.Store {
		log = &getLog{Store: fakeclock.NewStore(st, clock)} // objects stamped with the simulated time
		return log
	})
	if err != nil {
		return err
	}
	root := w.Catalog.TableRoot("reg")
	tb, err := table.Create(ctx, w.Store, root, Schema, "name", table.Options{Clock: fakeclock.NoSleep(clock), Format: format})
	if err != nil {
		return err
	}
	if err := w.Catalog.Register(ctx, "reg", "reg", maintenance.DefaultPolicy()); err != nil {
		return err
	}
	const writes = 200
	for i := range writes {
		clock.Advance(time.Minute)
		rec := rows("rollout", i, 1, clock.Now())
		_, err := tb.Upsert(ctx, rec)
		rec.Release()
		if err != nil {
			return err
		}
	}
	before, err := tb.Versions(ctx)
	if err != nil {
		return err
	}
	records := map[uint64]bool{} // versions with a change record
	if err := objstore.ListAll(ctx, w.Store, root+table.ChangesPrefix, "", func(o objstore.ObjectInfo) error {
		if v, ok := table.ParseChangeKey(strings.TrimPrefix(o.Key, root)); ok {
			records[v] = true
		}
		return nil
	}); err != nil {
		return err
	}
	clock.Advance(2 * time.Hour)
	ref, err := w.Catalog.Resolve(ctx, "reg")
	if err != nil {
		return err
	}
	runner := &maintenance.Runner{Store: w.Store, Catalog: w.Catalog, Locker: w.Locker,
		Queue: maintenance.QueueEnqueuer{Q: w.Queue}, Clock: clock, Owner: "bench"}
	if _, err := runner.MaintainTable(ctx, ref); err != nil {
		return err
	}
	log.set(true)
	_, err = maintenance.DrainLocal(ctx, w.Queue, w.Cleaner(), nil)
	keys := log.set(false)
	if err != nil {
		return err
	}
	after, err := tb.Versions(ctx)
	if err != nil {
		return err
	}
	kept := map[uint64]bool{}
	for _, vi := range after {
		kept[vi.Version] = true
	}
	pruned := map[uint64]bool{}
	for _, vi := range before {
		if v := vi.Version; !kept[v] {
			pruned[v] = true
			g.Pruned++
			if !records[v] {
				g.PrunedNoFile++
			}
		}
	}
	g.CleanerGets = int64(len(keys))
	for _, k := range keys {
		v, ok := table.ParseChangeKey(strings.TrimPrefix(k, root))
		if !ok || !pruned[v] {
			continue
		}
		g.RecordGets++
		if !records[v] {
			g.NoFileGets++
		}
	}
	_ = cfg
	return nil
}

// goal cells: a figure and whether it meets its goal.
func met(ok bool) string {
	if ok {
		return "yes"
	}
	return "**no**"
}

func pathText(p objstore.Path) string {
	kinds := make([]string, len(p.Kinds))
	for i, k := range p.Kinds {
		kinds[i] = string(k)
	}
	return fmt.Sprintf("%d round trips (%s), %s", p.RoundTrips(), strings.Join(kinds, " -> "), dur(p.Latency))
}

// perVersion renders gets per version (two decimals unless whole).
func perVersion(gets int64, versions int) string {
	if versions == 0 {
		return "no such version"
	}
	v := float64(gets) / float64(versions)
	if v == float64(int64(v)) {
		return fmt.Sprintf("%d (%s GETs / %s versions)", int64(v), n(gets), n(int64(versions)))
	}
	return fmt.Sprintf("%.2f (%s GETs / %s versions)", v, n(gets), n(int64(versions)))
}

// MarkdownGoals renders issue 23's goals table, format 3 beside format 2.
func MarkdownGoals(r GoalsResult) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	f3, f2 := r.F3, r.F2
	p("## Format 3 against format 2: issue 23's goals\n\n")
	p("New tables are format 3 (inline small writes in the manifest, docs/format.md 4.7); format 2 is what `table.Options{Format: 2}` creates and what older tables keep. ")
	p("Both formats measured in this run. The request figures are on a registry table of 100 rows in one data file (one bulk upsert) with a few one-row upserts on top (`goalFigures`, as `TestInlineRequestCounts` asserts for format 3); ")
	p("cold paths open a fresh handle, every request waiting the s3 profile's latency in real time (GET 20 ms, PUT 30, LIST 40), round trips from `objstore.PathTracker`. ")
	p("The writer's cost and the latest manifest come from the registry churn with maintenance (%s writes, one a simulated minute, compactor every %d minutes) run on each format; ", n(int64(f3.Churn.Ops)), 15)
	p("the cleaner figure from an embedded warehouse with one table of 200 one-row upserts of new names, maintained once two hours later and drained (`goalCleaner`); ")
	if f3.Fleet != nil {
		p("the maintenance cost from the fleet simulation below (%s tables, one in %d written once a minute, %s simulated) run on each format. ", n(int64(f3.Fleet.Cfg.Tables)), f3.Fleet.Cfg.ActiveEvery, f3.Fleet.Cfg.Duration)
	}
	p("Prices: S3 PUT/LIST $0.005 per 1,000, GET $0.0004 per 1,000 (recorded %s); all services as in the fleet section.\n\n", PricesDate)
	p("| figure | format 2 | format 3 (default) | goal | format 3 meets it |\n| --- | --- | --- | --- | --- |\n")
	warm := objstore.Counts{Put: 1}
	p("| one-row upsert, warm handle (existing name) | %s | %s | PUT 1 | %s |\n", reqText(f2.WarmUpsert), reqText(f3.WarmUpsert), met(f3.WarmUpsert == warm))
	p("| one-row upsert, warm handle (new name) | %s | %s | PUT 1 | %s |\n", reqText(f2.WarmNew), reqText(f3.WarmNew), met(f3.WarmNew == warm))
	create := objstore.Counts{List: 1, Get: 1, Put: 1}
	p("| registry create (open + get + upsert of a new name), cold | %s: %s | %s: %s | LIST 1, GET 1, PUT 1: 3 round trips, <= 90 ms | %s |\n",
		reqText(f2.ColdCreate), pathText(f2.CreatePath), reqText(f3.ColdCreate), pathText(f3.CreatePath),
		met(f3.ColdCreate == create && f3.CreatePath.RoundTrips() == 3 && f3.CreatePath.Latency <= 90*time.Millisecond))
	get := objstore.Counts{List: 1, Get: 1}
	p("| get by key of a row written since the last compaction, cold | %s: %s | %s: %s | LIST 1, GET 1 | %s |\n",
		reqText(f2.ColdGet), pathText(f2.GetPath), reqText(f3.ColdGet), pathText(f3.GetPath), met(f3.ColdGet == get))
	w2, w3 := requestCost(f2.WriterMonth), requestCost(f3.WriterMonth)
	p("| writer's requests, 1 write a minute, per table-month | %s: %s | %s: %s | <= $0.25 | %s |\n", money3(w2), reqText(f2.WriterMonth), money3(w3), reqText(f3.WriterMonth), met(w3 <= 0.25))
	if f3.Fleet != nil && f2.Fleet != nil {
		p("| active table's maintenance, all services, 1 write a minute, per table-month | %s (S3 %s, Lambda %s, SQS %s, DynamoDB %s) | %s (S3 %s, Lambda %s, SQS %s, DynamoDB %s) | <= $0.05 | %s |\n",
			money3(f2.FleetActive.Total()), money3(f2.FleetActive.S3), money3(f2.FleetActive.Lambda), money3(f2.FleetActive.SQS), money3(f2.FleetActive.Dynamo),
			money3(f3.FleetActive.Total()), money3(f3.FleetActive.S3), money3(f3.FleetActive.Lambda), money3(f3.FleetActive.SQS), money3(f3.FleetActive.Dynamo),
			met(f3.FleetActive.Total() <= 0.05))
	}
	p("| cleaner GETs per pruned version that added no file | every version added a file; change-record GETs per pruned version: %s | %s | 0 | %s |\n",
		perVersion(f2.RecordGets, f2.Pruned), perVersion(f3.NoFileGets, f3.PrunedNoFile), met(f3.PrunedNoFile > 0 && f3.NoFileGets == 0))
	p("| latest manifest, registry churn with maintenance (largest sample; at the end) | %s; %s | %s; %s | <= 4 KB, inline rows included | %s |\n\n",
		kb(f2.LatestMax), kb(f2.LatestAtEnd), kb(f3.LatestMax), kb(f3.LatestAtEnd), met(f3.LatestMax <= 4096))
	p("Cleaner, both formats: %s versions pruned on format 2 (all with a change record; the drain made %s GETs in all), %s on format 3 (%s of them inline-only, with no change record; %s GETs of records of pruned versions, %s in all). ",
		n(int64(f2.Pruned)), n(f2.CleanerGets), n(int64(f3.Pruned)), n(int64(f3.PrunedNoFile)), n(f3.RecordGets), n(f3.CleanerGets))
	p("The cold create's upsert of a name inside a fragment's key bounds reads that fragment's key column once more (GET 1); registry names grow, so a new name is after every fragment's bounds.\n\n")
	if f3.Fleet != nil {
		act := func(r *FleetResult) string {
			return strings.ReplaceAll(perRow(perTable(r.Active.Requests, float64(max(r.Active.Tables, 1)*max(r.Passes, 1)))), "|", "/")
		}
		p("Fleet, requests per active table and pass (GET / HEAD / PUT / LIST / DELETE): format 2 %s; format 3 %s. Largest latest manifest of an active table after a pass: format 2 %s, format 3 %s.\n\n",
			act(f2.Fleet), act(f3.Fleet), kb(f2.Fleet.MaxManifest), kb(f3.Fleet.MaxManifest))
		if f3.FleetActive.Total() > 0.05 {
			fr := f3.Fleet
			d := float64(max(fr.Active.Tables, 1) * max(fr.Passes, 1))
			lists, puts := float64(fr.Active.Requests.List)/d, float64(fr.Active.Requests.Put)/d
			p("**Why the active table's maintenance misses $0.05 on format 3.** Format 3 removed its per-write reads (GETs per pass %.2f, were %.2f: no data file per write to compact, no change record per version to clean), so what is left is LIST and PUT, priced 12.5 times a GET: %.2f LIST a pass is %s a month and %.2f PUT a pass %s, before Lambda (%s). ",
				float64(fr.Active.Requests.Get)/d, float64(f2.Fleet.Active.Requests.Get)/float64(max(f2.Fleet.Active.Tables, 1)*max(f2.Fleet.Passes, 1)),
				lists, money3(lists*PassesPerMonth*PricePutPer1000/1000), puts, money3(puts*PassesPerMonth*PricePutPer1000/1000), money3(f3.FleetActive.Lambda))
			maint := float64(fr.Active.Messages) / d // one cleanup message per maintenance
			p("A maintenance now flushes and compacts in one commit (3 PUT and 1 GET fewer when it flushes), its cleaner reads the floor and the tags in one LIST of `_refs/`, and a range's few change records are checked by HEAD instead of a listing (docs/reliability.md, \"Fewer requests per maintenance\"). ")
			p("What is left (TestActiveTableRequestsPerMaintenanceFormat3 pins it): every pass, the scan's LIST (%s a month alone); at each maintenance (%.2f a pass here, %s a month), the pass's LIST 5 (floor, versions, leases, prune state, tags), GET 3 (manifest, prune state, cleanup state), PUT 2 (floor marker, prune state), on every other one the flush-and-compaction's PUT 3 (output, manifest, change record), GET 1 and HEAD 1, and the cleaner's LIST 2 (`_refs/`, the guard's `_versions/`), HEAD 1, GET 1-3, PUT 1 (cleanup state): LIST 7 and PUT 4.5 a maintenance, %s. ",
				money3(PassesPerMonth*PricePutPer1000/1000), maint, n(int64(maint*PassesPerMonth)), money3(maint*PassesPerMonth*11.5*PricePutPer1000/1000))
			p("Each is there for a rule: the floor LIST and the marker PUT raise the floor without ever lowering it (docs/format.md 2.4); the versions LIST gives each version's grace start (its successor's store time); the leases LIST holds the floor for readers; the prune state's LIST finds the highest fencing token's object (its name cannot be known: a stale holder writes a lower token late, and a restarted token sequence starts lower), its GET and PUT track the ranges sent so a lost message is sent again; the tags LIST comes after the marker PUT, the planner's half of the tag handshake (so it cannot join the floor LIST); the change record is what the cleaner deletes from; the cleaner's `_refs/` LIST checks its range is below the floor and keeps tagged versions, its HEAD of the floor's manifest is the stale-marker rule (a table created again at the same root), its guard LIST and GET the latest-version rule (issue 19). Only the cleanup state's PUT (the last-cleanup time of `_stats` and `status`) serves no safety rule. ")
			saved, scan := maint*PassesPerMonth*6*PricePutPer1000/1000, PassesPerMonth*PricePutPer1000/1000
			p("What would reach $0.05: maintaining less often cannot (each maintenance raises the floor only to the first version still inside the 1-hour grace, so a table written once a minute holds the last hour's versions plus those written since the previous maintenance: at this cadence, every %s, up to %d versions after a pass, which leaves the 100-version bound no room to maintain much less often); nor do notifications save the per-pass scan LIST (%s) on an active table: S3 sends one SQS message per write (43,200 a month, %s at SQS's price before the receives), more than the LISTs they would save, so they pay only on idle tables (issue 23 point 4); per maintenance, one LIST from `_leases/` to `_versions/` for the plan's leases, prune state, floor and versions (LIST 3; docs/reliability.md says what is still to be shown), the floor folded into the prune-state object (one object per token carrying the floor: PUT 1, a format change to 2.4 and 2.5, the tags still read after its PUT), the cleanup state's PUT dropped or written hourly (PUT 1), and delayed deletes (one cleaner message per two maintenances, their ranges merged: the cleaner's `_refs/` LIST and guard LIST once per two, LIST 1) together take about LIST 4 and PUT 2 of the 11.5 LIST and PUT a maintenance, %s. All of them: about %s a table-month against the goal's $0.05%s.\n\n",
				cadence(maint), fr.MaxVersions, money3(scan), money3(43200*PriceSQSPerMillion/1e6), money3(saved), money3(max(f3.FleetActive.Total()-saved, 0)), verdict(f3.FleetActive.Total()-saved))
		}
	}
	return b.String()
}

// cadence is how often a table maintained on a fraction maint of its
// passes (one every 15 minutes) is maintained, as text ("45m0s").
func cadence(maint float64) string {
	if maint <= 0 {
		return "never"
	}
	return (time.Duration(float64(15*time.Minute) / maint)).Round(time.Minute).String()
}

// verdict says whether an estimated table-month cost meets the active
// table's $0.05 goal.
func verdict(est float64) string {
	if est <= 0.05 {
		return ", which would meet it (the fused listing and the floor in the prune state are most of it)"
	}
	return ", which would still miss it: the rest is the scan's LIST and the cadence the 100-version bound sets, so reaching $0.05 also needs a looser bound: maintaining every second hour holds up to about 180 versions (still one LIST page) and, with these changes, halves what is left of the maintenance's requests and Lambda time"
}
