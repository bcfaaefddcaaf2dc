package awsfn

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"golang.org/x/sync/errgroup"

	"github.com/tablekeep/tablekeep/shared/queue"
	"github.com/tablekeep/tablekeep/shared/telemetry"
	"github.com/tablekeep/tablekeep/shared/warehouse"
)

// minCleanerWindow is the least time between an invocation's start and
// StopBy for the cleaner to defer what it cannot start.
const minCleanerWindow = 5 * time.Second

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
	cl := d.warehouse().NewCleaner(warehouse.Options{Catalog: cat, Logger: log, Metrics: m})
	// Bytes are not measured (3 LISTs a message fewer); no BytesDeleted
	// metric: the compactor logs the prunable manifest bytes.
	cl.SkipSizes = true
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
	resp, err := handleConcurrently(wctx, ev, h, log, CleanerMessagesInFlight)
	m.Count(telemetry.MessagesCleaned, int(ok.Load()))
	m.Count(telemetry.MessagesDropped, int(dropped.Load()))
	m.Count(telemetry.MessagesRetried, len(resp.BatchItemFailures))
	m.Count(telemetry.MessagesContinued, int(continued.Load()))
	m.Count(telemetry.MessagesDeferred, int(deferred.Load()))
	if merr := m.Flush(); merr != nil {
		log.WarnContext(ctx, "metrics not written", "err", merr)
	}
	log.InfoContext(ctx, "cleaner batch", "records", len(ev.Records), "cleaned", ok.Load(), "dropped", dropped.Load(),
		"continued", continued.Load(), "deferred", deferred.Load(),
		"retry", len(resp.BatchItemFailures), "keys_deleted", keys.Load())
	return resp, err
}

// CleanerMessagesInFlight is how many messages of a batch one cleaner
// invocation works on at once. Two overlap one message's change-record
// reads with another's deletes; the deletes of both share the invocation's
// keys-per-second limiter, so the rate per prefix does not grow with it.
// Ranges are independent (each deletes only what its own change records
// list, in any order), so their order does not matter.
const CleanerMessagesInFlight = 2

// handleConcurrently is queue.HandleSQSEvent over ev's records, n at a
// time: each record is handled as a batch of one and the responses merged
// (the failures listed; an error if any record without an id failed).
func handleConcurrently(ctx context.Context, ev events.SQSEvent, h queue.Handler, log *slog.Logger, n int) (events.SQSEventResponse, error) {
	resps := make([]events.SQSEventResponse, len(ev.Records))
	errs := make([]error, len(ev.Records))
	var g errgroup.Group
	g.SetLimit(max(1, n))
	for i, rec := range ev.Records {
		g.Go(func() error {
			one := ev
			one.Records = []events.SQSMessage{rec}
			resps[i], errs[i] = queue.HandleSQSEvent(ctx, one, h, log)
			return nil
		})
	}
	_ = g.Wait()
	var resp events.SQSEventResponse
	for i := range resps {
		if errs[i] != nil {
			return events.SQSEventResponse{}, errors.Join(errs...)
		}
		resp.BatchItemFailures = append(resp.BatchItemFailures, resps[i].BatchItemFailures...)
	}
	return resp, nil
}
