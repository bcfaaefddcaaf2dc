package awsfn

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"time"

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
// retried.
//
// The invocation plans its work from its remaining time (docs/aws.md,
// "Cleaner sizing"): until StopBy = deadline - Margin messages are started;
// a range still being read at StopBy stops at the next change record,
// deletes what it read and sends the rest as a continuation
// (MessagesContinued); a message not started by StopBy is sent back
// unchanged and acknowledged (MessagesDeferred). Neither is reported as
// failed, so running out of time never adds a receive towards the DLQ: a
// fresh copy starts at receive count 1. The time after StopBy finishes the
// deletes in flight and the sends; the handlers' context ends Margin/4
// before the deadline, and a message cut off by it (or whose continuation
// could not be sent) is reported for retry, as before.
// minCleanerWindow is the least time between an invocation's start and
// StopBy for the cleaner to defer what it cannot start.
const minCleanerWindow = 5 * time.Second

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
	if dl, ok := ctx.Deadline(); ok {
		// On d.Clock, which the test-only offset shifts (see workContext).
		stop := dl.Add(-d.Config.Margin).Add(d.Config.ClockOffset)
		if stop.Sub(d.Clock.Now()) >= minCleanerWindow {
			cl.StopBy = stop
		} else {
			// A margin that leaves no time would defer every message
			// forever, silently: fail them instead, visibly (DLQ).
			log.ErrorContext(ctx, "cleaner: the safety margin leaves no time to work; messages are not deferred",
				"margin", d.Config.Margin.String(), "time_left", time.Until(dl).String())
		}
	}
	var ok, dropped, keys, continued, deferred atomic.Int64
	h := func(ctx context.Context, body []byte) error {
		res, err := cl.Clean(ctx, body)
		keys.Add(int64(res.DataKeys + res.ManifestKeys))
		switch {
		case err == nil && res.Deferred:
			deferred.Add(1)
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
	wctx, cancel := d.workContext(ctx, max(d.Config.Margin/4, time.Millisecond))
	defer cancel()
	resp, err := queue.HandleSQSEvent(wctx, ev, h, log)
	m.Count("MessagesCleaned", int(ok.Load()))
	m.Count("MessagesDropped", int(dropped.Load()))
	m.Count("MessagesRetried", len(resp.BatchItemFailures))
	m.Count("MessagesContinued", int(continued.Load()))
	m.Count("MessagesDeferred", int(deferred.Load()))
	if merr := m.Flush(); merr != nil {
		log.WarnContext(ctx, "metrics not written", "err", merr)
	}
	log.InfoContext(ctx, "cleaner batch", "records", len(ev.Records), "cleaned", ok.Load(), "dropped", dropped.Load(),
		"continued", continued.Load(), "deferred", deferred.Load(),
		"retry", len(resp.BatchItemFailures), "keys_deleted", keys.Load())
	return resp, err
}
