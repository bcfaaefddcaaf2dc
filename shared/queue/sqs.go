package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// SQSAPI is the part of *sqs.Client SQSQueue uses.
type SQSAPI interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
	SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
	ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
}

// SQSOptions configure an SQSQueue.
type SQSOptions struct {
	// WaitTime is the long-polling wait of Receive when no message is
	// visible (0 to 20 s, whole seconds). Zero short-polls, which can return
	// nothing while a few messages are queued; set it for production drains.
	WaitTime time.Duration
}

// SQSQueue is a Queue on one SQS queue.
type SQSQueue struct {
	client SQSAPI
	url    string
	opts   SQSOptions
}

var _ Queue = (*SQSQueue)(nil)

// NewSQS returns a Queue on the SQS queue at url.
func NewSQS(client SQSAPI, url string, opts SQSOptions) *SQSQueue {
	return &SQSQueue{client: client, url: url, opts: opts}
}

// SendError reports messages that Send did not get accepted: per-entry
// failures of a batch, and messages not attempted after a failed request.
type SendError struct {
	Failed []SendFailure
	Err    error // the failed request's error, if one failed
}

// SendFailure is one message Send did not get accepted.
type SendFailure struct {
	Index       int // into the msgs passed to Send
	Code        string
	Message     string
	SenderFault bool
}

func (e *SendError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "sqs: %d messages not sent", len(e.Failed))
	for i, f := range e.Failed {
		if i == 3 {
			fmt.Fprintf(&b, "; ...")
			break
		}
		fmt.Fprintf(&b, "; #%d: %s %s", f.Index, f.Code, f.Message)
	}
	if e.Err != nil {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	return b.String()
}

func (e *SendError) Unwrap() error { return e.Err }

// Send implements Queue with SendMessageBatch requests of at most
// MaxBatchMessages messages and MaxBatchBytes of bodies; a message too big
// for a batch goes alone with SendMessage. Every message is checked before
// anything is sent. If some messages are not accepted the error is a
// *SendError listing them.
func (q *SQSQueue) Send(ctx context.Context, msgs []Message) error {
	if err := validate(msgs); err != nil {
		return fmt.Errorf("sqs: %w", err)
	}
	var failed []SendFailure
	notSent := func(from int, err error) error {
		for i := from; i < len(msgs); i++ {
			failed = append(failed, SendFailure{Index: i, Code: "NotSent", Message: "an earlier request failed"})
		}
		return &SendError{Failed: failed, Err: err}
	}
	for start := 0; start < len(msgs); {
		if len(msgs[start].Body) > MaxBatchBytes {
			if _, err := q.client.SendMessage(ctx, q.sendInput(msgs[start])); err != nil {
				return notSent(start, fmt.Errorf("send message %d: %w", start, err))
			}
			start++
			continue
		}
		end, size := start, 0
		for end < len(msgs) && end-start < MaxBatchMessages && size+len(msgs[end].Body) <= MaxBatchBytes {
			size += len(msgs[end].Body)
			end++
		}
		entries := make([]types.SendMessageBatchRequestEntry, 0, end-start)
		for i := start; i < end; i++ {
			in := q.sendInput(msgs[i])
			entries = append(entries, types.SendMessageBatchRequestEntry{
				Id: aws.String(strconv.Itoa(i)), MessageBody: in.MessageBody,
				MessageGroupId: in.MessageGroupId, MessageDeduplicationId: in.MessageDeduplicationId,
			})
		}
		out, err := q.client.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(q.url), Entries: entries})
		if err != nil {
			return notSent(start, fmt.Errorf("send messages %d-%d: %w", start, end-1, err))
		}
		for _, f := range out.Failed {
			i, err := strconv.Atoi(aws.ToString(f.Id))
			if err != nil || i < start || i >= end {
				i = -1 // cannot happen: ids are the indexes sent
			}
			failed = append(failed, SendFailure{Index: i, Code: aws.ToString(f.Code), Message: aws.ToString(f.Message), SenderFault: f.SenderFault})
		}
		start = end
	}
	if len(failed) > 0 {
		return &SendError{Failed: failed}
	}
	return nil
}

func (q *SQSQueue) sendInput(m Message) *sqs.SendMessageInput {
	in := &sqs.SendMessageInput{QueueUrl: aws.String(q.url), MessageBody: aws.String(string(m.Body))}
	if m.GroupKey != "" {
		in.MessageGroupId = aws.String(m.GroupKey)
	}
	if m.DedupID != "" {
		in.MessageDeduplicationId = aws.String(m.DedupID)
	}
	return in
}

// seconds rounds d up to whole seconds, as SQS takes them.
func seconds(d time.Duration) int32 {
	return int32((d + time.Second - 1) / time.Second)
}

