package awsfn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
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

// fanout is the fan-out policy of one invocation (fleet.Fanout) over r.
func (d *Deps) fanout(ctx context.Context, r *maintenance.Runner) *fleet.Fanout {
	return &fleet.Fanout{Sched: fleet.New(r, d.fleetOptions()), Store: d.Store, Root: table.NormalizeRoot(d.Root), Warehouse: d.Config.Warehouse,
		Jobs: d.Jobs, Clock: d.Clock, Margin: d.Config.Margin, ClockOffset: d.Config.ClockOffset,
		InlineTables: d.Config.InlineTables, InlineTime: d.Config.InlineTime, RequestID: requestID(ctx)}
}

// compactFanout is the scheduled run with a compaction queue
// (fleet.Fanout.Scheduled: tables in retry left to their job, the first
// InlineTables maintained inline while time allows, the rest sent as table
// jobs first): its summary and metrics.
func (d *Deps) compactFanout(ctx, wctx context.Context, r *maintenance.Runner, log *slog.Logger, m *telemetry.Metrics, sum *CompactSummary) {
	rep := d.fanout(ctx, r).Scheduled(ctx, wctx, log)
	sum.Stopped = rep.Stopped
	if rep.ScanFailed {
		m.Count(telemetry.TableErrors, 1)
		return
	}
	sum.Registered, sum.Idle, sum.BackingOff = rep.Registered, rep.Idle, rep.BackingOff
	sum.InRetry, sum.JobsEnqueued, sum.NotReached = rep.InRetry, rep.JobsEnqueued, rep.NotReached
	for _, tr := range rep.Tables {
		sum.add(tr)
	}
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
	fo := d.fanout(ctx, d.newRunner(ctx, log, cat, m))
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
		if wait := j.NotBefore.Sub(d.Clock.Now()); wait > fleet.MaxJobWait {
			// No job is sent with a wait beyond the jobs' longest backoff: forged or
			// damaged, and sending it back would cycle it for ever.
			items[i].err = fmt.Errorf("%w: %w: not_before %s is %s ahead, beyond the longest wait %s", queue.ErrPermanent, ErrInvalidJob,
				j.NotBefore.Format(time.RFC3339), wait.Round(time.Second), fleet.MaxJobWait)
			continue
		} else if wait > 0 {
			early = append(early, OutJob{Job: j, Delay: min(wait, maxSQSDelay)})
			earlyItems = append(earlyItems, i)
			continue
		}
		w := add(i, ref)
		w.job = true
		w.attempt = max(w.attempt, j.Attempt)
		w.marked = w.marked || j.Attempt > 0 || j.Reason == fleet.ReasonContinue || j.Reason == fleet.ReasonLost
	}
	if len(early) > 0 {
		err := d.Jobs.SendJobs(context.WithoutCancel(ctx), early)
		for _, i := range earlyItems {
			items[i].err = err // nil: acknowledged, the copy comes back later
		}
		s.Deferred += len(early)
	}
	tables := make([]fleet.JobTable, len(order))
	for k, name := range order {
		w := work[name]
		tables[k] = fleet.JobTable{Ref: w.ref, Attempt: w.attempt, Marked: w.marked, Redelivered: w.redeliv, Job: w.job, Records: len(w.items)}
	}
	s.Tables = len(tables)
	jr := fo.MaintainJobs(ctx, wctx, log, tables)
	s.Done, s.Retried, s.Continued, s.Busy, s.InRetry = jr.Done, jr.Retried, jr.Continued, jr.Busy, s.InRetry+jr.InRetry
	s.Deferred += jr.Deferred
	if jr.Errors > 0 {
		m.Count(telemetry.TableErrors, jr.Errors)
	}
	var outs []OutJob
	var outItems [][]int
	for k, o := range jr.Outcomes {
		if o.Send {
			outs = append(outs, o.Next)
			outItems = append(outItems, work[order[k]].items)
		}
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
