package awsfn

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"

	"github.com/aws/aws-lambda-go/events"

	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/queue"
)

// Clean is the cleaner's handler: an SQS batch of prune ranges, each
// processed with no lock held, a bounded number of deletes per message (the
// policy's MaxKeysPerRun; the rest goes back to the queue as a
// continuation). The response lists the messages to retry
// (ReportBatchItemFailures); a malformed or foreign message is logged at
// error level, counted in the MessagesDropped metric and dropped, never
// retried. Messages not started before the deadline minus the margin are
// listed for retry.
func (d *Deps) Clean(ctx context.Context, raw json.RawMessage) (events.SQSEventResponse, error) {
	log := d.logger(ctx)
	ev, err := ParseSQS(RoleCleaner, raw)
	if err != nil {
		log.ErrorContext(ctx, "rejected event", "err", err)
		return events.SQSEventResponse{}, err
	}
	cat, err := d.Catalog(ctx)
	if err != nil {
		return events.SQSEventResponse{}, err
	}
	m := d.metrics(RoleCleaner)
	cl := &maintenance.Cleaner{
		Store: d.Store, Tables: cat, Requeue: maintenance.QueueEnqueuer{Q: d.Queue}, Logger: log,
		OpenOpts: d.tableOptions(), Metrics: m,
	}
	var ok, dropped, keys, continued atomic.Int64
	h := func(ctx context.Context, body []byte) error {
		res, err := cl.Clean(ctx, body)
		keys.Add(int64(res.DataKeys + res.ManifestKeys))
		switch {
		case err == nil:
			ok.Add(1)
			if res.Continuation != nil {
				continued.Add(1)
			}
		case errors.Is(err, queue.ErrPermanent):
			dropped.Add(1)
		}
		return err
	}
	wctx, cancel := d.workContext(ctx, d.Config.Margin)
	defer cancel()
	resp, err := queue.HandleSQSEvent(wctx, ev, h, log)
	m.Count("MessagesCleaned", int(ok.Load()))
	m.Count("MessagesDropped", int(dropped.Load()))
	m.Count("MessagesRetried", len(resp.BatchItemFailures))
	m.Count("MessagesContinued", int(continued.Load()))
	if merr := m.Flush(); merr != nil {
		log.WarnContext(ctx, "metrics not written", "err", merr)
	}
	log.InfoContext(ctx, "cleaner batch", "records", len(ev.Records), "cleaned", ok.Load(), "dropped", dropped.Load(),
		"retry", len(resp.BatchItemFailures), "keys_deleted", keys.Load())
	return resp, err
}
