package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/tablekeep/tablekeep/shared/awsfn"
	"github.com/tablekeep/tablekeep/shared/clock"
	"github.com/tablekeep/tablekeep/shared/lock"
	"github.com/tablekeep/tablekeep/shared/objstore"
)

// FleetScheduled is one scheduled compactor invocation (awsfn, fan-out
// mode) over the simulated fleet, run in real time with every object-store
// request delayed by the latency profile: measured, not modelled.
type FleetScheduled struct {
	Config           string // how the fan-out was configured
	Registered, Idle int
	Inline           int // tables maintained inside the invocation
	Jobs             int // table jobs sent to the compaction queue
	Stopped          string
	Wall             time.Duration
	Requests         objstore.Counts
}

// sqsJobs stands in for the compaction queue: SendMessageBatch carries 10
// jobs and awsfn.SQSJobSender keeps SendJobsInFlight requests in flight,
// each taking SQSBatchLatency.
type sqsJobs struct{ n int }

// SQSBatchLatency is the assumed round trip of one SQS SendMessageBatch.
const SQSBatchLatency = 20 * time.Millisecond

func (s *sqsJobs) SendJobs(ctx context.Context, jobs []awsfn.OutJob) error {
	s.n += len(jobs)
	reqs := (len(jobs) + 9) / 10
	rounds := (reqs + awsfn.SendJobsInFlight - 1) / awsfn.SendJobsInFlight
	return clock.Sleep(ctx, time.Duration(rounds)*SQSBatchLatency)
}

var scheduledEvent = []byte(`{"version":"0","id":"bench","detail-type":"Scheduled Event","source":"aws.events",` +
	`"account":"123456789012","time":"2026-01-01T00:00:00Z","region":"us-east-1","resources":[],"detail":{}}`)

// measureScheduled runs one scheduled invocation of the compactor over w
// after another period of writes: inlineTables/inlineTime as the template's
// InlineTables/InlineTime. Its clock is real time shifted to the fleet's
// simulated time, so the invocation's time budgets run in real time.
func measureScheduled(ctx context.Context, w *fleetWorld, p objstore.Profile, inlineTables int, inlineTime time.Duration, desc string) (FleetScheduled, error) {
	cnt := objstore.NewCounting(w.cs)
	clock := lock.AheadClock{Clock: clock.System(), Ahead: w.clock.Now().Sub(time.Now())}
	jobs := &sqsJobs{}
	d := &awsfn.Deps{
		Config: awsfn.Config{Role: awsfn.RoleCompactor, Warehouse: "s3://bench/wh", Bucket: "bench", Prefix: "wh",
			Margin: 10 * time.Second, Lease: 5 * time.Minute, CompactionQueueURL: "https://sqs.us-east-1.amazonaws.com/123456789012/bench-compaction",
			InlineTables: inlineTables, InlineTime: inlineTime, LogLevel: "warn"},
		Logger: slog.New(slog.DiscardHandler), Clock: clock, Store: objstore.NewLatency(cnt, p, nil), Root: "wh",
		Locker: w.locker, Queue: w.q, Jobs: jobs, Metrics: io.Discard,
	}
	// A Lambda invocation's deadline: the template's compactor timeout.
	ictx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	defer cancel()
	start := time.Now()
	out, err := d.HandleCompactor(ictx, scheduledEvent)
	wall := time.Since(start)
	if err != nil {
		return FleetScheduled{}, fmt.Errorf("scheduled invocation: %w", err)
	}
	sum, ok := out.(awsfn.CompactSummary)
	if !ok {
		return FleetScheduled{}, fmt.Errorf("scheduled invocation returned %T", out)
	}
	return FleetScheduled{Config: desc, Registered: sum.Registered, Idle: sum.Idle, Inline: len(sum.Tables), Jobs: jobs.n,
		Stopped: sum.Stopped, Wall: wall, Requests: cnt.Counts()}, nil
}
