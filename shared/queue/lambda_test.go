package queue

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
)

func sqsEvent(bodies ...string) events.SQSEvent {
	var ev events.SQSEvent
	for i, b := range bodies {
		ev.Records = append(ev.Records, events.SQSMessage{
			MessageId: fmt.Sprintf("id-%d", i), Body: b, ReceiptHandle: "r",
			Attributes: map[string]string{"ApproximateReceiveCount": "1"},
		})
	}
	return ev
}

func lambdaHandler(_ context.Context, body []byte) error {
	switch string(body) {
	case "malformed":
		return fmt.Errorf("decode: %w", ErrPermanent)
	case "throttled":
		return errors.New("503 SlowDown")
	}
	return nil
}

func failedIDs(resp events.SQSEventResponse) string {
	var ids []string
	for _, f := range resp.BatchItemFailures {
		ids = append(ids, f.ItemIdentifier)
	}
	return strings.Join(ids, ",")
}

func TestHandleSQSEvent(t *testing.T) {
	var logs bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&logs, nil))
	resp, err := HandleSQSEvent(context.Background(), sqsEvent("ok", "throttled", "malformed", "ok", "throttled"), lambdaHandler, logger)
	if err != nil || failedIDs(resp) != "id-1,id-4" {
		t.Errorf("response %+v %v, want failures id-1,id-4", resp, err)
	}
	if !strings.Contains(logs.String(), `"message_id":"id-2"`) || !strings.Contains(logs.String(), `"level":"ERROR"`) {
		t.Errorf("permanent failure not logged: %s", logs.String())
	}

	resp, err = HandleSQSEvent(context.Background(), sqsEvent("ok", "malformed"), lambdaHandler, quiet)
	if err != nil || resp.BatchItemFailures != nil {
		t.Errorf("all handled: %+v %v, want no failures", resp, err)
	}

	// Out of time: records not started are reported for retry.
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	resp, err = HandleSQSEvent(ctx, sqsEvent("a", "b", "c"), func(context.Context, []byte) error { n++; cancel(); return nil }, quiet)
	if err != nil || n != 1 || failedIDs(resp) != "id-1,id-2" {
		t.Errorf("cancelled: %+v %v after %d", resp, err, n)
	}

	// A failed record without an id fails the whole batch rather than
	// reporting an empty identifier.
	ev := sqsEvent("throttled", "throttled")
	ev.Records[0].MessageId = ""
	resp, err = HandleSQSEvent(context.Background(), ev, lambdaHandler, quiet)
	if err == nil || len(resp.BatchItemFailures) != 0 {
		t.Errorf("failed record without id: %+v %v, want an error", resp, err)
	}
	ev = sqsEvent("ok", "malformed")
	ev.Records[1].MessageId = ""
	if resp, err = HandleSQSEvent(context.Background(), ev, lambdaHandler, quiet); err != nil || resp.BatchItemFailures != nil {
		t.Errorf("permanent failure without id: %+v %v", resp, err)
	}
}
