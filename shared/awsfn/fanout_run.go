package awsfn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/tablekeep/tablekeep/shared/catalog"
	"github.com/tablekeep/tablekeep/shared/fleet"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/queue"
	"github.com/tablekeep/tablekeep/shared/table"
	"github.com/tablekeep/tablekeep/shared/telemetry"
)

// outOfTime says whether an invocation should start no more tables: its
// context ended, or less than the margin plus twice the longest table it
// has done so far is left. What it does not start goes to the queue.
func (d *Deps) outOfTime(wctx context.Context, longest time.Duration) bool {
	if wctx.Err() != nil {
		return true
	}
	left, ok := d.deadlineLeft(wctx)
	return ok && left < d.Config.Margin+2*longest
}

// HandleCompactor is the compactor's Lambda handler. It tells its two
// events apart: a batch of Records from SQS is the compaction queue (table
// jobs and S3 notifications, CompactJobs), anything else must be a
// scheduled event (Compact). With no compaction queue configured an SQS
// batch is rejected as before.
func (d *Deps) HandleCompactor(ctx context.Context, raw json.RawMessage) (any, error) {
	if d.Jobs != nil && isSQSBatch(raw) {
		return d.CompactJobs(ctx, raw)
	}
	return d.Compact(ctx, raw)
}

// isSQSBatch: a JSON object whose Records come from aws:sqs.
func isSQSBatch(raw []byte) bool {
	var probe struct {
		Records []struct {
			EventSource string `json:"eventSource"`
		} `json:"Records"`
	}
	return json.Unmarshal(raw, &probe) == nil && len(probe.Records) > 0 && probe.Records[0].EventSource == "aws:sqs"
}

// deadlineLeft is the time to ctx's deadline on d.Clock (ok false: none).
func (d *Deps) deadlineLeft(ctx context.Context) (time.Duration, bool) {
	dl, ok := ctx.Deadline()
	if !ok {
		return 0, false
	}
	return dl.Sub(d.Clock.Now()), true
}

