package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/aws/aws-lambda-go/events"
)

// HandleSQSEvent runs h on each record of an SQS-triggered Lambda invocation
// and returns the response for an event source mapping with
// ReportBatchItemFailures: Lambda deletes every record not listed in
// BatchItemFailures and redelivers the listed ones.
//
//   - success: not listed (deleted);
//   - an error wrapping ErrPermanent: logged at error level and not listed, so
//     a malformed message is deleted instead of retried until the DLQ;
//   - any other error: listed, so it is retried (and redriven to the DLQ
//     after the queue's maxReceiveCount);
//   - records not started because ctx ended (the invocation is running out
//     of time): listed.
//
// An identifier in BatchItemFailures is never empty (an empty one fails the
// whole batch). If a record that must be retried has no message id, the
// returned error makes Lambda retry the whole batch instead, which is safe
// because handlers are idempotent. Use it as the Lambda handler:
//
//	lambda.Start(func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
//		return queue.HandleSQSEvent(ctx, ev, h, logger)
//	})
func HandleSQSEvent(ctx context.Context, ev events.SQSEvent, h Handler, logger *slog.Logger) (events.SQSEventResponse, error) {
	if logger == nil {
		logger = slog.Default()
	}
	var resp events.SQSEventResponse
	var noID int
	for _, rec := range ev.Records {
		attrs := []any{"message_id", rec.MessageId, "receive_count", rec.Attributes["ApproximateReceiveCount"], "queue", rec.EventSourceARN}
		err := ctx.Err()
		if err == nil {
			err = h(ctx, []byte(rec.Body))
		}
		switch {
		case err == nil:
			continue
		case errors.Is(err, ErrPermanent):
			logger.ErrorContext(ctx, "queue: dropping message that failed permanently", append(attrs, "err", err)...)
			continue
		case rec.MessageId == "":
			noID++
			logger.ErrorContext(ctx, "queue: message without id failed; failing the whole batch", append(attrs, "err", err)...)
			continue
		}
		logger.WarnContext(ctx, "queue: message failed; reporting it for retry", append(attrs, "err", err)...)
		resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: rec.MessageId})
	}
	if noID > 0 {
		return events.SQSEventResponse{}, fmt.Errorf("queue: %d failed messages have no message id; retrying the whole batch", noID)
	}
	return resp, nil
}
