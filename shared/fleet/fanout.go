package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/tablekeep/tablekeep/shared/clock"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/table"
)

// The AWS fan-out's policy (issue 11, docs/aws.md "Fan-out and
// notifications"): the scheduled compactor maintains tables itself while it
// can finish within its deadline and hands the rest to the compaction queue
// as table jobs, which the same function consumes in its SQS-triggered
// mode. This file decides: inline or queued, the jobs, the follow-up after
// a table's maintenance, the retry markers and the inline run records.
// shared/awsfn parses the events, checks the queue, sends the jobs (its
// JobSender), maps outcomes to BatchItemFailures and counts the metrics.

// Fanout is the fan-out of one invocation over a scheduler.
type Fanout struct {
	Sched *Scheduler
	Store objstore.Store
	// Root is the warehouse root (the prefix in the bucket).
	Root string
	// Warehouse is the warehouse URI a job names (s3://bucket/prefix).
	Warehouse string
	Jobs      JobSender
	Clock     clock.Clock
	// Margin is kept in reserve before the invocation's deadline.
	Margin time.Duration
	// ClockOffset: the invocation's deadline is on Clock shifted by it
	// (TEST ONLY; 0 in production).
	ClockOffset time.Duration
	// InlineTables bounds the tables maintained inline (negative: no
	// bound); InlineTime bounds the time spent inline (0: none).
	InlineTables int
	InlineTime   time.Duration
	// RequestID names the invocation's inline run record.
	RequestID string
}

// FanoutReport is what a scheduled run with a compaction queue did.
type FanoutReport struct {
	// Registered, Idle and BackingOff are the scan's; InRetry the tables
	// left to their pending retry or continuation job.
	Registered, Idle, BackingOff, InRetry int
	// JobsEnqueued is the table jobs sent; NotReached the tables whose
	// jobs could not be sent (the next scan finds them again).
	JobsEnqueued, NotReached int
	Stopped                  string
	// ScanFailed: the scan failed (Stopped says why); nothing was done.
	ScanFailed bool
	// Tables are the reports of the tables maintained inline, in order.
	Tables []maintenance.TableReport
}

// maintainTable maintains one table (lock, compact, plan prune) and
// records its stats row and mark (RecordTables): MaintainTable writes
// neither. The recorded report carries the failure count and retry time
// the index recorded, which the follow-up job's delay follows.
func (f *Fanout) maintainTable(ctx context.Context, ref maintenance.TableRef) (maintenance.TableReport, error) {
	tr, err := f.Sched.MaintainTable(ctx, ref)
	if rec := f.Sched.RecordTables(ctx, tr); len(rec.Tables) == 1 {
		tr = rec.Tables[0]
	}
	return tr, err
}

// deadlineLeft is the time to ctx's deadline on f.Clock (ok false: none).
func (f *Fanout) deadlineLeft(ctx context.Context) (time.Duration, bool) {
	dl, ok := ctx.Deadline()
	if !ok {
		return 0, false
	}
	return dl.Sub(f.Clock.Now()), true
}

// JobVersion is the v of table job messages.
const JobVersion = 1

// Why a job was sent.
const (
	ReasonFanout   = "fanout"   // the scheduled run had more tables than time
	ReasonRetry    = "retry"    // the table failed; retried with backoff
	ReasonContinue = "continue" // the table's work did not fit one invocation
	ReasonBusy     = "busy"     // the table was locked by another run
	ReasonDeferred = "deferred" // the invocation ran out of time before it
	ReasonLost     = "lost"     // a retry marker outlived its job: resent
)

// Job is one table job on the compaction queue. Jobs are idempotent: a job
// means "maintain this table now", which is safe to do twice, late or out of
// order (maintenance works from the table's state, not from the message).
// Attempt and NotBefore only schedule retries.
type Job struct {
	V         int       `json:"v"`
	Warehouse string    `json:"warehouse"` // s3://bucket/prefix: must be this function's
	Table     string    `json:"table"`     // registered name (the root comes from the registry)
	Attempt   int       `json:"attempt"`   // 0: first try; n: n-th retry after a failure
	NotBefore time.Time `json:"not_before,omitzero"`
	Reason    string    `json:"reason,omitempty"`
}

// MaxJobAttempt bounds a job's attempt field (the backoff is capped long
// before).
const MaxJobAttempt = 1 << 20

