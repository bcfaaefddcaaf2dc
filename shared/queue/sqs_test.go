package queue

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tablekeep/tablekeep/shared/internal/testkit"
)

func queueName(t *testing.T) string {
	var rnd [4]byte
	rand.Read(rnd[:])
	name := strings.NewReplacer("/", "-", "_", "-").Replace(t.Name())
	return "tk-" + name + "-" + hex.EncodeToString(rnd[:])
}

// countingSQS counts requests and can fail chosen batch entries.
type countingSQS struct {
	SQSAPI
	batches, singles atomic.Int32
	failIDs          map[string]bool // SendMessageBatch entry ids to report as failed
}

func (c *countingSQS) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, o ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	c.batches.Add(1)
	var keep, failed []types.SendMessageBatchRequestEntry
	for _, e := range in.Entries {
		if c.failIDs[aws.ToString(e.Id)] {
			failed = append(failed, e)
		} else {
			keep = append(keep, e)
		}
	}
	out := &sqs.SendMessageBatchOutput{}
	if len(keep) > 0 {
		cp := *in
		cp.Entries = keep
		var err error
		if out, err = c.SQSAPI.SendMessageBatch(ctx, &cp, o...); err != nil {
			return nil, err
		}
	}
	for _, e := range failed {
		out.Failed = append(out.Failed, types.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InternalError"), Message: aws.String("injected")})
	}
	return out, nil
}

func (c *countingSQS) SendMessage(ctx context.Context, in *sqs.SendMessageInput, o ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	c.singles.Add(1)
	return c.SQSAPI.SendMessage(ctx, in, o...)
}

// receiveAll receives until n distinct messages have arrived.
func receiveAll(t *testing.T, q Queue, n int, vis time.Duration) []Delivery {
	t.Helper()
	var all []Delivery
	seen := map[string]bool{}
	for tries := 0; len(seen) < n; tries++ {
		if tries > 50 {
			t.Fatalf("received %d of %d messages", len(seen), n)
		}
		ds, err := q.Receive(context.Background(), 10, vis)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			if !seen[d.ID] {
				seen[d.ID] = true
				all = append(all, d)
			}
		}
	}
	return all
}