// compactFanout is the scheduled run with a compaction queue: tables with
// a pending retry or continuation are left to their job (or, if the marker
// is stale, their job is resent); the first InlineTables of the rest, most
// in need first, are maintained inline while time allows, and the others
// are sent as table jobs before any inline work starts (so a crash inline
// loses none of them). A table that fails inline gets a retry job with
// backoff; one whose compaction stopped at the deadline a continuation.
func (d *Deps) compactFanout(ctx, wctx context.Context, r *maintenance.Runner, cat *catalog.Catalog, log *slog.Logger, m *telemetry.Metrics, sum *CompactSummary) {
	sc, refs, err := scanTables(wctx, r)
	if err != nil {
		log.ErrorContext(ctx, "compactor scan failed", "err", err)
		sum.Stopped = err.Error()
		m.Count(telemetry.TableErrors, 1)
		return
	}
	sum.Registered, sum.Idle, sum.BackingOff = sc.Tables, sc.Idle, sc.BackingOff
	defer func() {
		if err := fleet.New(r).RecordScan(context.WithoutCancel(wctx), sc); err != nil {
			log.WarnContext(ctx, "scan marks not recorded; those tables are scanned as changed again", "err", err)
		}
	}()
	marks, err := d.markers(ctx, wctx, log)
	if err != nil {
		log.WarnContext(ctx, "retry markers unreadable; every table is a candidate", "err", err)
	}
	now := d.Clock.Now()
	// Earlier runs' inline records still there: each names the tables a run
	// was maintaining inline when it died (killed, out of memory) or is
	// still maintaining. Their tables are not maintained inline now: those
	// of a dead run get a retry job with backoff (job mode survives a
	// crash: the message is redelivered, then dead-lettered), so the table
	// that killed it is not picked first again and delays nobody; those of
	// a live run are left to it. A record is dropped only by its own run,
	// or by a run that sent its tables their retry jobs.
	prevRuns, runErr := d.readInlineRuns(wctx, log)
	if runErr != nil {
		log.WarnContext(ctx, "inline run records unreadable; ignored", "err", runErr)
	}
	inPrev := map[string]bool{} // a table of an earlier run, dead or alive
	deadOf := map[string]bool{} // a table of a dead run
	var deadKeys []string
	for _, pr := range prevRuns {
		dead := now.After(pr.Until.Add(inlineRunSkew))
		log.WarnContext(ctx, "an earlier scheduled run did not finish its inline tables", "record", pr.Key, "started", pr.At,
			"until", pr.Until, "dead", dead, "tables", pr.Tables)
		for _, n := range pr.Tables {
			inPrev[n] = true
			deadOf[n] = deadOf[n] || dead
		}
		if dead {
			deadKeys = append(deadKeys, pr.Key)
		}
	}
	for n, dead := range deadOf {
		if !dead {
			continue
		}
		for _, pr := range prevRuns { // alive in another record: left to it
			if !now.After(pr.Until.Add(inlineRunSkew)) && slices.Contains(pr.Tables, n) {
				deadOf[n] = false
			}
		}
	}
	need := make(map[string]bool, len(refs))
	var candidates []maintenance.TableRef
	var first []OutJob
	for _, ref := range refs {
		need[ref.Name] = true
		if inPrev[ref.Name] {
			if _, marked := marks[ref.Name]; !marked {
				sum.InRetry++
				if deadOf[ref.Name] {
					if j, ok := d.followUp(ctx, log, ref.Name, 0, maintenance.TableReport{Table: ref.Name}, errInlineRunDied); ok {
						first = append(first, j)
					}
				}
				continue
			}
		}
		mk, ok := marks[ref.Name]
		if !ok {
			candidates = append(candidates, ref)
			continue
		}
		if !d.markerStale(mk, now) {
			sum.InRetry++
			continue
		}
		first = append(first, d.resendLost(ctx, wctx, log, ref.Name, mk, now))
		sum.InRetry++
	}
	// A table in retry that the scan did not find in need (backing off in
	// the fleet index) still has its lost job resent once its marker is
	// stale: one backoff policy, whichever mode failed it.
	registered := map[string]bool{}
	for _, ref := range sc.Refs() {
		registered[ref.Name] = true
	}
	for _, name := range slices.Sorted(maps.Keys(marks)) {
		if mk := marks[name]; !need[name] && registered[name] && d.markerStale(mk, now) {
			first = append(first, d.resendLost(ctx, wctx, log, name, mk, now))
			sum.InRetry++
		}
	}
	inline := candidates
	if n := d.Config.InlineTables; n >= 0 && len(inline) > n {
		inline = candidates[:n]
		for _, ref := range candidates[n:] {
			first = append(first, OutJob{Job: d.job(ref.Name, 0, ReasonFanout)})
		}
	}
	notSent := d.sendJobs(ctx, wctx, log, first, sum)
	if notSent == 0 {
		// The dead runs' tables have their retry jobs: their records go.
		d.deleteInlineRuns(ctx, log, deadKeys)
	}
	ownKey := ""
	if len(inline) > 0 {
		// Deleted after the loop, not deferred: a run that panics inline
		// (the Lambda runtime turns it into an error) leaves the record.
		ownKey = d.putInlineRun(ctx, wctx, log, inline)
	}
	var longest time.Duration
	var later []OutJob
	inlineStart := d.Clock.Now()
	for i, ref := range inline {
		budget := d.Config.InlineTime > 0 && d.Clock.Now().Sub(inlineStart)+longest > d.Config.InlineTime
		if i > 0 && (budget || d.outOfTime(wctx, longest)) {
			why := "deadline"
			if budget {
				why = "inline time " + d.Config.InlineTime.String()
			}
			sum.Stopped = fmt.Sprintf("%s: %d of %d tables done inline, the rest sent as table jobs", why, i, len(inline))
			for _, ref := range inline[i:] {
				later = append(later, OutJob{Job: d.job(ref.Name, 0, ReasonFanout)})
			}
			break
		}
		start := d.Clock.Now()
		tr, err := maintainTable(wctx, r, ref)
		longest = max(longest, d.Clock.Now().Sub(start))
		if err != nil {
			log.ErrorContext(ctx, "maintenance failed", "table", ref.Name, "err", err)
			if !tr.PruneDone() || !errors.Is(err, maintenance.ErrCompaction) {
				tr.Fail(err)
			}
		}
		sum.add(tr)
		if j, ok := d.followUp(ctx, log, ref.Name, 0, tr, err); ok {
			later = append(later, j)
		}
	}
	if ownKey != "" {
		d.deleteInlineRuns(ctx, log, []string{ownKey})
	}
	notSent += d.sendJobs(ctx, wctx, log, later, sum)
	sum.NotReached = notSent
	var ranges int
	for _, ts := range sum.Tables {
		ranges += ts.RangesEnqueued
	}
	m.Count(telemetry.TablesMaintained, len(sum.Tables)-sum.Errors-sum.Busy)
	m.Count(telemetry.TablesBusy, sum.Busy)
	m.Count(telemetry.TableErrors, sum.Errors)
	m.Count(telemetry.TablesNotReached, sum.NotReached)
	m.Count(telemetry.RangesEnqueued, ranges)
	m.Count(telemetry.JobsEnqueued, sum.JobsEnqueued)
	m.Count(telemetry.TablesInRetry, sum.InRetry)
}

