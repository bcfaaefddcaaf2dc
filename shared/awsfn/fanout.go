package awsfn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
)

// Fan-out (issue 11, docs/aws.md "Fan-out and notifications"): the
// scheduled compactor maintains tables itself while it can finish within
// its deadline and hands the rest to the compaction queue as table jobs,
// which the same function consumes in its SQS-triggered mode. The policy
// (inline or queued, jobs, follow-ups, retry markers, inline run records)
// is shared/fleet's (fleet.Fanout); this package parses the jobs and sends
// them.

// ErrInvalidJob marks a compaction-queue message that can never be
// processed (malformed, another warehouse, an unknown table): it is logged
// and dropped, and nothing is done for it.
var ErrInvalidJob = errors.New("invalid compaction job")

// Job is one table job on the compaction queue (fleet.Job: the fan-out's
// policy builds them; this package parses and sends them).
type Job = fleet.Job

// OutJob is a job to send (fleet.OutJob).
type OutJob = fleet.OutJob

// JobSender sends table jobs to the compaction queue (fleet.JobSender;
// SQSJobSender is the deployment's).
type JobSender = fleet.JobSender

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
	case j.V != fleet.JobVersion:
		return j, fmt.Errorf("%w: %w: version %d, want %d", queue.ErrPermanent, ErrInvalidJob, j.V, fleet.JobVersion)
	case j.Warehouse != warehouse:
		return j, fmt.Errorf("%w: %w: job for warehouse %q, this function maintains %q", queue.ErrPermanent, ErrInvalidJob, j.Warehouse, warehouse)
	case j.Table == "":
		return j, fmt.Errorf("%w: %w: no table", queue.ErrPermanent, ErrInvalidJob)
	case j.Attempt < 0 || j.Attempt > fleet.MaxJobAttempt:
		return j, fmt.Errorf("%w: %w: attempt %d out of range [0,%d]", queue.ErrPermanent, ErrInvalidJob, j.Attempt, fleet.MaxJobAttempt)
	}
	return j, nil
}

// maxSQSDelay is SQS's longest message delay; a later NotBefore is
// reached by re-sending the job with the remaining delay.
const maxSQSDelay = 15 * time.Minute

// SQSBatchSender is the part of *sqs.Client SQSJobSender uses.
type SQSBatchSender interface {
	SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
}

// SQSJobSender sends jobs with SendMessageBatch (10 a request), each with
// its own DelaySeconds and its table as its MessageGroupId (SQS fair
// queues: one table's jobs do not delay the others').
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
				MessageGroupId: groupID(j.Job.Table), // fair queue: docs/aws.md "Fair queues"
				DelaySeconds:   int32(min(max(j.Delay, 0), maxSQSDelay).Round(time.Second) / time.Second),
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

// groupID is a job's message group: its table (nil: none).
func groupID(table string) *string {
	if table == "" {
		return nil
	}
	return aws.String(table)
}

// SendJobsInFlight is how many SendMessageBatch requests SQSJobSender has
// in flight at once.
const SendJobsInFlight = 8