func TestSQSBatchSend(t *testing.T) {
	ctx := context.Background()
	client := testkit.SQSClient(t)
	url, _, err := CreateQueueWithDLQ(ctx, client, queueName(t), 5, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c := &countingSQS{SQSAPI: client}
	q := NewSQS(c, url, SQSOptions{})

	if err := q.Send(ctx, bodies(25)); err != nil {
		t.Fatal(err)
	}
	if c.batches.Load() != 3 || c.singles.Load() != 0 {
		t.Errorf("25 messages took %d batches and %d single sends, want 3 and 0", c.batches.Load(), c.singles.Load())
	}
	var got []string
	for _, d := range receiveAll(t, q, 25, time.Minute) {
		if d.ReceiveCount != 1 || d.Receipt == "" {
			t.Errorf("delivery %+v", d)
		}
		got = append(got, string(d.Body))
		if err := q.Ack(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	var want []string
	for _, m := range bodies(25) {
		want = append(want, string(m.Body))
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("received %v", got)
	}

	// Big bodies: two 100 KiB bodies fill a 256 KiB batch; a 300 KiB body
	// goes alone.
	c.batches.Store(0)
	big := strings.Repeat("x", 100<<10)
	msgs := []Message{{Body: []byte(big)}, {Body: []byte(big)}, {Body: []byte(big)}, {Body: []byte(strings.Repeat("y", 300<<10))}, {Body: []byte("small")}}
	err = q.Send(ctx, msgs)
	if c.batches.Load() != 3 || c.singles.Load() != 1 {
		t.Errorf("big messages took %d batches and %d single sends, want 3 and 1 (err %v)", c.batches.Load(), c.singles.Load(), err)
	}
	t.Logf("300 KiB message on moto: %v", err) // moto's default MaximumMessageSize is 256 KiB

	// Oversized and invalid messages are refused before anything is sent.
	c.batches.Store(0)
	err = q.Send(ctx, []Message{{Body: []byte("fine")}, {Body: make([]byte, MaxMessageBytes+1)}})
	if !errors.Is(err, ErrMessageTooLarge) || c.batches.Load() != 0 {
		t.Errorf("oversized message: %v after %d batches", err, c.batches.Load())
	}

	// Per-entry failures come back as a *SendError naming them.
	c.failIDs = map[string]bool{"3": true, "12": true}
	err = q.Send(ctx, bodies(15))
	var se *SendError
	if !errors.As(err, &se) || len(se.Failed) != 2 || se.Failed[0].Index != 3 || se.Failed[1].Index != 12 || se.Failed[0].Code != "InternalError" {
		t.Errorf("partial batch failure: %v", err)
	}
}

// A handler failure reported through the Lambda response helper is
// redelivered after the (1 s) visibility timeout; successes and permanent
// failures are deleted, as the Lambda event source mapping does.
func TestSQSLambdaPartialBatchFailureRedelivers(t *testing.T) {
	ctx := context.Background()
	client := testkit.SQSClient(t)
	url, _, err := CreateQueueWithDLQ(ctx, client, queueName(t), 5, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	q := NewSQS(client, url, SQSOptions{})
	if err := q.Send(ctx, []Message{{Body: []byte("ok")}, {Body: []byte("throttled")}, {Body: []byte("malformed")}, {Body: []byte("ok")}}); err != nil {
		t.Fatal(err)
	}
	ds := receiveAll(t, q, 4, 0) // queue default visibility: 1 s
	start := time.Now()
	var ev events.SQSEvent
	for _, d := range ds {
		ev.Records = append(ev.Records, events.SQSMessage{
			MessageId: d.ID, ReceiptHandle: d.Receipt, Body: string(d.Body),
			Attributes: map[string]string{"ApproximateReceiveCount": fmt.Sprint(d.ReceiveCount)},
		})
	}
	resp, err := HandleSQSEvent(ctx, ev, lambdaHandler, quiet)
	if err != nil || len(resp.BatchItemFailures) != 1 {
		t.Fatalf("response %+v %v, want one failure", resp, err)
	}
	failedID := resp.BatchItemFailures[0].ItemIdentifier
	for _, d := range ds {
		if d.ID != failedID {
			if err := q.Ack(ctx, d); err != nil {
				t.Fatal(err)
			}
		} else if string(d.Body) != "throttled" {
			t.Errorf("reported %q as failed", d.Body)
		}
	}
	// Long-poll (the one real wait in these tests) until it is visible again.
	// The poll starts after the receive, so a message hidden for the
	// queue's 1 s is visible within its 2 s wait, however long the steps
	// above took on a loaded machine (a bound on the time since the
	// receive would depend on that).
	lq := NewSQS(client, url, SQSOptions{WaitTime: 2 * time.Second})
	again, err := lq.Receive(ctx, 10, 30*time.Second)
	if err != nil || len(again) != 1 {
		t.Fatalf("redelivery %v after the receive: %+v %v", time.Since(start), again, err)
	}
	if d := again[0]; d.ID != failedID || d.ReceiveCount != 2 {
		t.Errorf("redelivered %+v, want %s with receive count 2", d, failedID)
	}
	if err := lq.Ack(ctx, again[0]); err != nil {
		t.Fatal(err)
	}
	if left, err := q.Receive(ctx, 10, 0); err != nil || len(left) != 0 {
		t.Errorf("left in queue: %+v %v", left, err)
	}
}

func TestSQSDeadLetterAfterMaxReceives(t *testing.T) {
	ctx := context.Background()
	client := testkit.SQSClient(t)
	url, dlqURL, err := CreateQueueWithDLQ(ctx, client, queueName(t), 2, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	q, dlq := NewSQS(client, url, SQSOptions{}), NewSQS(client, dlqURL, SQSOptions{})
	if err := q.Send(ctx, []Message{{Body: []byte("poison")}}); err != nil {
		t.Fatal(err)
	}
	var id string
	for i := 1; i <= 2; i++ {
		d := receiveOne(t, q, 0)
		if d.ReceiveCount != i {
			t.Errorf("receive %d: count %d", i, d.ReceiveCount)
		}
		id = d.ID
		if err := q.Nack(ctx, d, 0); err != nil { // fail it, visible again at once
			t.Fatal(err)
		}
	}
	if ds, err := q.Receive(ctx, 10, 0); err != nil || len(ds) != 0 {
		t.Fatalf("third receive with maxReceiveCount 2: %+v %v, want nothing", ds, err)
	}
	d := receiveOne(t, dlq, 0)
	if d.ID != id || string(d.Body) != "poison" {
		t.Errorf("DLQ holds %+v, want message %s", d, id)
	}

	// Drain with the server-side redrive: failures just stay queued.
	if err := q.Send(ctx, bodies(3)); err != nil {
		t.Fatal(err)
	}
	handled := 0
	st, err := Drain(ctx, q, func(context.Context, []byte) error { handled++; return nil }, DrainOptions{Logger: quiet})
	if err != nil || st.Succeeded != 3 || handled != 3 {
		t.Errorf("drain: %+v %v", st, err)
	}
}