// sendJobs sends jobs, counting them in sum; it returns how many were not
// sent (the next scheduled scan finds those tables again).
func (d *Deps) sendJobs(ctx, wctx context.Context, log *slog.Logger, jobs []OutJob, sum *CompactSummary) int {
	if len(jobs) == 0 {
		return 0
	}
	sctx := wctx
	if wctx.Err() != nil { // out of time: sending is what is left to do
		sctx = context.WithoutCancel(ctx)
	}
	if err := d.Jobs.SendJobs(sctx, jobs); err != nil {
		log.ErrorContext(ctx, "table jobs not sent; the next scheduled scan finds those tables again", "jobs", len(jobs), "err", err)
		return len(jobs)
	}
	sum.JobsEnqueued += len(jobs)
	return 0
}

func (d *Deps) job(table string, attempt int, reason string) Job {
	return Job{V: JobVersion, Warehouse: d.Config.Warehouse, Table: table, Attempt: attempt, Reason: reason}
}

// followUp decides what comes after maintaining a table whose job had
// attempt: nothing (done), a retry with backoff (it failed, or its
// compaction stopped without committing a group: a retry marker is written
// first), a continuation (its compaction committed groups, then stopped at
// the deadline or lost its lease with work left: marker too) or a busy
// re-check.
func (d *Deps) followUp(ctx context.Context, log *slog.Logger, name string, attempt int, tr maintenance.TableReport, err error) (OutJob, bool) {
	now := d.Clock.Now()
	if err == nil && tr.Compacted.Stopped != "" && tr.Compacted.Committed == 0 {
		// Stopped without committing a group: no progress, so a
		// continuation would only repeat it. Retry with backoff instead.
		err = fmt.Errorf("compaction made no progress: %s", tr.Compacted.Stopped)
		log.WarnContext(ctx, "retrying with backoff", "table", name, "attempt", attempt+1, "err", err)
	}
	compactOnly := err != nil && tr.PruneDone() && errors.Is(err, maintenance.ErrCompaction)
	switch {
	case err != nil:
		// One backoff policy (fleet.Backoff): the fleet
		// index recorded the failure and its retry time; the job follows
		// it. Without a recorded mark, the same policy by attempt.
		next := attempt + 1
		notBefore := now.Add(RetryBackoff(next))
		switch {
		case compactOnly && !tr.CompactRetryAt.IsZero():
			// Compaction alone failed (the table was pruned): retried when
			// its compaction backoff ends, as the index records it.
			next, notBefore = min(tr.CompactFailures, maxJobAttempt), tr.CompactRetryAt
		case tr.Failures > 0 && !tr.RetryAt.IsZero():
			next, notBefore = min(tr.Failures, maxJobAttempt), tr.RetryAt
		}
		wait := max(notBefore.Sub(now), 0)
		d.mark(ctx, log, Marker{Table: name, Attempt: next, Reason: ReasonRetry, Error: err.Error(), At: now, NotBefore: notBefore})
		j := d.job(name, next, ReasonRetry)
		j.NotBefore = notBefore
		return OutJob{Job: j, Delay: wait}, true
	case tr.Skipped != "":
		return OutJob{Job: d.job(name, attempt, ReasonBusy), Delay: BusyDelay}, true
	case tr.Compacted.Stopped != "":
		d.mark(ctx, log, Marker{Table: name, Attempt: attempt, Reason: ReasonContinue, Error: tr.Compacted.Stopped, At: now})
		return OutJob{Job: d.job(name, attempt, ReasonContinue)}, true
	}
	return OutJob{}, false
}