// A failed table is retried by its own job after the one backoff in
// ModeJobs (BackoffOf(ModeJobs): the compactor's runner records failures in
// the fleet index with the same base and cap, and a retry job's not-before
// is the retry time recorded there). A failing table is thus retried for
// ever, at most once per hour, in its own invocation, and never delays
// other tables (they are separate messages and separate invocations).
const (
	// BusyDelay: a job whose table is locked by another run comes back
	// after this long (the holder may have planned before the change that
	// sent the job).
	BusyDelay = 5 * time.Minute
	// MaxJobWait bounds a job's not-before: no job is ever sent with a
	// wait beyond the jobs' longest backoff, and MaxJobWait minus it = 15
	// min covers clock skew between invocations (< 1 min) with room. A job
	// whose not-before is further ahead is invalid input, dropped.
	MaxJobWait = jobsBackoffMax + 15*time.Minute
)

// OutJob is a job to send, made visible after Delay (a sender caps it at
// its queue's longest delay, SQS's 15 min; the rest of a longer wait is the
// job's NotBefore).
type OutJob struct {
	Job   Job
	Delay time.Duration
}

// JobSender sends table jobs to the compaction queue.
type JobSender interface {
	SendJobs(ctx context.Context, jobs []OutJob) error
}

// Retry markers: a table whose work is in the compaction queue (a retry
// after a failure, or a continuation) has an object
// <warehouse>/_fleet/retry/<table>, written when the job is sent and
// deleted when a job finishes the table. The scheduled run does not
// maintain a marked table itself (so a table that failed or timed out is
// not picked first again); it resends the job of a marker older than
// MarkerStale (the job was lost), so lost messages never leave work undone.
// A marker is a hint only: a missing one means the table may be maintained
// inline once more, a stale one a duplicate job; both are safe.
const (
	// MarkerStale: the jobs' longest backoff plus a 15-minute invocation
	// plus margin.
	MarkerStale = jobsBackoffMax + 30*time.Minute
)

// markerStale reports whether a marker outlived its job (the job was
// lost): now - At > MarkerStale. A marker dated more than InlineRunSkew
// ahead of now (a forged or damaged one) is stale too: it would otherwise
// count as fresh for ever.
func (f *Fanout) markerStale(mk Marker, now time.Time) bool {
	return now.Sub(mk.At) > MarkerStale || mk.At.Sub(now) > InlineRunSkew
}

// resendLost rewrites a stale marker and returns the job to resend.
func (f *Fanout) resendLost(ctx, wctx context.Context, log *slog.Logger, name string, mk Marker, now time.Time) OutJob {
	log.WarnContext(ctx, "retry marker without a job; resending it", "table", name, "attempt", mk.Attempt, "marker_at", mk.At)
	mk.Table, mk.At, mk.Reason, mk.NotBefore = name, now, ReasonLost, time.Time{}
	mk.Attempt = min(max(mk.Attempt, 0), MaxJobAttempt)
	if err := f.putMarker(wctx, mk); err != nil {
		log.WarnContext(ctx, "retry marker not rewritten", "table", name, "err", err)
	}
	return OutJob{Job: f.job(name, mk.Attempt, ReasonLost)}
}

func (f *Fanout) putMarker(ctx context.Context, m Marker) error {
	return PutMarker(ctx, f.Store, table.NormalizeRoot(f.Root), m)
}

// readMarker reads one table's retry marker (one GET); ok false if it has
// none. A body that is not JSON is a stale marker (zero At).
func (f *Fanout) readMarker(ctx context.Context, name string) (Marker, bool, error) {
	return ReadMarker(ctx, f.Store, table.NormalizeRoot(f.Root), name)
}

func (f *Fanout) deleteMarker(ctx context.Context, name string) error {
	return DeleteMarker(ctx, f.Store, table.NormalizeRoot(f.Root), name)
}

// markers reads every retry marker (one LIST, and one GET per marker: only
// tables in retry have one). A marker that cannot be read is logged and
// dated by its store time (LastModified), so it goes stale MarkerStale
// after its last write like any other; one whose body is not a marker (not
// JSON) is logged and counts as stale, so its table is resent a job.
func (f *Fanout) markers(ctx, wctx context.Context, log *slog.Logger) (map[string]Marker, error) {
	return f.readMarkers(wctx, func(key string, err error) {
		if errors.Is(err, ErrMarkerUnreadable) {
			log.WarnContext(ctx, "retry marker unreadable; dated by its store time (its table is resent a job once that is stale)", "key", key, "err", err)
			return
		}
		log.WarnContext(ctx, "retry marker is not a marker; taken for stale (its table is resent a job)", "key", key, "err", err)
	})
}

