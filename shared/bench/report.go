package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tablekeep/tablekeep/shared/objstore"
)

// The seed's production figures (PRs #272 and #274).
const (
	seedVersions      = 34504
	seedManifestBytes = 840_000
	seedManifestsGB   = 29
	seedCreateSeconds = 47
	seedLookupSeconds = 0.7
	seedCleanupMin    = 36
	seedDeletesPerSec = 30
	seedRows          = 10000
)

// latencyMethod is the method section's paragraph on latency injection.
const latencyMethod = "Object-store latency is injected by a store wrapper, `objstore.NewLatency(store, profile, clock)`: every request first waits its kind's latency, then goes to the disk store; concurrent requests wait concurrently, as on the network. " +
	"Profiles (`objstore.ParseProfile`): `none`; `s3`, S3 Standard from the same region: GET 20 ms, HEAD 20, PUT 30, LIST 40, DeleteObjects 120 per request; `s3-express`, S3 Express One Zone: GET 4 ms, HEAD 4, PUT 6, LIST 8, DeleteObjects 10; " +
	"custom per kind, `get=20ms,put=30ms,list=40ms,delete=120ms` (HEAD defaults to GET), or one duration for every kind. " +
	"`tkbench -latency PROFILE` runs every measured request under a profile (fixtures are built without it), and `tkdemo --latency PROFILE` (`make demo DEMO_ARGS=\"--latency s3\"`) runs the demo's churn and maintenance under it. " +
	"Round trips are counted by `objstore.PathTracker`: a request depends on every request that completed before it started, so the longest such chain is the critical path. " +
	"Tests use the same wrapper on a fake clock (`shared/internal/fakeclock`) or real timers inside a `testing/synctest` bubble, never real waits; the fault proxy (`faultproxy.Options.Latency`) adds a profile over real HTTP, for the Lambda functions under aws-lambda-rie."

// Write writes benchmarks.md and the plot into r.Cfg.DocsDir.
func Write(r *Results) error {
	if err := os.MkdirAll(r.Cfg.DocsDir, 0o755); err != nil {
		return err
	}
	if err := writePlot(filepath.Join(r.Cfg.DocsDir, PlotName), r.Without.Series, r.With.Series); err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	path := filepath.Join(r.Cfg.DocsDir, "benchmarks.md")
	md := Markdown(r)
	if old, err := os.ReadFile(path); err == nil {
		md = keepSection(keepLanceThroughput(md, string(old)), string(old), HandBegin, HandEnd)
	}
	return os.WriteFile(path, []byte(md), 0o644)
}

// The LanceDB throughput section is written by `make bench-lance-throughput`
// (shared/lance, against the local stack) between these markers; a
// tkbench run keeps what the previous file had there.
const (
	LanceThroughputBegin = "<!-- lance-throughput-bench: begin -->"
	LanceThroughputEnd   = "<!-- lance-throughput-bench: end -->"
)

// The hand-measured sections (a command's time on a large table, timed by
// hand) sit between these markers at the end; a tkbench run keeps them.
const (
	HandBegin = "<!-- hand-measured: begin -->"
	HandEnd   = "<!-- hand-measured: end -->"
)

func keepLanceThroughput(md, old string) string {
	return keepSection(md, old, LanceThroughputBegin, LanceThroughputEnd)
}

// keepSection puts into md, between begin and end, what old had there.
func keepSection(md, old, begin, end string) string {
	_, rest, ok := strings.Cut(old, begin)
	body, _, ok2 := strings.Cut(rest, end)
	if !ok || !ok2 {
		return md
	}
	before, rest, ok := strings.Cut(md, begin)
	_, after, ok2 := strings.Cut(rest, end)
	if !ok || !ok2 {
		return md
	}
	return before + begin + body + end + after
}

func n(v int64) string { return commas(v) }