func (d *Deps) mark(ctx context.Context, log *slog.Logger, mk Marker) {
	if err := d.putMarker(context.WithoutCancel(ctx), mk); err != nil {
		log.WarnContext(ctx, "retry marker not written (the table may be maintained inline once more)", "table", mk.Table, "err", err)
	}
}

// jobItem is one record of a compaction-queue batch.
type jobItem struct {
	rec     events.SQSMessage
	err     error // set: the record's outcome is decided
	ignored bool  // a notification for no table: acknowledged
}

// tableWork is one table named by one or more records of a batch.
type tableWork struct {
	ref     maintenance.TableRef
	items   []int
	attempt int  // highest attempt of its jobs
	marked  bool // a retry marker may exist: delete it when done
	redeliv bool // a record was received before (the last try may have crashed)
	job     bool // a table job names it (not only notifications)
}

// JobsSummary is logged after each compaction-queue batch.
type JobsSummary struct {
	Records, Tables, Done, Retried, Continued, Busy, Deferred, Dropped, Ignored int
	// InRetry: tables named only by notifications and left to their
	// pending retry job.
	InRetry int
}

// CompactJobs is the compactor's SQS-triggered mode: a batch from the
// compaction queue of table jobs and S3 manifest notifications. Records
// naming the same table are maintained once. The response lists the
// records to retry (ReportBatchItemFailures): only those whose follow-up
// could not be sent. A table that fails gets a retry job with backoff (its
// records are acknowledged), so it never holds up the queue or its batch;
// a malformed, foreign or unknown-table job is logged and dropped
// (MessagesDropped), and nothing is done for it; a notification for a key
// that is no registered table's manifest is ignored with a log line.
// Records from a queue other than the compaction queue fail the whole
// invocation (nothing is acknowledged): a wrongly wired mapping must not
// consume another queue's messages.
func (d *Deps) CompactJobs(ctx context.Context, raw json.RawMessage) (events.SQSEventResponse, error) {
	log := d.logger(ctx)
	ev, err := ParseSQS(RoleCompactor, raw)
	if err != nil {
		log.ErrorContext(ctx, "rejected event", "err", err)
		return events.SQSEventResponse{}, err
	}
	want := queueName(d.Config.CompactionQueueURL)
	for i, rec := range ev.Records {
		if rec.EventSourceARN != "" && queueName(rec.EventSourceARN) != want {
			err := fmt.Errorf("compactor: %w: record %d is from queue %q, the compaction queue is %q", ErrUnsupportedEvent, i, queueName(rec.EventSourceARN), want)
			log.ErrorContext(ctx, "rejected event", "err", err)
			return events.SQSEventResponse{}, err
		}
	}
	cat, err := d.Catalog(ctx)
	if err != nil {
		return events.SQSEventResponse{}, err
	}
	wctx, cancel := d.workContext(ctx, 0)
	defer cancel()
	m := d.metrics(RoleCompactor)
	r := d.newRunner(ctx, log, cat, m)
	var s JobsSummary
	s.Records = len(ev.Records)
	items := make([]jobItem, len(ev.Records))
	var order []string
	work := map[string]*tableWork{}
	var roots map[string]maintenance.TableRef
	add := func(i int, ref maintenance.TableRef) *tableWork {
		w := work[ref.Name]
		if w == nil {
			w = &tableWork{ref: ref}
			work[ref.Name] = w
			order = append(order, ref.Name)
		}
		if len(w.items) == 0 || w.items[len(w.items)-1] != i {
			w.items = append(w.items, i)
		}
		if n, _ := strconv.Atoi(ev.Records[i].Attributes["ApproximateReceiveCount"]); n > 1 {
			w.redeliv = true
		}
		return w
	}
	var early []OutJob // not-before jobs sent back
	var earlyItems []int
	for i, rec := range ev.Records {
		items[i].rec = rec
		body := []byte(rec.Body)
		keys, isNote, err := ParseNotification(body)
		if isNote {
			if err != nil {
				items[i].err = err
				continue
			}
			for _, k := range keys {
				ref, ok, why, err := d.notifiedTable(wctx, cat, &roots, k)
				if err != nil {
					items[i].err = err // retried: the registry could not be read
					break
				}
				if !ok {
					log.InfoContext(ctx, "notification ignored", "bucket", k.Bucket, "key", k.Key, "why", why)
					continue
				}
				add(i, ref)
			}
			if items[i].err == nil && (len(keys) == 0 || !d.itemHasWork(work, i)) {
				items[i].ignored = true
			}
			continue
		}
		j, err := ParseJob(body, d.Config.Warehouse)
		if err != nil {
			items[i].err = err
			continue
		}
		ref, err := resolveTable(wctx, cat, j.Table)
		if errors.Is(err, maintenance.ErrUnknownTable) {
			items[i].err = fmt.Errorf("%w: %w: %w", queue.ErrPermanent, ErrInvalidJob, err)
			continue
		}
		if err != nil {
			items[i].err = fmt.Errorf("resolve %s: %w", j.Table, err)
			continue
		}
		if wait := j.NotBefore.Sub(d.Clock.Now()); wait > MaxJobWait {
			// No job is sent with a wait beyond RetryBackoffMax: forged or
			// damaged, and sending it back would cycle it for ever.
			items[i].err = fmt.Errorf("%w: %w: not_before %s is %s ahead, beyond the longest wait %s", queue.ErrPermanent, ErrInvalidJob,
				j.NotBefore.Format(time.RFC3339), wait.Round(time.Second), MaxJobWait)
			continue
		} else if wait > 0 {
			early = append(early, OutJob{Job: j, Delay: min(wait, maxSQSDelay)})
			earlyItems = append(earlyItems, i)
			continue
		}
		w := add(i, ref)
		w.job = true
		w.attempt = max(w.attempt, j.Attempt)
		w.marked = w.marked || j.Attempt > 0 || j.Reason == ReasonContinue || j.Reason == ReasonLost
	}
	if len(early) > 0 {
		err := d.Jobs.SendJobs(context.WithoutCancel(ctx), early)
		for _, i := range earlyItems {
			items[i].err = err // nil: acknowledged, the copy comes back later
		}
		s.Deferred += len(early)
	}
	var longest time.Duration
	var outs []OutJob
	var outItems [][]int
	for n, name := range order {
		w := work[name]
		s.Tables++
		if n > 0 && d.outOfTime(wctx, longest) {
			outs = append(outs, OutJob{Job: d.job(name, w.attempt, ReasonDeferred)})
			outItems = append(outItems, w.items)
			s.Deferred++
			continue
		}
		if !w.job {
			// Notifications only: a table in retry (a fresh marker) is left
			// to its pending job, which maintains it after its backoff; a
			// notification neither maintains it early nor starts another
			// retry chain.
			if mk, ok, err := d.readMarker(wctx, name); err == nil && ok && !d.markerStale(mk, d.Clock.Now()) {
				log.InfoContext(ctx, "notification for a table in retry; left to its job", "table", name,
					"attempt", mk.Attempt, "reason", mk.Reason, "not_before", mk.NotBefore)
				s.InRetry++
				continue
			}
		}
		if w.redeliv {
			// The last delivery may have crashed on this table: keep the
			// scheduled run from picking it inline until a job finishes it.
			d.mark(ctx, log, Marker{Table: name, Attempt: w.attempt, Reason: ReasonRetry, Error: "redelivered", At: d.Clock.Now()})
			w.marked = true
		}
		start := d.Clock.Now()
		tr, err := maintainTable(wctx, r, w.ref)
		longest = max(longest, d.Clock.Now().Sub(start))
		if err != nil {
			log.ErrorContext(ctx, "maintenance failed", "table", name, "attempt", w.attempt, "err", err)
			m.Count(telemetry.TableErrors, 1)
		}
		if j, ok := d.followUp(ctx, log, name, w.attempt, tr, err); ok {
			outs = append(outs, j)
			outItems = append(outItems, w.items)
			switch j.Job.Reason {
			case ReasonRetry:
				s.Retried++
			case ReasonContinue:
				s.Continued++
			case ReasonBusy:
				s.Busy++
			}
			continue
		}
		s.Done++
		if w.marked {
			if err := d.deleteMarker(context.WithoutCancel(ctx), name); err != nil {
				log.WarnContext(ctx, "retry marker not deleted (the scheduled run resends its job later)", "table", name, "err", err)
			}
		}
		log.InfoContext(ctx, "table job done", "table", name, "records", len(w.items), "groups_committed", tr.Compacted.Committed,
			"latest_version", tr.Prune.Latest, "floor", tr.Prune.Floor, "ranges_enqueued", len(tr.Prune.Ranges))
	}
	// Follow-ups are sent one by one so that a failed send fails only the
	// records of its table (SQS then redelivers them).
	for k, j := range outs {
		err := d.Jobs.SendJobs(context.WithoutCancel(ctx), []OutJob{j})
		if err != nil {
			err = fmt.Errorf("follow-up job of %s not sent: %w", j.Job.Table, err)
		}
		for _, i := range outItems[k] {
			if items[i].err == nil {
				items[i].err = err
			}
		}
	}
	var resp events.SQSEventResponse
	var noID int
	for _, it := range items {
		attrs := []any{"message_id", it.rec.MessageId, "receive_count", it.rec.Attributes["ApproximateReceiveCount"]}
		switch {
		case it.err == nil:
			if it.ignored {
				s.Ignored++
			}
		case errors.Is(it.err, queue.ErrPermanent):
			s.Dropped++
			log.ErrorContext(ctx, "compactor: dropping a message it can never process", append(attrs, "err", it.err)...)
		case it.rec.MessageId == "":
			noID++
		default:
			log.WarnContext(ctx, "compactor: message failed; reporting it for retry", append(attrs, "err", it.err)...)
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: it.rec.MessageId})
		}
	}
	m.Count(telemetry.JobsDone, s.Done)
	m.Count(telemetry.JobsRetried, s.Retried)
	m.Count(telemetry.JobsContinued, s.Continued)
	m.Count(telemetry.JobsDeferred, s.Deferred)
	m.Count(telemetry.MessagesDropped, s.Dropped)
	m.Count(telemetry.NotificationsIgnored, s.Ignored)
	if merr := m.Flush(); merr != nil {
		log.WarnContext(ctx, "metrics not written", "err", merr)
	}
	log.InfoContext(ctx, "compactor batch", "records", s.Records, "tables", s.Tables, "done", s.Done, "retried", s.Retried,
		"continued", s.Continued, "busy", s.Busy, "deferred", s.Deferred, "dropped", s.Dropped, "ignored", s.Ignored, "in_retry", s.InRetry,
		"retry", len(resp.BatchItemFailures))
	if noID > 0 {
		return events.SQSEventResponse{}, fmt.Errorf("compactor: %d failed messages have no message id; retrying the whole batch", noID)
	}
	return resp, nil
}

