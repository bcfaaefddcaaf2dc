package awsfn_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tablekeep/tablekeep/shared/internal/fakeclock"
	"github.com/tablekeep/tablekeep/shared/internal/testkit"
	"github.com/tablekeep/tablekeep/shared/table"
)

func randomName(prefix string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// registrySchema is the shape of the seed's registry: a name key and a URI.
var registrySchema = arrow.NewSchema([]arrow.Field{
	{Name: "name", Type: arrow.BinaryTypes.String},
	{Name: "uri", Type: arrow.BinaryTypes.String},
}, nil)

func row(name, uri string) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, registrySchema)
	defer b.Release()
	b.Field(0).(*array.StringBuilder).Append(name)
	b.Field(1).(*array.StringBuilder).Append(uri)
	return b.NewRecordBatch()
}

func rows(t *testing.T, tb *table.Table) map[string]string {
	t.Helper()
	ctx := context.Background()
	snap, err := tb.Latest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	err = snap.Scan(ctx, table.ScanOptions{}, func(r arrow.RecordBatch) error {
		for i := 0; i < int(r.NumRows()); i++ {
			got[r.Column(0).(*array.String).Value(i)] = r.Column(1).(*array.String).Value(i)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func sameRows(a, b map[string]string) bool { return fmt.Sprint(a) == fmt.Sprint(b) }

type fakeClock = fakeclock.Clock

// receiveEvent receives up to 10 messages (hidden for visibility seconds) as
// the SQS event Lambda's event source mapping would pass to the cleaner.
func receiveEvent(t *testing.T, sqsc *sqs.Client, queueURL string, visibility int32) ([]byte, []sqstypes.Message) {
	t.Helper()
	out, err := sqsc.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
		QueueUrl: aws.String(queueURL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: visibility,
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
	})
	if err != nil {
		t.Fatal(err)
	}
	ev := events.SQSEvent{}
	for _, m := range out.Messages {
		ev.Records = append(ev.Records, events.SQSMessage{
			MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle), Body: aws.ToString(m.Body),
			Attributes: m.Attributes, EventSource: "aws:sqs", EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:cleanup", AWSRegion: "us-east-1",
		})
	}
	raw, _ := json.Marshal(ev)
	return raw, out.Messages
}

// settleBatch does what Lambda does after a batch with
// ReportBatchItemFailures: deletes the messages handled and makes those
// reported as failures visible again (at once, to keep the test short). It
// returns how many were reported.
func settleBatch(t *testing.T, sqsc *sqs.Client, queueURL string, msgs []sqstypes.Message, resp events.SQSEventResponse) int {
	t.Helper()
	ctx := context.Background()
	failed := map[string]bool{}
	for _, f := range resp.BatchItemFailures {
		failed[f.ItemIdentifier] = true
	}
	for _, m := range msgs {
		var err error
		if failed[aws.ToString(m.MessageId)] {
			_, err = sqsc.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(queueURL), ReceiptHandle: m.ReceiptHandle})
		} else {
			_, err = sqsc.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(queueURL), ReceiptHandle: m.ReceiptHandle})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return len(failed)
}

// drainQueue receives batches from queueURL and passes each to handle (the
// cleaner, returning its response), settling each batch as Lambda does,
// until the queue holds no message, visible or not, or a minute passes.
// SQS delivers at least once: a receive whose response is lost (the SDK
// then retries it) leaves its messages hidden, so batches are hidden for
// 5 s only and the loop waits for them rather than stopping at the first
// empty receive. It returns, per body, how many times it was received and
// how many times it was reported for retry.
func drainQueue(t *testing.T, sqsc *sqs.Client, queueURL string, handle func(raw []byte) events.SQSEventResponse) (receives, retried map[string]int) {
	t.Helper()
	receives, retried = map[string]int{}, map[string]int{}
	deadline := time.Now().Add(time.Minute)
	for {
		raw, msgs := receiveEvent(t, sqsc, queueURL, 5)
		if len(msgs) == 0 {
			if testkit.QueueDepth(t, sqsc, queueURL) == 0 {
				return receives, retried
			}
			if time.Now().After(deadline) {
				t.Fatalf("queue not drained after a minute: receives %v", receives)
			}
			continue
		}
		body := map[string]string{}
		for _, m := range msgs {
			receives[aws.ToString(m.Body)]++
			body[aws.ToString(m.MessageId)] = aws.ToString(m.Body)
		}
		resp := handle(raw)
		for _, f := range resp.BatchItemFailures {
			retried[body[f.ItemIdentifier]]++
		}
		settleBatch(t, sqsc, queueURL, msgs, resp)
	}
}
