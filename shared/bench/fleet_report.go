package bench

import (
	"fmt"
	"github.com/tablekeep/tablekeep/shared/awsfn"

	"github.com/tablekeep/tablekeep/shared/fleet"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"strings"
	"time"
)

// FanoutConcurrency is the template's CompactionMaxConcurrency default:
// the compaction queue's consumers at once.
const FanoutConcurrency = 10

func f1(v float64) string {
	if v == float64(int64(v)) {
		return fmt.Sprintf("%d", int64(v))
	}
	return fmt.Sprintf("%.2f", v)
}

func perRow(p [5]float64) string {
	return fmt.Sprintf("%s | %s | %s | %s | %s", f1(p[0]), f1(p[1]), f1(p[2]), f1(p[3]), f1(p[4]))
}

// MarkdownFleet is the "Fleet" section of docs/benchmarks.md.
func MarkdownFleet(r FleetResult) string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	c := r.Cfg
	passes := float64(max(r.Passes, 1))
	p("## Fleet: %s tables, one pass every %s\n\n", n(int64(c.Tables)), c.Period)
	p("`tkbench -only fleet` (`shared/bench/fleet.go`). %s tables registered in one warehouse on an in-memory store dated by a fake clock, each created with one row; one table in %d (%d tables) is written once a minute (a one-row append), the rest are idle. ", n(int64(c.Tables)), c.ActiveEvery, r.Active.Tables)
	p("A scheduled pass (`fleet.Scheduler.Run`: scan with 1 LIST per table against the fleet index, maintenance of the tables in need, one `_stats` commit, one write per fleet index shard touched) runs every %s for %s of simulated time after %d settling passes (the first maintains every table: no marks yet), and the cleanup queue is drained after each. ", c.Period, c.Duration, c.Settle)
	p("Requests are counted by the table their key belongs to; the fleet's shared objects (fleet index, `_registry`, `_stats`) separately. ")
	p("Times are modelled at the `%s` latency profile (GET %s, PUT %s, LIST %s, DeleteObjects %s): the scan's LISTs %d at a time, everything else serially (an upper bound).\n\n",
		c.Profile.Name, c.Profile.Get, c.Profile.Put, c.Profile.List, c.Profile.Delete, fleet.DefaultScanConcurrency)
	p("| per table per pass | GET | HEAD | PUT | LIST | DELETE | lock calls (DynamoDB) | cleanup messages |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n")
	row := func(name string, cl FleetClass) {
		d := float64(max(cl.Tables, 1)) * passes
		p("| %s (%s tables) | %s | %s | %s |\n", name, n(int64(cl.Tables)), perRow(perTable(cl.Requests, d)), f1(float64(cl.LockW+cl.LockR)/d), f1(float64(cl.Messages)/d))
	}
	row("idle", r.Idle)
	row("active, 1 write/min", r.Active)
	p("| fleet shared, per pass | %s | %s | %s |\n\n", perRow(perTable(r.Shared.Requests, passes)), f1(float64(r.Shared.LockW+r.Shared.LockR)/passes), "0")
	p("Per pass: %.1f tables maintained on average; modelled wall time %s mean, %s max (of which the scan %s); cleaner %s. ",
		r.MeanMaintained, dur(r.MeanWall), dur(r.MaxWall), dur(r.ScanWall), dur(r.CleanWall))
	inv := "one scheduled invocation finishes the pass"
	if r.MaxWall > time.Minute {
		// The fan-out (shared/awsfn, docs/aws.md "Fan-out and
		// notifications"): the scheduled invocation scans and sends the
		// tables in need as jobs (SendMessageBatch of 10, 8 in flight, at
		// the profile's PUT latency); FanoutConcurrency consumers work
		// through them.
		jobs := int(r.MeanMaintained + 0.5)
		sched := r.ScanWall + time.Duration((jobs+79)/80)*c.Profile.Put
		perTable := (r.MeanWall - r.ScanWall) / time.Duration(max(jobs, 1))
		worst := (r.MaxWall - r.ScanWall)
		fan := time.Duration((jobs+FanoutConcurrency-1)/FanoutConcurrency) * perTable
		inv = fmt.Sprintf("in one invocation the pass would exceed a minute, so the fan-out hands the ~%d tables in need to the compaction queue: the scheduled invocation is the scan plus the sends, ~%s; "+
			"%d consumers (the template's CompactionMaxConcurrency default) maintain them in ~%s at the mean %s per table (the worst pass's maintenance, %s in one invocation, spread the same way), well within the %s period",
			jobs, dur(sched), FanoutConcurrency, dur(fan), dur(perTable), dur(worst), c.Period)
	}
	p("Invocations per pass: 1 scheduled (%s), plus the cleaner's (one per 10 messages). ", inv)
	p("Active tables: at most %d versions stored and a latest manifest of at most %s after any pass.\n\n", r.MaxVersions, kb(r.MaxManifest))
	if len(r.Scheduled) > 0 {
		p("**The scheduled invocation, measured.** After the simulated day, one more period of writes, then one scheduled invocation of the compactor function's handler (`awsfn.Deps.HandleCompactor`, fan-out mode) over the same %s-table warehouse once a scan finds tables in need, in real time, every object-store request delayed by the %s profile (`objstore.NewLatency`), each SQS SendMessageBatch of 10 jobs by %s (%d in flight, as `awsfn.SQSJobSender`), a 15-minute deadline; then, on the same tables in need, with the template's defaults (the jobs of the first are not run). The compaction queue's consumers then maintain the jobs, 10 at a time (modelled above):\n\n", n(int64(c.Tables)), c.Profile, SQSBatchLatency, awsfn.SendJobsInFlight)
		p("| configuration | registered | idle | maintained inline | jobs sent | requests | wall time |\n| --- | --- | --- | --- | --- | --- | --- |\n")
		for _, sc := range r.Scheduled {
			p("| %s | %s | %s | %d | %d | %s | **%s** |\n", sc.Config, n(int64(sc.Registered)), n(int64(sc.Idle)), sc.Inline, sc.Jobs, reqText(sc.Requests), dur(sc.Wall))
		}
		p("\n")
	}
	d := maintenance.DefaultPolicy()
	p("Need thresholds (the policy's defaults): a changed table is maintained once ~%d fragments wait (`CompactMinFragments`; one a write) or %s after its first change (`CompactMaxWait`); an unchanged one once %d versions are prunable (`PruneMinVersions`) or %s after the first (`PruneMaxWait`), when a tracked range is due for re-planning, and at its full check (`FullCheckEvery` %s, spread by name). ",
		d.CompactMinFragments, d.CompactMaxWait, d.PruneMinVersions, d.PruneMaxWait, d.FullCheckEvery)
	p("At one write a minute and a pass every %s, %d fragments are reached in the third pass of writes: an active table is maintained every third pass, which keeps it under the goals (<= 100 versions: the grace window holds ~60, plus two passes of writes; latest manifest <= 4 KB) with a third fewer maintenances than every other pass (24, the default until this round: $0.18 a table-month in this simulation); every fourth pass would exceed 100 versions (~60 + three passes of writes).\n\n", c.Period, d.CompactMinFragments)
	idle, active := r.Costs()
	p("### Cost per table-month, all services\n\n")
	p("Prices (us-east-1 list prices as recorded on %s; check the current price lists at aws.amazon.com/s3/pricing, /lambda/pricing, /sqs/pricing, /dynamodb/pricing/on-demand): S3 PUT/LIST $0.005 per 1,000, GET $0.0004 per 1,000, DELETE free; ", PricesDate)
	p("Lambda arm64 $%.10f per GB-s at %.1f GB, $%.2f per million requests; SQS $%.2f per million requests (send, receive, delete: 3 per cleanup message); DynamoDB on-demand $%.3f per million writes (lock acquire, renew, release), $%.3f per million reads. ",
		PriceLambdaGBSecondArm, LambdaMemoryGB, PriceLambdaPerMillion, PriceSQSPerMillion, PriceDynamoWRUMillion, PriceDynamoRRUMillion)
	p("%d passes a month. Each table carries its own requests plus an equal share of the fleet's (index, registry, `_stats`, the scheduled invocation and its scan); active tables also carry the modelled maintenance and cleaner time. The writes themselves are not counted.\n\n", PassesPerMonth)
	p("| per table-month | S3 requests | S3 | Lambda | SQS | DynamoDB | total | goal |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n")
	p("| idle | %s | %s | %s | %s | %s | **%s** | <= $0.015 |\n", reqText(idle.Requests), money(idle.S3), money(idle.Lambda), money(idle.SQS), money(idle.Dynamo), money(idle.Total()))
	p("| active, maintenance only | %s | %s | %s | %s | %s | **%s** | <= $0.05 |\n\n", reqText(active.Requests), money(active.S3), money(active.Lambda), money(active.SQS), money(active.Dynamo), money(active.Total()))
	if nf := r.Notified; nf.Passes > 0 {
		d := float64(max(nf.Tables, 1) * nf.Passes)
		cost := nf.Cost()
		p("### Idle tables with S3 notifications on\n\n")
		p("After the simulation, the same %s tables with nothing written (%d passes to finish the pending work, then %d measured: one safety-net cadence of %s), the pass as the compactor runs it with notifications on (`fleet.Options.SafetyScanEvery` %s, the template's `SafetyScanEvery` default; `_stats` listed every pass): a table is listed once per cadence, at the pass whose window holds its index shard's phase, and a shard is read only when it changed, is due or is in the window (docs/reliability.md, \"A change whose S3 notification is lost\"). "+
			"Every request of those passes (tables, fleet index, scan state, `_registry`, `_stats`) and every lock call is shared by all tables; the month includes the scheduled invocation (Lambda: one request and the modelled pass, %s mean) shared the same way. Before: 1 LIST a pass, $0.0144 a month.\n\n",
			n(int64(nf.Tables)), notifiedSettle, nf.Passes, nf.Every, nf.Every, dur(nf.Wall))
		p("| idle table, notifications on | per pass | GET | PUT | LIST | DELETE | lock calls | tables listed a pass | per month | goal |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
		p("| %s tables | **%.4f** requests | %.4f | %.4f | %.4f | %.4f | %.4f | %.1f of %s | **%s** (%s) | <= 0.05 a pass, <= $0.001 a month |\n\n",
			n(int64(nf.Tables)), nf.PerPass(), float64(nf.Requests.Get+nf.Requests.Head)/d, float64(nf.Requests.Put)/d, float64(nf.Requests.List)/d,
			float64(nf.Requests.DeleteRequests)/d, float64(nf.LockW+nf.LockR)/d, float64(nf.Listed)/float64(nf.Passes), n(int64(nf.Tables)), money4(cost.Total()), reqText(cost.Requests))
	}
	// The floor of this design for the active table: each write leaves one
	// data file that compaction must read and one change record that
	// cleanup must read (a GET each, whatever the cadence), and the scan
	// lists the table once a pass.
	writes := float64(PassesPerMonth) * c.Period.Minutes()
	floorGets := 2 * writes * PriceGetPer1000 / 1000
	floorScan := float64(PassesPerMonth) * PricePutPer1000 / 1000
	floorMaint := float64(PassesPerMonth/3) * 6 * PricePutPer1000 / 1000 // 4 PUT + 2 LIST each
	p("**Why the active table's goal ($0.05) is out of reach for format 2.** At one write a minute a table takes %s writes a month. "+
		"Each leaves a data file that compaction must read once and a change record that cleanup must read once: at least %s GETs (%s) whatever the cadence; "+
		"the scan lists the table once a pass: %s LISTs (%s; S3 notifications instead cost an SQS message a write, more). "+
		"That is %s before any lock, floor, commit, prune state or Lambda second. "+
		"Each maintenance then needs at least a lock (DynamoDB), the compaction's data file, manifest and change record (3 PUT), the floor marker (1 PUT) and the listings that find the versions and the floor (2 LIST), "+
		"and at most every third pass keeps a table at <= 100 versions under a 1-hour grace: %s maintenances, %s more, a floor of %s. "+
		"Measured above (this fleet's tables are format 3, the default): %s. Format 3 is that different format (small writes inlined in the manifest, no change record for a version that adds no file): what it leaves is in \"Format 3 against format 2\" above.\n\n",
		n(int64(writes)), n(int64(2*writes)), money3(floorGets), n(int64(PassesPerMonth)), money3(floorScan), money3(floorGets+floorScan),
		n(int64(PassesPerMonth/3)), money3(floorMaint), money3(floorGets+floorScan+floorMaint), money(active.Total()))
	p("### Linearity: requests per idle table in one pass\n\n| tables | GET | HEAD | PUT | LIST | DELETE |\n| --- | --- | --- | --- | --- | --- |\n")
	for _, l := range r.Linearity {
		p("| %s | %s |\n", n(int64(l.Tables)), perRow(l.PerTable))
	}
	p("\n")
	if len(r.Embedded) > 0 {
		p("### The issue's table, re-measured (embedded warehouse, local disk)\n\n")
		p("N small tables, two `tablekeep maintain` passes to settle, then, with nothing written, the scheduled pass (`fleet.Scheduler.Run`) and a whole `tablekeep maintain` (the pass, the cleanup drain and the orphan sweep of every table). Requests per idle table; times are real, on local disk. Before this change (issue 11): 50 tables GET 52, LIST 13.8, PUT 4.3, 3.5 s; 200: 126, 13.2, 4.1, 32 s; 400: 226, 13.1, 4.0, 86 s.\n\n")
		p("| tables | pass: GET | HEAD | PUT | LIST | DELETE | pass time | whole maintain: GET | HEAD | PUT | LIST | DELETE | time |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
		for _, e := range r.Embedded {
			p("| %d | %s | %s | %s | %s |\n", e.Tables, perRow(e.PerTable), dur(e.Pass), perRow(e.MaintainPerTable), dur(e.Maintain))
		}
		p("\n")
	}
	p("(fleet section measured in %s)\n", r.Elapsed.Round(time.Second))
	return b.String()
}

// money3 is a dollar amount with three decimals (the floor's parts).
func money3(d float64) string { return fmt.Sprintf("$%.3f", d) }

// money4 is a dollar amount with four decimals.
func money4(d float64) string { return fmt.Sprintf("$%.4f", d) }