func (d *Deps) itemHasWork(work map[string]*tableWork, i int) bool {
	for _, w := range work {
		for _, j := range w.items {
			if j == i {
				return true
			}
		}
	}
	return false
}

// notifiedTable maps a notified key to the registered table whose manifest
// it is. why says why not: another bucket, outside the warehouse, not a
// manifest, no registered table at that root, or the _stats table (which
// every maintenance writes: it is left to the scheduled scan, or each
// maintenance would notify the next).
func (d *Deps) notifiedTable(ctx context.Context, cat *catalog.Catalog, roots *map[string]maintenance.TableRef, k ManifestKey) (maintenance.TableRef, bool, string, error) {
	var none maintenance.TableRef
	if k.Bucket != d.Config.Bucket {
		return none, false, "another bucket", nil
	}
	if !strings.HasPrefix(k.Key, table.NormalizeRoot(cat.Root())) {
		return none, false, "outside the warehouse prefix", nil
	}
	root, ok := manifestTableRoot(k.Key)
	if !ok {
		return none, false, "not a table manifest", nil
	}
	if *roots == nil {
		m, err := tableRoots(ctx, cat)
		if err != nil {
			return none, false, "", err
		}
		*roots = m
	}
	ref, ok := (*roots)[root]
	switch {
	case !ok:
		return ref, false, "no registered table at " + root, nil
	case ref.Name == catalog.StatsName:
		return ref, false, "the _stats table is maintained by the scheduled scan", nil
	}
	return ref, true, "", nil
}

