package awsfn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"golang.org/x/sync/errgroup"

	"github.com/tablekeep/tablekeep/shared/fleet"
	"github.com/tablekeep/tablekeep/shared/queue"
	"github.com/tablekeep/tablekeep/shared/table"
)

// Fan-out (issue 11, docs/aws.md "Fan-out and notifications"): the
// scheduled compactor maintains tables itself while it can finish within
// its deadline and hands the rest to the compaction queue as table jobs,
// which the same function consumes in its SQS-triggered mode.

// ErrInvalidJob marks a compaction-queue message that can never be
// processed (malformed, another warehouse, an unknown table): it is logged
// and dropped, and nothing is done for it.
var ErrInvalidJob = errors.New("invalid compaction job")

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

// ParseJob decodes and validates a table job of warehouse. Every error
// wraps ErrInvalidJob and queue.ErrPermanent (never retried).
func ParseJob(body []byte, warehouse string) (Job, error) {
	var j Job
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return j, fmt.Errorf("%w: %w: not a table job (%v)", queue.ErrPermanent, ErrInvalidJob, err)
	}
	if dec.More() {
		return j, fmt.Errorf("%w: %w: trailing data after the job", queue.ErrPermanent, ErrInvalidJob)
	}
	switch {
	case j.V != JobVersion:
		return j, fmt.Errorf("%w: %w: version %d, want %d", queue.ErrPermanent, ErrInvalidJob, j.V, JobVersion)
	case j.Warehouse != warehouse:
		return j, fmt.Errorf("%w: %w: job for warehouse %q, this function maintains %q", queue.ErrPermanent, ErrInvalidJob, j.Warehouse, warehouse)
	case j.Table == "":
		return j, fmt.Errorf("%w: %w: no table", queue.ErrPermanent, ErrInvalidJob)
	case j.Attempt < 0 || j.Attempt > maxJobAttempt:
		return j, fmt.Errorf("%w: %w: attempt %d out of range [0,%d]", queue.ErrPermanent, ErrInvalidJob, j.Attempt, maxJobAttempt)
	}
	return j, nil
}

// maxJobAttempt bounds the attempt field (the backoff is capped long before).
const maxJobAttempt = 1 << 20

// Retry backoff of a failed table: RetryBackoffBase doubled per attempt,
// capped at RetryBackoffMax (fleet.Backoff in ModeJobs, the one policy:
// the compactor's runner records failures in the fleet index with the same
// base and cap, and a retry job's not-before is the retry time recorded
// there). A failing table is thus retried for ever, at most once per
// RetryBackoffMax, in its own invocation, and never delays other tables
// (they are separate messages and separate invocations).
const (
	RetryBackoffBase = 1 * time.Minute // fleet.BackoffOf(fleet.ModeJobs)
	RetryBackoffMax  = 1 * time.Hour
	// BusyDelay: a job whose table is locked by another run comes back
	// after this long (the holder may have planned before the change that
	// sent the job).
	BusyDelay = 5 * time.Minute
	// maxSQSDelay is SQS's longest message delay; a later NotBefore is
	// reached by re-sending the job with the remaining delay.
	maxSQSDelay = 15 * time.Minute
	// MaxJobWait bounds a job's not-before: no job is ever sent with a
	// wait beyond RetryBackoffMax, and MaxJobWait - RetryBackoffMax = 15 min
	// covers clock skew between invocations (< 1 min) with room. A job
	// whose not-before is further ahead is invalid input, dropped.
	MaxJobWait = RetryBackoffMax + 15*time.Minute
)

// RetryBackoff is the delay before attempt (1-based) of a failed table.
func RetryBackoff(attempt int) time.Duration {
	return fleet.Backoff{Base: RetryBackoffBase, Max: RetryBackoffMax}.Delay(attempt)
}

// OutJob is a job to send, made visible after Delay (at most 15 min; the
// rest of a longer wait is the job's NotBefore).
type OutJob struct {
	Job   Job
	Delay time.Duration
}

// JobSender sends table jobs to the compaction queue.
type JobSender interface {
	SendJobs(ctx context.Context, jobs []OutJob) error
}

// SQSBatchSender is the part of *sqs.Client SQSJobSender uses.
type SQSBatchSender interface {
	SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
}

// SQSJobSender sends jobs with SendMessageBatch (10 a request), each with
// its own DelaySeconds.
type SQSJobSender struct {
	Client   SQSBatchSender
	QueueURL string
}