// Receive implements Queue with one ReceiveMessage request (so at most
// MaxBatchMessages messages). Visibility is rounded up to whole seconds.
func (q *SQSQueue) Receive(ctx context.Context, n int, visibility time.Duration) ([]Delivery, error) {
	in := &sqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(q.url),
		MaxNumberOfMessages:         int32(min(max(n, 1), MaxBatchMessages)),
		WaitTimeSeconds:             seconds(q.opts.WaitTime),
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameApproximateReceiveCount},
	}
	if visibility > 0 {
		in.VisibilityTimeout = seconds(visibility)
	}
	out, err := q.client.ReceiveMessage(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("sqs: receive: %w", err)
	}
	ds := make([]Delivery, 0, len(out.Messages))
	for _, m := range out.Messages {
		n, _ := strconv.Atoi(m.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)])
		ds = append(ds, Delivery{
			ID: aws.ToString(m.MessageId), Receipt: aws.ToString(m.ReceiptHandle),
			Body: []byte(aws.ToString(m.Body)), ReceiveCount: n,
		})
	}
	return ds, nil
}

// Ack implements Queue with DeleteMessage.
func (q *SQSQueue) Ack(ctx context.Context, d Delivery) error {
	_, err := q.client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(q.url), ReceiptHandle: aws.String(d.Receipt)})
	if err != nil {
		return fmt.Errorf("sqs: delete message %s: %w", d.ID, err)
	}
	return nil
}

// Nack implements Queue with ChangeMessageVisibility (delay rounded up to
// whole seconds).
func (q *SQSQueue) Nack(ctx context.Context, d Delivery, delay time.Duration) error {
	_, err := q.client.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
		QueueUrl: aws.String(q.url), ReceiptHandle: aws.String(d.Receipt), VisibilityTimeout: seconds(max(delay, 0)),
	})
	if err != nil {
		return fmt.Errorf("sqs: change visibility of message %s: %w", d.ID, err)
	}
	return nil
}

// SQSAdminAPI is the part of *sqs.Client CreateQueueWithDLQ uses.
type SQSAdminAPI interface {
	CreateQueue(ctx context.Context, in *sqs.CreateQueueInput, optFns ...func(*sqs.Options)) (*sqs.CreateQueueOutput, error)
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
}

// CreateQueueWithDLQ creates queue name and its dead-letter queue
// name-dlq (name-dlq.fifo for a FIFO name), with a redrive policy moving a
// message to the DLQ once it has been received maxReceiveCount times, and
// the given default visibility timeout. The DLQ keeps messages for the
// maximum 14 days. Creating queues that exist with the same attributes
// succeeds (SQS CreateQueue is idempotent). For tests and bootstrap scripts;
// production queues belong in the infrastructure template.
func CreateQueueWithDLQ(ctx context.Context, client SQSAdminAPI, name string, maxReceiveCount int, visibilityTimeout time.Duration) (queueURL, dlqURL string, err error) {
	if maxReceiveCount < 1 {
		return "", "", errors.New("sqs: maxReceiveCount must be at least 1")
	}
	dlqName, fifo := name+"-dlq", strings.HasSuffix(name, ".fifo")
	attrs := map[string]string{}
	if fifo {
		dlqName = strings.TrimSuffix(name, ".fifo") + "-dlq.fifo"
		attrs[string(types.QueueAttributeNameFifoQueue)] = "true"
	}
	dlqAttrs := map[string]string{string(types.QueueAttributeNameMessageRetentionPeriod): strconv.Itoa(14 * 24 * 3600)}
	for k, v := range attrs {
		dlqAttrs[k] = v
	}
	dlq, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(dlqName), Attributes: dlqAttrs})
	if err != nil {
		return "", "", fmt.Errorf("sqs: create queue %s: %w", dlqName, err)
	}
	got, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: dlq.QueueUrl, AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn},
	})
	if err != nil {
		return "", "", fmt.Errorf("sqs: get ARN of %s: %w", dlqName, err)
	}
	arn := got.Attributes[string(types.QueueAttributeNameQueueArn)]
	if arn == "" {
		return "", "", fmt.Errorf("sqs: queue %s has no ARN", dlqName)
	}
	policy, _ := json.Marshal(struct {
		DeadLetterTargetArn string `json:"deadLetterTargetArn"`
		MaxReceiveCount     string `json:"maxReceiveCount"`
	}{arn, strconv.Itoa(maxReceiveCount)})
	attrs[string(types.QueueAttributeNameRedrivePolicy)] = string(policy)
	attrs[string(types.QueueAttributeNameVisibilityTimeout)] = strconv.Itoa(int(seconds(visibilityTimeout)))
	q, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	if err != nil {
		return "", "", fmt.Errorf("sqs: create queue %s: %w", name, err)
	}
	return aws.ToString(q.QueueUrl), aws.ToString(dlq.QueueUrl), nil
}
