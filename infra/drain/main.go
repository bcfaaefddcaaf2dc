// Command drain turns the local cleanup queue's messages into the SQS
// events Lambda's event source mapping would send, posts each batch to a
// cleaner under aws-lambda-rie (-invoke), and deletes what the cleaner
// acknowledged (everything but its batchItemFailures), until the queue has
// no visible message. Failed messages stay hidden for the queue's
// visibility timeout, as on AWS. `make drain` runs it (infra/invoke.sh).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

func main() {
	invoke := flag.String("invoke", "", "aws-lambda-rie invocation URL of the cleaner")
	queue := flag.String("queue", "", "cleanup queue URL")
	endpoint := flag.String("endpoint", "", "SQS endpoint (the local stack's moto_server)")
	max := flag.Int("max-batches", 10000, "stop after this many batches")
	flag.Parse()
	if *invoke == "" || *queue == "" {
		fmt.Fprintln(os.Stderr, "drain: -invoke and -queue are required")
		os.Exit(2)
	}
	if err := run(context.Background(), *invoke, *queue, *endpoint, *max); err != nil {
		fmt.Fprintln(os.Stderr, "drain:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, invoke, queueURL, endpoint string, maxBatches int) error {
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return err
	}
	c := sqs.NewFromConfig(cfg, func(o *sqs.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
	})
	attrs, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(queueURL),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn}})
	if err != nil {
		return fmt.Errorf("queue %s: %w", queueURL, err)
	}
	arn := attrs.Attributes[string(types.QueueAttributeNameQueueArn)]
	// A receive whose response was lost (an attempt the SDK retried after
	// the server had answered, seen under load) leaves its messages hidden
	// for the visibility timeout although nobody holds them: the drain
	// waits them out, at most the queue's visibility timeout plus a margin,
	// instead of calling a queue empty that is not.
	var visibility time.Duration
	if va, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(queueURL),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameVisibilityTimeout}}); err == nil {
		if n, err := strconv.Atoi(va.Attributes[string(types.QueueAttributeNameVisibilityTimeout)]); err == nil {
			visibility = time.Duration(n) * time.Second
		}
	}
	var waitUntil time.Time
	var total, deleted, failed int
	for b := 0; b < maxBatches; b++ {
		out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(queueURL), MaxNumberOfMessages: 10,
			WaitTimeSeconds: 1, MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll}})
		if err != nil {
			return err
		}
		if len(out.Messages) == 0 {
			hidden, _ := notVisible(ctx, c, queueURL)
			if hidden > failed && visibility > 0 {
				if waitUntil.IsZero() {
					waitUntil = time.Now().Add(visibility + 5*time.Second)
					fmt.Printf("drain: %d messages hidden that this drain did not fail (a lost receive?): waiting up to %s for them\n", hidden-failed, visibility+5*time.Second)
				}
				if time.Now().Before(waitUntil) {
					time.Sleep(2 * time.Second)
					b--
					continue
				}
			}
			fmt.Printf("drain: %d messages in %d batches: %d acknowledged, %d reported failed; %d still hidden (retried after the visibility timeout)\n",
				total, b, deleted, failed, hidden)
			return nil
		}
		ev := events.SQSEvent{}
		for _, m := range out.Messages {
			ev.Records = append(ev.Records, events.SQSMessage{MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle),
				Body: aws.ToString(m.Body), Attributes: m.Attributes, EventSource: "aws:sqs", EventSourceARN: arn, AWSRegion: cfg.Region})
		}
		body, _ := json.Marshal(ev)
		resp, err := post(ctx, invoke, body)
		if err != nil {
			return err
		}
		var r struct {
			events.SQSEventResponse
			ErrorMessage string `json:"errorMessage"`
		}
		if err := json.Unmarshal(resp, &r); err != nil {
			return fmt.Errorf("cleaner response %s: %w", resp, err)
		}
		if r.ErrorMessage != "" {
			return fmt.Errorf("the cleaner failed the batch (its messages reappear after the visibility timeout): %s", r.ErrorMessage)
		}
		bad := map[string]bool{}
		for _, f := range r.BatchItemFailures {
			bad[f.ItemIdentifier] = true
		}
		for _, m := range out.Messages {
			total++
			if bad[aws.ToString(m.MessageId)] {
				failed++
				continue
			}
			if _, err := c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(queueURL), ReceiptHandle: m.ReceiptHandle}); err != nil {
				return err
			}
			deleted++
		}
		fmt.Printf("drain: batch %d: %d messages, %d failed\n", b+1, len(out.Messages), len(r.BatchItemFailures))
	}
	return errors.New("stopped after -max-batches batches")
}

func notVisible(ctx context.Context, c *sqs.Client, queueURL string) (int, error) {
	a, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(queueURL),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(a.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessagesNotVisible)])
}

func post(ctx context.Context, url string, body []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("invoke the cleaner: %w", err)
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}