// SendJobs sends every job; the error lists those not accepted (some may
// have been sent: a job sent twice is harmless).
// Batches are sent SendJobsInFlight at a time (10,000 jobs: 1,000 requests).
func (s SQSJobSender) SendJobs(ctx context.Context, jobs []OutJob) error {
	var mu sync.Mutex
	var errs []error
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	var g errgroup.Group
	g.SetLimit(SendJobsInFlight)
	for start := 0; start < len(jobs); start += queue.MaxBatchMessages {
		batch := jobs[start:min(start+queue.MaxBatchMessages, len(jobs))]
		in := &sqs.SendMessageBatchInput{QueueUrl: aws.String(s.QueueURL)}
		for i, j := range batch {
			body, err := json.Marshal(j.Job)
			if err != nil {
				return err
			}
			in.Entries = append(in.Entries, sqstypes.SendMessageBatchRequestEntry{
				Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(string(body)),
				DelaySeconds: int32(min(max(j.Delay, 0), maxSQSDelay).Round(time.Second) / time.Second),
			})
		}
		g.Go(func() error {
			out, err := s.Client.SendMessageBatch(ctx, in)
			if err != nil {
				fail(fmt.Errorf("send %d table jobs: %w", len(batch), err))
				return nil
			}
			for _, f := range out.Failed {
				i, _ := strconv.Atoi(aws.ToString(f.Id))
				if i >= 0 && i < len(batch) {
					fail(fmt.Errorf("send table job %s: %s: %s", batch[i].Job.Table, aws.ToString(f.Code), aws.ToString(f.Message)))
				}
			}
			return nil
		})
	}
	_ = g.Wait()
	return errors.Join(errs...)
}

// SendJobsInFlight is how many SendMessageBatch requests SQSJobSender has
// in flight at once.
const SendJobsInFlight = 8

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
	// MarkerStale: RetryBackoffMax plus a 15-minute invocation plus margin.
	MarkerStale = RetryBackoffMax + 30*time.Minute
)

// Marker is the body of a retry marker (fleet.Marker).
type Marker = fleet.Marker

// markerStale reports whether a marker outlived its job (the job was
// lost): now - At > MarkerStale. A marker dated more than inlineRunSkew
// ahead of now (a forged or damaged one) is stale too: it would otherwise
// count as fresh for ever.
func (d *Deps) markerStale(mk Marker, now time.Time) bool {
	return now.Sub(mk.At) > MarkerStale || mk.At.Sub(now) > inlineRunSkew
}

// resendLost rewrites a stale marker and returns the job to resend.
func (d *Deps) resendLost(ctx, wctx context.Context, log *slog.Logger, name string, mk Marker, now time.Time) OutJob {
	log.WarnContext(ctx, "retry marker without a job; resending it", "table", name, "attempt", mk.Attempt, "marker_at", mk.At)
	mk.Table, mk.At, mk.Reason, mk.NotBefore = name, now, ReasonLost, time.Time{}
	mk.Attempt = min(max(mk.Attempt, 0), maxJobAttempt)
	if err := d.putMarker(wctx, mk); err != nil {
		log.WarnContext(ctx, "retry marker not rewritten", "table", name, "err", err)
	}
	return OutJob{Job: d.job(name, mk.Attempt, ReasonLost)}
}

func (d *Deps) putMarker(ctx context.Context, m Marker) error {
	return fleet.PutMarker(ctx, d.Store, table.NormalizeRoot(d.Root), m)
}

// readMarker reads one table's retry marker (one GET); ok false if it has
// none. A body that is not JSON is a stale marker (zero At).
func (d *Deps) readMarker(ctx context.Context, name string) (Marker, bool, error) {
	return fleet.ReadMarker(ctx, d.Store, table.NormalizeRoot(d.Root), name)
}

func (d *Deps) deleteMarker(ctx context.Context, name string) error {
	return fleet.DeleteMarker(ctx, d.Store, table.NormalizeRoot(d.Root), name)
}

// markers reads every retry marker (one LIST, and one GET per marker: only
// tables in retry have one). A marker that cannot be read counts as fresh
// (a duplicate job is the worse outcome of guessing wrong); one whose body
// is not a marker (not JSON) is logged and counts as stale, so its table is
// resent a job.
func (d *Deps) markers(ctx, wctx context.Context, log *slog.Logger) (map[string]Marker, error) {
	return d.readMarkers(wctx, func(key string, err error) {
		log.WarnContext(ctx, "retry marker is not a marker; taken for stale (its table is resent a job)", "key", key, "err", err)
	})
}

func (d *Deps) readMarkers(ctx context.Context, bad func(string, error)) (map[string]Marker, error) {
	return fleet.ReadMarkers(ctx, d.Store, table.NormalizeRoot(d.Root), d.Clock.Now(), bad)
}