func commas(v int64) string {
	s := fmt.Sprint(v)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// per renders a per-operation count: integers plainly, else two decimals.
func per(r Reqs, kind string) string {
	v := r.Per(kind)
	if v == float64(int64(v)) {
		return commas(int64(v))
	}
	return fmt.Sprintf("%.2f", v)
}

func reqCells(r Reqs) string {
	return fmt.Sprintf("%s | %s | %s | %s", per(r, "LIST"), per(r, "GET"), per(r, "PUT"), per(r, "DELETE"))
}

func reqText(c objstore.Counts) string {
	parts := []string{}
	for _, p := range []struct {
		k string
		v int64
	}{{"LIST", c.List}, {"GET", c.Get}, {"HEAD", c.Head}, {"PUT", c.Put}, {"DELETE", c.DeleteRequests}} {
		if p.v > 0 {
			parts = append(parts, fmt.Sprintf("%s %s", p.k, n(p.v)))
		}
	}
	if c.DeleteKeys > 0 {
		parts = append(parts, fmt.Sprintf("(%s keys)", n(c.DeleteKeys)))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func dur(d time.Duration) string {
	switch {
	case d >= time.Minute:
		return d.Round(time.Second).String()
	case d >= time.Second:
		return fmt.Sprintf("%.2f s", d.Seconds())
	case d >= time.Millisecond:
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond))
	}
}

func kb(b int64) string {
	switch {
	case b >= 1e9:
		return fmt.Sprintf("%.2f GB", float64(b)/1e9)
	case b >= 1e6:
		return fmt.Sprintf("%.1f MB", float64(b)/1e6)
	case b >= 1e3:
		return fmt.Sprintf("%.1f KB", float64(b)/1e3)
	}
	return fmt.Sprintf("%d B", b)
}

func money(d float64) string {
	if d < 0.0001 {
		return "< $0.0001"
	}
	if d < 0.01 {
		return fmt.Sprintf("$%.4f", d)
	}
	return fmt.Sprintf("$%.2f", d)
}

// Markdown renders the report.
func Markdown(r *Results) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	cfg := r.Cfg
	p("# Benchmarks\n\n")
	p("Generated by `make bench` (`go run ./cmd/tkbench`, logic in `shared/bench`) in one run on %s, %s; the run took %s.", r.Date.Format("2006-01-02"), r.Machine, dur(r.Elapsed))
	if cfg.Quick {
		p(" **Quick mode: tiny sizes, figures not meaningful.**")
	}
	p(" Do not edit by hand: rerun `make bench`. Earlier figures from the `go test` benchmarks, run by hand: [benchmarks-maintenance.md](benchmarks-maintenance.md).\n\n")
	p("The primary figures are object-store requests by kind, counted by `objstore.Counting`; they are exact and repeatable. ")
	p("Times are secondary: local disk, not S3 (on S3 each request costs roughly 10-100 ms whatever its kind, so multiply the request counts), ")
	p("on a machine other builds may be loading. Registry-shaped table throughout: `name` utf8 key, `uri` utf8, `created_at` timestamp[us, UTC]. ")
	p("Sizes: churn %s writes; histories %s versions; flags of `cmd/tkbench` scale them.", n(int64(cfg.ChurnOps)), joinInts(cfg.Scales))
	if !cfg.Latency.IsZero() {
		p(" **Latency**: every measured request first waits its kind's latency in profile %s (`objstore.Latency`, `tkbench -latency`); building the fixtures does not.", cfg.Latency)
	}
	p("\n\n")
	p("%s\n\n", latencyMethod)

	if r.Goals != nil {
		p("%s", MarkdownGoals(*r.Goals))
	}
	p("## Throughput against LanceDB at S3 latency\n\n%s\n(Written by `make bench-lance-throughput`, which `make bench` runs after tkbench.)\n%s\n\n", LanceThroughputBegin, LanceThroughputEnd)

	// Headline.
	last := r.Scales[len(r.Scales)-1]
	p("## Next to the seed's production figures\n\n")
	p("| | seed (Lance, production, #272/#274) | tablekeep, this run |\n| --- | --- | --- |\n")
	p("| versions stored | %s (registry), ~68k (_stats) | %s after %s churn writes without maintenance; %s with maintenance |\n",
		n(seedVersions), n(int64(r.Without.Final.Versions)), n(int64(cfg.ChurnOps)), n(int64(r.With.Final.Versions)))
	p("| latest manifest | ~840 KB (10k one-row fragments) | %s without maintenance (%s fragments); %s with |\n",
		kb(r.Without.Final.LatestManifestBytes), n(int64(r.Without.Final.Fragments)), kb(r.With.Final.LatestManifestBytes))
	p("| all manifests | ~29 GB | %s without; %s with |\n", kb(r.Without.Final.ManifestBytes), kb(r.With.Final.ManifestBytes))
	p("| create (`POST /rollouts`: contains + upsert) | 47 s average | %s at %s versions: %s |\n", dur(last.CreateTime), n(int64(last.Versions)), reqText(perReq(last.Create)))
	p("| lookup (`GET /rollouts/{name}`) | 0.7 s average | %s at %s versions: %s; %s after maintenance |\n", dur(last.LookupTime), n(int64(last.Versions)), reqText(perReq(last.Lookup)), dur(last.LookupTAfter))
	cl := r.Cleanup
	p("| cleanup of the backlog | 36 min at ~30 deletes/s, under the stats-writer lock | %s versions: %s keys in %s (%s keys/s, %.0f keys per DELETE request), no lock held |\n\n",
		n(int64(cl.Versions)), n(cl.Drain.C.DeleteKeys), dur(cl.DrainTime), n(int64(float64(cl.Drain.C.DeleteKeys)/max(cl.DrainTime.Seconds(), 1e-9))),
		float64(cl.Drain.C.DeleteKeys)/float64(max(cl.Drain.C.DeleteRequests, 1)))

	// Churn.
	p("## Registry churn with and without maintenance\n\n")
	p("One writer replays the seed's registry workload: 55%% creates (upsert of a new name), 35%% deletes of a live name, 10%% retried creates (upsert of a live name), ")
	p("one commit each, **one simulated minute apart** (the seed's write rate). With maintenance, the compactor runs every %d minutes (lock, compact, plan prune, enqueue; the cleaner then drains the queue with no lock held) and the sweep every %d minutes, as on AWS; ", cfg.CompactEvery, cfg.SweepEvery)
	p("policy: keep-last 10, grace 1 h. Objects are stamped with the simulated time, so the grace window runs on it.\n\n")
	p("![versions and latest manifest bytes during churn, with and without maintenance](%s)\n\n", PlotName)
	p("| | without maintenance | with maintenance |\n| --- | --- | --- |\n")
	p("| writes (creates / deletes / retried creates) | %s (%s / %s / %s) | %s (%s / %s / %s) |\n", n(int64(r.Without.Ops)), n(int64(r.Without.Creates)), n(int64(r.Without.Deletes)), n(int64(r.Without.Retries)),
		n(int64(r.With.Ops)), n(int64(r.With.Creates)), n(int64(r.With.Deletes)), n(int64(r.With.Retries)))
	p("| rows at the end | %s | %s |\n", n(int64(r.Without.Final.Rows)), n(int64(r.With.Final.Rows)))
	p("| versions stored | %s | %s |\n", n(int64(r.Without.Final.Versions)), n(int64(r.With.Final.Versions)))
	p("| fragments (latest) | %s | %s |\n", n(int64(r.Without.Final.Fragments)), n(int64(r.With.Final.Fragments)))
	p("| latest manifest | %s | %s |\n", kb(r.Without.Final.LatestManifestBytes), kb(r.With.Final.LatestManifestBytes))
	p("| all manifests | %s | %s |\n", kb(r.Without.Final.ManifestBytes), kb(r.With.Final.ManifestBytes))
	p("| objects under the table | %s (%s) | %s (%s) |\n", n(int64(r.Without.Objects)), kb(r.Without.ObjectBytes), n(int64(r.With.Objects)), kb(r.With.ObjectBytes))
	p("| requests per write (LIST / GET / PUT / DELETE) | %s | %s |\n", strings.ReplaceAll(reqCells(r.Without.Writes), "|", "/"), strings.ReplaceAll(reqCells(r.With.Writes), "|", "/"))
	p("| maintenance requests | | %s over %s compactor passes and %d sweeps (per write: %s LIST, %s GET, %s PUT) |\n",
		reqText(r.With.Maint.C), n(int64(r.With.Maint.N)), r.With.Sweeps,
		per(Reqs{C: r.With.Maint.C, N: r.With.Ops}, "LIST"), per(Reqs{C: r.With.Maint.C, N: r.With.Ops}, "GET"), per(Reqs{C: r.With.Maint.C, N: r.With.Ops}, "PUT"))
	p("| mean write time, last tenth | %s | %s |\n", dur(r.Without.WriteTimeLast), dur(r.With.WriteTimeLast))
	p("| run time | %s | %s (maintenance included) |\n\n", dur(r.Without.Elapsed), dur(r.With.Elapsed))

	// Seed replay.
	rp := r.Replay
	p("## Seed replay: the unmaintained table, then one maintenance pass\n\n")
	p("The table left by the churn without maintenance gets one pass two hours after its last write (like the seed's first pass over 34k versions): compaction and prune planning under the table lock, the cleaner draining every range with no lock, then the orphan sweep. Rows are checked unchanged.\n\n")
	p("| phase | LIST | GET | PUT | DELETE (keys) | time |\n| --- | --- | --- | --- | --- | --- |\n")
	for _, ph := range []struct {
		name string
		c    objstore.Counts
		d    time.Duration
	}{{"compact + prune plan (lock held)", rp.Compact.C, rp.CompactTime}, {"cleaner drain (no lock)", rp.Drain.C, rp.DrainTime}, {"sweep", rp.Sweep.C, rp.SweepTime}} {
		p("| %s | %s | %s | %s | %s (%s) | %s |\n", ph.name, n(ph.c.List), n(ph.c.Get+ph.c.Head), n(ph.c.Put), n(ph.c.DeleteRequests), n(ph.c.DeleteKeys), dur(ph.d))
	}
	p("\n| | before | after |\n| --- | --- | --- |\n")
	p("| versions stored | %s | %s |\n", n(int64(rp.Before.Versions)), n(int64(rp.After.Versions)))
	p("| fragments | %s | %s |\n", n(int64(rp.Before.Fragments)), n(int64(rp.After.Fragments)))
	p("| latest manifest | %s | %s |\n", kb(rp.Before.LatestManifestBytes), kb(rp.After.LatestManifestBytes))
	p("| all manifests | %s | %s |\n", kb(rp.Before.ManifestBytes), kb(rp.After.ManifestBytes))
	p("| objects under the table | %s | %s |\n", n(int64(rp.ObjectsBefore)), n(int64(rp.ObjectsAfter)))
	p("| get by key (fresh handle: open + get), requests | %s | %s |\n", reqText(perReq(rp.GetBefore)), reqText(perReq(rp.GetAfter)))
	p("| get by key, time | %s | %s |\n\n", dur(rp.GetTimeBefore), dur(rp.GetTimeAfter))

	// Table format at scale.
	p("## Open and commit at scale\n\n")
	p("A history of *n* versions is Create plus *n*-1 one-row upserts over %s names (so at most %s one-row fragments). Each figure is the mean of %d runs; requests are per operation.\n\n", n(int64(cfg.KeySpace)), n(int64(cfg.KeySpace)), cfg.Repeat)
	p("| operation | versions | LIST | GET | PUT | DELETE | time | notes |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, s := range r.Scales {
		v := n(int64(s.Versions))
		p("| open latest | %s | %s | %s | manifest %s, %s fragments; history built in %s |\n", v, reqCells(s.Open), dur(s.OpenTime), kb(s.ManifestBytes), n(int64(s.Fragments)), dur(s.Build))
		p("| upsert commit (existing name, warm handle) | %s | %s | %s | |\n", v, reqCells(s.Upsert), dur(s.UpsertTime))
		p("| append commit (warm handle) | %s | %s | %s | |\n", v, reqCells(s.Append), dur(s.AppendTime))
		p("| registry create: open + get (absent) + upsert | %s | %s | %s | the seed's `POST /rollouts` |\n", v, reqCells(s.Create), dur(s.CreateTime))
		p("| get by key: open + get | %s | %s | %s | the seed's `GET /rollouts/{name}` |\n", v, reqCells(s.Lookup), dur(s.LookupTime))
		if s.Maintained {
			p("| open latest, after compaction + cleanup | %s -> %s stored | %s | %s | manifest %s |\n", v, n(int64(s.VersionsAfter)), reqCells(s.OpenAfter), dur(s.OpenTimeAfter), kb(s.ManifestBytesAfter))
			p("| get by key, after compaction + cleanup | %s -> %s stored | %s | %s | |\n", v, n(int64(s.VersionsAfter)), reqCells(s.LookupAfter), dur(s.LookupTAfter))
		}
	}
	p("\nRequest counts do not grow with the number of versions (one LIST with max-keys 1 finds the latest manifest); what grows is the manifest each request reads and writes, with the number of fragments. ")
	p("The local-disk store's `List` reads and sorts the whole `_versions/` directory even for max-keys 1 (`shared/objstore/disk.go`), so on disk the open time grows with the number of versions although the request count does not; an S3 LIST with `max-keys=1` returns one key whatever the prefix holds.\n\n")

	g := r.Growth
	p("Upsert growth (a format-2 table: one data file per upsert, as the seed): %s upserts of new names into a fresh table, never compacted: %s per upsert; mean time %s in the first tenth, %s in the last; final manifest %s for %s fragments = **%.2f bytes per fragment** (the seed: ~84 B). ",
		n(int64(g.Upserts)), reqText(perReq(g.Reqs)), dur(g.FirstTenth), dur(g.LastTenth), kb(g.FinalManifestBytes), n(int64(g.FragmentsAtMeasured)), g.BytesPerFragment)
	p("The per-upsert cost is linear in the fragment count (the manifest is rewritten and the change record diffed on every commit); compaction keeps it small.\n\n")

	if og := r.OpenGet; og.Reqs.N > 0 {
		p("## Open + get by key at %s versions under the %s profile\n\n", n(int64(og.Versions)), og.Profile.Name)
		p("A reader's cold path (the seed's `GET /rollouts/{name}`) on the %s-version history above, before maintenance: each of %d runs opens a fresh handle and gets one name, ", n(int64(og.Versions)), og.Reqs.N)
		p("every request waiting its latency in real time (`objstore.Latency`, profile %s). ", og.Profile)
		p("Round trips are the critical path measured by `objstore.PathTracker` (a request depends on every request completed before it started; concurrent requests overlap). The goal (issue 10) is at most 1 LIST + 2 GET round trips, ~80 ms.\n\n")
		p("| versions | LIST | GET | HEAD | PUT | round trips (critical path) | path latency | measured time |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n")
		kinds := make([]string, len(og.Path.Kinds))
		for i, k := range og.Path.Kinds {
			kinds[i] = string(k)
		}
		p("| %s | %s | %s | %s | %s | %d: %s | %s | %s |\n\n", n(int64(og.Versions)), per(og.Reqs, "LIST"), per(og.Reqs, "GET"), per(og.Reqs, "HEAD"), per(og.Reqs, "PUT"),
			og.Path.RoundTrips(), strings.Join(kinds, " -> "), dur(og.Ideal), dur(og.Time))
	}

	p("%s", MarkdownLatency(r.Latency))

	if len(r.Heap) > 0 {
		p("## Compaction peak heap\n\n")
		p("One compaction with the default policy and the compactor's default read limits (32 fragments and 48 MiB of stored fragment bytes in flight, groups capped at 32 MiB of input, one group read ahead), at zero latency; heap in use (`runtime.MemStats.HeapInuse`) sampled every 2 ms, so slightly under the true peak. The Lambda functions have 1,024 MB and `GOMEMLIMIT=800MiB` (template.yaml).\n\n")
		p("| input | groups committed | output fragments | requests | time | peak heap in use (base) |\n| --- | --- | --- | --- | --- | --- |\n")
		for _, h := range r.Heap {
			p("| %s (%s fragments of %s) | %d | %d | %s | %s | %.0f MB (%.0f MB) |\n", h.Case.Label, n(int64(h.Case.Fragments)), kb(int64(h.FragmentBytes)),
				h.Res.Committed, h.Res.OutputFrags, reqText(h.Reqs.C), dur(h.Time), float64(h.PeakHeap)/(1<<20), float64(h.BaseHeap)/(1<<20))
		}
		p("\n")
	}

	// Compaction and cleanup throughput.
	p("## Compaction and cleanup throughput\n\n")
	p("| compaction | groups | fragments in -> out | rows | bytes read -> written | requests | time | rows/s |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, c := range r.Compaction {
		p("| %s | %d | %s -> %s | %s | %s -> %s | %s | %s | %s |\n", c.Label, c.Res.Committed, n(int64(c.Res.InputFrags)), n(int64(c.Res.OutputFrags)), n(int64(c.Res.RowsWritten)),
			kb(int64(c.Res.BytesRead)), kb(int64(c.Res.BytesWritten)), reqText(c.Reqs.C), dur(c.Time), n(int64(float64(c.Res.RowsWritten)/max(c.Time.Seconds(), 1e-9))))
	}
	p("\nCleanup of the %s-version history after compaction (1,000 versions per message, 1,000 keys per DELETE):\n\n", n(int64(last.Versions)))
	p("| step | requests | time |\n| --- | --- | --- |\n")
	p("| plan + apply prune (%s prunable versions) | %s | %s |\n", n(int64(cl.Versions)), reqText(cl.Plan.C), dur(cl.PlanTime))
	p("| cleaner drain (%d messages) | %s | %s |\n\n", cl.Messages, reqText(cl.Drain.C), dur(cl.DrainTime))
	p("The drain's GETs are one change record per version (serial); on S3 they, not the %s DELETE requests, bound its time. The seed deleted ~30 keys/s one by one while holding a lock every other master waited on.\n\n", n(cl.Drain.C.DeleteRequests))

	// Cost.
	wo, wi := costs(r, seedRows)
	p("## Monthly cost per table (S3 list prices)\n\n")
	p("Prices (S3 Standard, us-east-1, as recorded on %s; check the current price list): PUT, COPY, POST and LIST $0.005 per 1,000 requests; GET and HEAD $0.0004 per 1,000; storage $0.023 per GB-month; DELETE requests free. ", PricesDate)
	p("Write rate: the seed's, one write a minute = %s writes a month. Requests: the churn's measured requests per write (and maintenance's, per write) times that. ", n(WritesPerMonth))
	p("Storage without maintenance: the seed's %s one-row fragments, so each write leaves a manifest of %s (measured %.2f B per fragment) plus the churn's other bytes per version, and nothing is ever deleted; with maintenance: the maintained churn's bytes at its end, which stay bounded. Data transfer within a region is free.\n\n", n(seedRows), kb(int64(wo.ManifestBytesUsed)), r.Growth.BytesPerFragment)
	p("| per table per month | without maintenance | with maintenance |\n| --- | --- | --- |\n")
	p("| write requests | %s | %s |\n", reqText(wo.WriteRequests), reqText(wi.WriteRequests))
	p("| maintenance requests | none | %s |\n", reqText(wi.MaintRequests))
	p("| request cost | %s | %s |\n", money(wo.RequestDollars), money(wi.RequestDollars))
	p("| storage, month 1 (mean) | %.2f GB: %s | %.4f GB: %s |\n", wo.StorageGBMonth1, money(wo.StorageDollars1), wi.StorageGBMonth1, money(wi.StorageDollars1))
	p("| storage, month 12 (mean) | %.1f GB: %s | %.4f GB: %s |\n", wo.StorageGBMonth12, money(wo.StorageDollars12), wi.StorageGBMonth12, money(wi.StorageDollars12))
	p("| total, month 1 | %s | %s |\n", money(wo.RequestDollars+wo.StorageDollars1), money(wi.RequestDollars+wi.StorageDollars1))
	p("| total, month 12 | %s | %s |\n\n", money(wo.RequestDollars+wo.StorageDollars12), money(wi.RequestDollars+wi.StorageDollars12))
	p("At one write a minute the dollar cost of one table is small either way; maintenance adds requests (mostly the compactor's per-pass reads and the catalog's stats refresh) and saves storage that otherwise grows without bound (the seed's registry held ~29 GB of manifests). ")
	p("The seed's real cost was latency and a frozen control plane, not the bill: every open read, and every commit rewrote, the whole manifest.\n")
	if r.Fleet != nil {
		p("\n%s", MarkdownFleet(*r.Fleet))
	}
	p("\n%s\n%s\n", HandBegin, HandEnd)
	return b.String()
}

func perReq(r Reqs) objstore.Counts {
	d := int64(max(r.N, 1))
	return objstore.Counts{Get: r.C.Get / d, Head: r.C.Head / d, Put: r.C.Put / d, List: r.C.List / d,
		DeleteRequests: r.C.DeleteRequests / d, DeleteKeys: r.C.DeleteKeys / d}
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = commas(int64(x))
	}
	return strings.Join(s, " / ")
}