// The inline run records: <warehouse>/_fleet/inline-run/<start>-<id>.json,
// one per scheduled run, written by the run before it maintains tables
// inline and deleted by it when it is done with them. Found by a later
// run, a record names the tables a run was working on when it died (or is
// still working on, until its deadline). A record is deleted only by its
// own run, or by a run that sent its tables their retry jobs. (A single
// <warehouse>/_fleet/inline-run.json, as earlier releases wrote it, is read
// and handled the same way: it shares the prefix.)
const (
	// inlineRunSkew: clock skew between invocations, added to a run's
	// deadline before it is taken for dead.
	inlineRunSkew = time.Minute
	// inlineRunMax: a run without a deadline (tests, a local call) is
	// taken for dead this long after it started (Lambda's longest
	// invocation).
	inlineRunMax = 15 * time.Minute
)

// errInlineRunDied is the failure recorded for a table an earlier
// scheduled run was maintaining inline when it died.
var errInlineRunDied = errors.New("an earlier scheduled run died while maintaining its inline tables (killed, out of memory or time)")

// InlineRun is the body of an inline run record (fleet.InlineRun).
type InlineRun = fleet.InlineRun

// readInlineRuns reads every inline run record (one LIST, one GET per
// record: only runs that died or are still going have one). A record that
// is not JSON names no table it could be trusted for: it is logged and
// taken for a dead run with no tables (so deleted once handled).
func (d *Deps) readInlineRuns(ctx context.Context, log *slog.Logger) ([]InlineRun, error) {
	return fleet.ReadInlineRuns(ctx, d.Store, table.NormalizeRoot(d.Root), func(key string, err error) {
		log.WarnContext(ctx, "inline run record is not JSON; taken for a dead run naming no table", "key", key, "err", err)
	})
}

// putInlineRun writes this run's record and returns its key ("" if not
// written).
func (d *Deps) putInlineRun(ctx, wctx context.Context, log *slog.Logger, refs []maintenance.TableRef) string {
	now := d.Clock.Now()
	r := InlineRun{At: now, Until: now.Add(inlineRunMax)}
	if dl, ok := wctx.Deadline(); ok {
		r.Until = dl.Add(d.Config.ClockOffset) // on d.Clock, as workContext
	}
	for _, ref := range refs {
		r.Tables = append(r.Tables, ref.Name)
	}
	key, err := fleet.PutInlineRun(context.WithoutCancel(ctx), d.Store, table.NormalizeRoot(d.Root), requestID(ctx), r)
	if err != nil {
		log.WarnContext(ctx, "inline run record not written (a crash inline would go unnoticed once)", "err", err)
		return ""
	}
	return key
}

func (d *Deps) deleteInlineRuns(ctx context.Context, log *slog.Logger, keys []string) {
	if len(keys) == 0 {
		return
	}
	if err := fleet.DeleteInlineRuns(context.WithoutCancel(ctx), d.Store, keys); err != nil {
		log.WarnContext(ctx, "inline run records not deleted (a later run handles their tables again: a duplicate job)", "err", err)
	}
}