func (f *Fanout) readMarkers(ctx context.Context, bad func(string, error)) (map[string]Marker, error) {
	return ReadMarkers(ctx, f.Store, table.NormalizeRoot(f.Root), bad)
}

// outOfTime says whether an invocation should start no more tables: its
// context ended, or less than the margin plus twice the longest table it
// has done so far is left. What it does not start goes to the queue.
func (f *Fanout) outOfTime(wctx context.Context, longest time.Duration) bool {
	if wctx.Err() != nil {
		return true
	}
	left, ok := f.deadlineLeft(wctx)
	return ok && left < f.Margin+2*longest
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
	// InlineRunSkew: clock skew between invocations, added to a run's
	// deadline before it is taken for dead.
	InlineRunSkew = time.Minute
	// inlineRunMax: a run without a deadline (tests, a local call) is
	// taken for dead this long after it started (Lambda's longest
	// invocation).
	inlineRunMax = 15 * time.Minute
)

// ErrInlineRunDied is the failure recorded for a table an earlier
// scheduled run was maintaining inline when it died.
var ErrInlineRunDied = errors.New("an earlier scheduled run died while maintaining its inline tables (killed, out of memory or time)")

// readInlineRuns reads every inline run record (one LIST, one GET per
// record: only runs that died or are still going have one). A record that
// is not JSON names no table it could be trusted for: it is logged and
// taken for a dead run with no tables (so deleted once handled).
func (f *Fanout) readInlineRuns(ctx context.Context, log *slog.Logger) ([]InlineRun, error) {
	return ReadInlineRuns(ctx, f.Store, table.NormalizeRoot(f.Root), func(key string, err error) {
		log.WarnContext(ctx, "inline run record is not JSON; taken for a dead run naming no table", "key", key, "err", err)
	})
}

// putInlineRun writes this run's record and returns its key ("" if not
// written).
func (f *Fanout) putInlineRun(ctx, wctx context.Context, log *slog.Logger, refs []maintenance.TableRef) string {
	now := f.Clock.Now()
	r := InlineRun{At: now, Until: now.Add(inlineRunMax)}
	if dl, ok := wctx.Deadline(); ok {
		r.Until = dl.Add(f.ClockOffset) // on f.Clock, as workContext
	}
	for _, ref := range refs {
		r.Tables = append(r.Tables, ref.Name)
	}
	key, err := PutInlineRun(context.WithoutCancel(ctx), f.Store, table.NormalizeRoot(f.Root), f.RequestID, r)
	if err != nil {
		log.WarnContext(ctx, "inline run record not written (a crash inline would go unnoticed once)", "err", err)
		return ""
	}
	return key
}

func (f *Fanout) deleteInlineRuns(ctx context.Context, log *slog.Logger, keys []string) {
	if len(keys) == 0 {
		return
	}
	if err := DeleteInlineRuns(context.WithoutCancel(ctx), f.Store, keys); err != nil {
		log.WarnContext(ctx, "inline run records not deleted (a later run handles their tables again: a duplicate job)", "err", err)
	}
}

