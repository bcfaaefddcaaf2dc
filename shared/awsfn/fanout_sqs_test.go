package awsfn_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tablekeep/tablekeep/shared/awsfn"
	fleetpkg "github.com/tablekeep/tablekeep/shared/fleet"
	"github.com/tablekeep/tablekeep/shared/internal/testkit"
	"github.com/tablekeep/tablekeep/shared/queue"
)

// TestSQSJobSender sends 25 jobs (3 batches, in parallel) to a moto queue,
// two of them delayed: the 23 undelayed ones are received at once with
// their bodies intact, the delayed ones are not visible yet.
func TestSQSJobSender(t *testing.T) {
	ctx := context.Background()
	sqsc := testkit.SQSClient(t)
	url, _, err := queue.CreateQueueWithDLQ(ctx, sqsc, randomName("tablekeep-jobs-"), 3, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var jobs []awsfn.OutJob
	for i := range 25 {
		j := awsfn.OutJob{Job: awsfn.Job{V: 1, Warehouse: "s3://b/w", Table: fmt.Sprint("t", i), Reason: fleetpkg.ReasonFanout}}
		if i < 2 {
			j.Delay = 10 * time.Minute
		}
		jobs = append(jobs, j)
	}
	if err := (awsfn.SQSJobSender{Client: sqsc, QueueURL: url}).SendJobs(ctx, jobs); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for range 10 {
		out, err := sqsc.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10, VisibilityTimeout: 60})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range out.Messages {
			j, err := awsfn.ParseJob([]byte(aws.ToString(m.Body)), "s3://b/w")
			if err != nil {
				t.Fatal(err)
			}
			got[j.Table] = true
		}
		if len(out.Messages) == 0 {
			break
		}
	}
	if len(got) != 23 || got["t0"] || got["t1"] {
		b, _ := json.Marshal(got)
		t.Fatalf("received %s, want t2..t24 and not the delayed t0, t1", b)
	}
}