// Scheduled is the scheduled run with a compaction queue: tables with
// a pending retry or continuation are left to their job (or, if the marker
// is stale, their job is resent); the first InlineTables of the rest, most
// in need first, are maintained inline while time allows, and the others
// are sent as table jobs before any inline work starts (so a crash inline
// loses none of them). A table that fails inline gets a retry job with
// backoff; one whose compaction stopped at the deadline a continuation.
func (f *Fanout) Scheduled(ctx, wctx context.Context, log *slog.Logger) FanoutReport {
	var rep FanoutReport
	sum := &rep
	sc, err := f.Sched.Scan(wctx)
	if err != nil {
		err = fmt.Errorf("scan tables: %w", err)
		log.ErrorContext(ctx, "compactor scan failed", "err", err)
		sum.Stopped, sum.ScanFailed = err.Error(), true
		return rep
	}
	// The tables in need, in the order to maintain them (longest waiting
	// first, failed tables last); the scan's mark updates are recorded
	// after the inline work.
	refs := make([]maintenance.TableRef, len(sc.Need))
	for i, n := range sc.Need {
		refs[i] = n.Ref
	}
	sum.Registered, sum.Idle, sum.BackingOff = sc.Tables, sc.Idle, sc.BackingOff
	defer func() {
		if err := f.Sched.RecordScan(context.WithoutCancel(wctx), sc); err != nil {
			log.WarnContext(ctx, "scan marks not recorded; those tables are scanned as changed again", "err", err)
		}
	}()
	marks, err := f.markers(ctx, wctx, log)
	if err != nil {
		log.WarnContext(ctx, "retry markers unreadable; every table is a candidate", "err", err)
	}
	now := f.Clock.Now()
	// Earlier runs' inline records still there: each names the tables a run
	// was maintaining inline when it died (killed, out of memory) or is
	// still maintaining. Their tables are not maintained inline now: those
	// of a dead run get a retry job with backoff (job mode survives a
	// crash: the message is redelivered, then dead-lettered), so the table
	// that killed it is not picked first again and delays nobody; those of
	// a live run are left to it. A record is dropped only by its own run,
	// or by a run that sent its tables their retry jobs.
	prevRuns, runErr := f.readInlineRuns(wctx, log)
	if runErr != nil {
		log.WarnContext(ctx, "inline run records unreadable; ignored", "err", runErr)
	}
	inPrev := map[string]bool{} // a table of an earlier run, dead or alive
	deadOf := map[string]bool{} // a table of a dead run
	var deadKeys []string
	for _, pr := range prevRuns {
		dead := now.After(pr.Until.Add(InlineRunSkew))
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
			if !now.After(pr.Until.Add(InlineRunSkew)) && slices.Contains(pr.Tables, n) {
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
					if j, ok := f.followUp(ctx, log, ref.Name, 0, maintenance.TableReport{Table: ref.Name}, ErrInlineRunDied); ok {
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
		if !f.markerStale(mk, now) {
			sum.InRetry++
			continue
		}
		first = append(first, f.resendLost(ctx, wctx, log, ref.Name, mk, now))
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
		if mk := marks[name]; !need[name] && registered[name] && f.markerStale(mk, now) {
			first = append(first, f.resendLost(ctx, wctx, log, name, mk, now))
			sum.InRetry++
		}
	}
	inline := candidates
	if n := f.InlineTables; n >= 0 && len(inline) > n {
		inline = candidates[:n]
		for _, ref := range candidates[n:] {
			first = append(first, OutJob{Job: f.job(ref.Name, 0, ReasonFanout)})
		}
	}
	notSent := f.sendJobs(ctx, wctx, log, first, sum)
	if notSent == 0 {
		// The dead runs' tables have their retry jobs: their records go.
		f.deleteInlineRuns(ctx, log, deadKeys)
	}
	ownKey := ""
	if len(inline) > 0 {
		// Deleted after the loop, not deferred: a run that panics inline
		// (the Lambda runtime turns it into an error) leaves the record.
		ownKey = f.putInlineRun(ctx, wctx, log, inline)
	}
	var longest time.Duration
	var later []OutJob
	inlineStart := f.Clock.Now()
	for i, ref := range inline {
		budget := f.InlineTime > 0 && f.Clock.Now().Sub(inlineStart)+longest > f.InlineTime
		if i > 0 && (budget || f.outOfTime(wctx, longest)) {
			why := "deadline"
			if budget {
				why = "inline time " + f.InlineTime.String()
			}
			sum.Stopped = fmt.Sprintf("%s: %d of %d tables done inline, the rest sent as table jobs", why, i, len(inline))
			for _, ref := range inline[i:] {
				later = append(later, OutJob{Job: f.job(ref.Name, 0, ReasonFanout)})
			}
			break
		}
		start := f.Clock.Now()
		tr, err := f.maintainTable(wctx, ref)
		longest = max(longest, f.Clock.Now().Sub(start))
		if err != nil {
			log.ErrorContext(ctx, "maintenance failed", "table", ref.Name, "err", err)
			if !tr.PruneDone() || !errors.Is(err, maintenance.ErrCompaction) {
				tr.Fail(err)
			}
		}
		sum.Tables = append(sum.Tables, tr)
		if j, ok := f.followUp(ctx, log, ref.Name, 0, tr, err); ok {
			later = append(later, j)
		}
	}
	if ownKey != "" {
		f.deleteInlineRuns(ctx, log, []string{ownKey})
	}
	notSent += f.sendJobs(ctx, wctx, log, later, sum)
	sum.NotReached = notSent
	return rep
}

// sendJobs sends jobs, counting them in sum; it returns how many were not
// sent (the next scheduled scan finds those tables again).
func (f *Fanout) sendJobs(ctx, wctx context.Context, log *slog.Logger, jobs []OutJob, sum *FanoutReport) int {
	if len(jobs) == 0 {
		return 0
	}
	sctx := wctx
	if wctx.Err() != nil { // out of time: sending is what is left to do
		sctx = context.WithoutCancel(ctx)
	}
	if err := f.Jobs.SendJobs(sctx, jobs); err != nil {
		log.ErrorContext(ctx, "table jobs not sent; the next scheduled scan finds those tables again", "jobs", len(jobs), "err", err)
		return len(jobs)
	}
	sum.JobsEnqueued += len(jobs)
	return 0
}

func (f *Fanout) job(table string, attempt int, reason string) Job {
	return Job{V: JobVersion, Warehouse: f.Warehouse, Table: table, Attempt: attempt, Reason: reason}
}

// followUp decides what comes after maintaining a table whose job had
// attempt: nothing (done), a retry with backoff (it failed, or its
// compaction stopped without committing a group: a retry marker is written
// first), a continuation (its compaction committed groups, then stopped at
// the deadline or lost its lease with work left: marker too) or a busy
// re-check.
func (f *Fanout) followUp(ctx context.Context, log *slog.Logger, name string, attempt int, tr maintenance.TableReport, err error) (OutJob, bool) {
	now := f.Clock.Now()
	if err == nil && tr.Compacted.Stopped != "" && tr.Compacted.Committed == 0 {
		// Stopped without committing a group: no progress, so a
		// continuation would only repeat it. Retry with backoff instead.
		err = fmt.Errorf("compaction made no progress: %s", tr.Compacted.Stopped)
		log.WarnContext(ctx, "retrying with backoff", "table", name, "attempt", attempt+1, "err", err)
	}
	compactOnly := err != nil && tr.PruneDone() && errors.Is(err, maintenance.ErrCompaction)
	switch {
	case err != nil:
		// One backoff policy (Backoff): the fleet
		// index recorded the failure and its retry time; the job follows
		// it. Without a recorded mark, the same policy by attempt.
		next := attempt + 1
		notBefore := now.Add(BackoffOf(ModeJobs).Delay(next))
		switch {
		case compactOnly && !tr.CompactRetryAt.IsZero():
			// Compaction alone failed (the table was pruned): retried when
			// its compaction backoff ends, as the index records it.
			next, notBefore = min(tr.CompactFailures, MaxJobAttempt), tr.CompactRetryAt
		case tr.Failures > 0 && !tr.RetryAt.IsZero():
			next, notBefore = min(tr.Failures, MaxJobAttempt), tr.RetryAt
		}
		wait := max(notBefore.Sub(now), 0)
		f.mark(ctx, log, Marker{Table: name, Attempt: next, Reason: ReasonRetry, Error: err.Error(), At: now, NotBefore: notBefore})
		j := f.job(name, next, ReasonRetry)
		j.NotBefore = notBefore
		return OutJob{Job: j, Delay: wait}, true
	case tr.Skipped != "":
		return OutJob{Job: f.job(name, attempt, ReasonBusy), Delay: BusyDelay}, true
	case tr.Compacted.Stopped != "":
		f.mark(ctx, log, Marker{Table: name, Attempt: attempt, Reason: ReasonContinue, Error: tr.Compacted.Stopped, At: now})
		return OutJob{Job: f.job(name, attempt, ReasonContinue)}, true
	}
	return OutJob{}, false
}

func (f *Fanout) mark(ctx context.Context, log *slog.Logger, mk Marker) {
	if err := f.putMarker(context.WithoutCancel(ctx), mk); err != nil {
		log.WarnContext(ctx, "retry marker not written (the table may be maintained inline once more)", "table", mk.Table, "err", err)
	}
}

// JobTable is one table a compaction-queue batch names (by one or more
// records: table jobs, manifest notifications).
type JobTable struct {
	Ref maintenance.TableRef
	// Attempt is the highest attempt of its jobs.
	Attempt int
	// Marked: a retry marker may exist (delete it when done).
	Marked bool
	// Redelivered: a record was received before (the last try may have
	// crashed on it).
	Redelivered bool
	// Job: a table job names it (not only notifications).
	Job bool
	// Records is how many records name it (logged).
	Records int
}

// JobOutcome is what became of one JobTable.
type JobOutcome struct {
	// Next, when Send, is the job to send after it (a deferral, retry,
	// continuation or busy re-check); the records of the table are
	// acknowledged once it is sent.
	Next OutJob
	Send bool
	// Failed: its maintenance failed (the retry job is Next).
	Failed bool
}

// JobsReport counts what a batch's tables came to.
type JobsReport struct {
	Done, Retried, Continued, Busy, Deferred, InRetry, Errors int
	Outcomes                                                  []JobOutcome // one per JobTable, in order
}

// MaintainJobs maintains the tables of a compaction-queue batch, in order,
// while the invocation has time (a table it does not start is deferred: a
// job to send): a table named only by notifications whose retry marker is
// fresh is left to its pending job; a redelivered table is marked first;
// then each is maintained (its stats row and mark recorded) and its
// follow-up decided; a table done has its marker deleted.
func (f *Fanout) MaintainJobs(ctx, wctx context.Context, log *slog.Logger, tables []JobTable) JobsReport {
	var s JobsReport
	var longest time.Duration
	for n, w := range tables {
		name := w.Ref.Name
		if n > 0 && f.outOfTime(wctx, longest) {
			s.Outcomes = append(s.Outcomes, JobOutcome{Next: OutJob{Job: f.job(name, w.Attempt, ReasonDeferred)}, Send: true})
			s.Deferred++
			continue
		}
		if !w.Job {
			// Notifications only: a table in retry (a fresh marker) is left
			// to its pending job, which maintains it after its backoff; a
			// notification neither maintains it early nor starts another
			// retry chain.
			// A marker that cannot be read is logged and taken for none: the
			// notification maintains the table (safe twice; the scheduled
			// run ages that marker by its store time).
			mk, ok, err := f.readMarker(wctx, name)
			if err != nil {
				log.WarnContext(ctx, "retry marker unreadable; the notification maintains the table", "table", name, "err", err)
			}
			if err == nil && ok && !f.markerStale(mk, f.Clock.Now()) {
				log.InfoContext(ctx, "notification for a table in retry; left to its job", "table", name,
					"attempt", mk.Attempt, "reason", mk.Reason, "not_before", mk.NotBefore)
				s.InRetry++
				s.Outcomes = append(s.Outcomes, JobOutcome{})
				continue
			}
		}
		if w.Redelivered {
			// The last delivery may have crashed on this table: keep the
			// scheduled run from picking it inline until a job finishes it.
			f.mark(ctx, log, Marker{Table: name, Attempt: w.Attempt, Reason: ReasonRetry, Error: "redelivered", At: f.Clock.Now()})
			w.Marked = true
		}
		start := f.Clock.Now()
		tr, err := f.maintainTable(wctx, w.Ref)
		longest = max(longest, f.Clock.Now().Sub(start))
		out := JobOutcome{Failed: err != nil}
		if err != nil {
			log.ErrorContext(ctx, "maintenance failed", "table", name, "attempt", w.Attempt, "err", err)
			s.Errors++
		}
		if j, ok := f.followUp(ctx, log, name, w.Attempt, tr, err); ok {
			out.Next, out.Send = j, true
			s.Outcomes = append(s.Outcomes, out)
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
		s.Outcomes = append(s.Outcomes, out)
		s.Done++
		if w.Marked {
			if err := f.deleteMarker(context.WithoutCancel(ctx), name); err != nil {
				log.WarnContext(ctx, "retry marker not deleted (the scheduled run resends its job later)", "table", name, "err", err)
			}
		}
		log.InfoContext(ctx, "table job done", "table", name, "records", w.Records, "groups_committed", tr.Compacted.Committed,
			"latest_version", tr.Prune.Latest, "floor", tr.Prune.Floor, "ranges_enqueued", len(tr.Prune.Ranges))
	}
	return s
}
