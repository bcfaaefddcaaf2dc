package awsfn_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tablekeep/tablekeep/shared/awsfn"
	"github.com/tablekeep/tablekeep/shared/clock"
	"github.com/tablekeep/tablekeep/shared/internal/testenv"
	"github.com/tablekeep/tablekeep/shared/internal/testkit"
	"github.com/tablekeep/tablekeep/shared/lock"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/queue"
)

// shifted is a clock.Clock reading the system clock plus off (the handlers'
// TEST-ONLY clock offset, in process).
type shifted struct{ off time.Duration }

func (c shifted) Now() time.Time { return time.Now().Add(c.off) }
func (c shifted) Sleep(ctx context.Context, d time.Duration) error {
	return clock.System().Sleep(ctx, d)
}

// TestHandlersRejectForgedInput drives the handlers in process against
// versitygw and moto, on a table whose compactor run raised the floor and
// enqueued real ranges (so a message naming them would delete): events of
// the wrong kind fail the invocation with ErrUnsupportedEvent; forged or
// bad SQS bodies (another bucket or table, roots with .. or absolute,
// huge/negative/reversed ranges, ranges at or above the floor, oversized,
// non-JSON, injected fields) are each dropped with an error naming the
// reason, none is reported in batchItemFailures, and the bucket listing is
// unchanged. Sent through the real queue next to the valid ranges, each
// forged body reaches the cleaner and is never reported for retry, the valid ranges are cleaned, and
// the queue and its DLQ end empty.
func TestHandlersRejectForgedInput(t *testing.T) {
	ctx := context.Background()
	st := testenv.S3Store(t)
	const prefix = "warehouse"
	cat, tb, model := churnedTable(t, st, prefix, 90, 25)
	locks := randomName("tablekeep-locks-")
	if err := lock.CreateLockTable(ctx, testkit.DynamoClient(t), locks); err != nil {
		t.Fatal(err)
	}
	sqsc := testkit.SQSClient(t)
	queueURL, dlqURL, err := queue.CreateQueueWithDLQ(ctx, sqsc, randomName("tablekeep-forged-"), 5, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	clock := shifted{2 * time.Hour}
	var logs syncBuffer
	deps := func(role awsfn.Role) *awsfn.Deps {
		d := &awsfn.Deps{
			Config: awsfn.Config{Role: role, Warehouse: "s3://" + st.Bucket() + "/" + prefix, Bucket: st.Bucket(), Prefix: prefix,
				LockTable: locks, QueueURL: queueURL, Margin: 10 * time.Second, Lease: 5 * time.Minute, ClockOffset: 2 * time.Hour,
				SweepMaxDeletes: 10000, LogLevel: "debug"},
			Logger: awsfn.NewLogger(&logs, "debug", role), Clock: clock, Store: st, Root: prefix,
			Queue: queue.NewSQS(sqsc, queueURL, queue.SQSOptions{}), Metrics: io.Discard,
		}
		if role == awsfn.RoleCompactor {
			d.Locker = lock.NewDynamoLocker(testkit.DynamoClient(t), locks, clock)
		}
		return d
	}
	compactor, cleaner, sweeper := deps(awsfn.RoleCompactor), deps(awsfn.RoleCleaner), deps(awsfn.RoleSweeper)
	sum, err := compactor.Compact(ctx, readEvent(t, "scheduled.json"))
	if err != nil || sum.Errors != 0 {
		t.Fatalf("compactor: %+v %v", sum, err)
	}
	floor, err := tb.Floor(ctx)
	if err != nil || floor < 10 {
		t.Fatalf("floor %d (%v): want prunable versions below it", floor, err)
	}
	before := bucketListing(t, st)

	// Events of the wrong kind.
	apiGW := []byte(`{"version":"2.0","routeKey":"$default","rawPath":"/clean","headers":{},"requestContext":{"http":{"method":"POST"}},"body":"{\"v\":1}","isBase64Encoded":false}`)
	sqsEvent, scheduled := readEvent(t, "sqs-cleanup.json"), readEvent(t, "scheduled.json")
	for _, c := range []struct {
		name string
		call func() error
		want string
	}{
		{"SQS batch to the compactor", func() error { _, err := compactor.Compact(ctx, sqsEvent); return err }, "compactor: unsupported event: got a batch of Records"},
		{"API Gateway to the compactor", func() error { _, err := compactor.Compact(ctx, apiGW); return err }, "compactor: unsupported event: no source"},
		{"schedule to the cleaner", func() error { _, err := cleaner.Clean(ctx, scheduled); return err }, `cleaner: unsupported event: got an event from "aws.events"`},
		{"API Gateway to the cleaner", func() error { _, err := cleaner.Clean(ctx, apiGW); return err }, "cleaner: unsupported event: no Records"},
		{"SQS batch to the sweeper", func() error { _, err := sweeper.Sweep(ctx, sqsEvent); return err }, "sweeper: unsupported event: got a batch of Records"},
		{"API Gateway to the sweeper", func() error { _, err := sweeper.Sweep(ctx, apiGW); return err }, "sweeper: unsupported event: no source"},
	} {
		err := c.call()
		if !errors.Is(err, awsfn.ErrUnsupportedEvent) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrUnsupportedEvent with %q", c.name, err, c.want)
		}
	}
	if got := bucketListing(t, st); got != before {
		t.Fatalf("wrong-kind events changed the bucket")
	}

	// Forged and bad bodies.
	root := prefix + "/" + e2eRel + "/"
	msg := func(table, root string, from, to any) string {
		return fmt.Sprintf(`{"v":1,"table":%q,"root":%q,"from":%v,"to":%v}`, table, root, from, to)
	}
	forged := []struct{ name, body, want string }{
		{"other bucket", msg(e2eTable, "s3://other-bucket/"+root, 1, 3), ""},
		{"other table's root", msg(e2eTable, prefix+"/_stats/", 1, 3), "key outside the table"},
		{"other table's name", msg("_stats", root, 1, 3), "key outside the table"},
		{"unknown table", msg("payments", prefix+"/tables/payments/", 1, 3), "unknown table"},
		{"root with ..", msg(e2eTable, root+"../../../other/", 1, 3), ""},
		{"root escaping the prefix", msg(e2eTable, "../"+root, 1, 3), ""},
		{"absolute root", msg(e2eTable, "/"+root, 1, 3), ""},
		{"huge range", msg(e2eTable, root, 1, "18446744073709551615"), "invalid cleanup message"},
		{"float range", msg(e2eTable, root, 1, "1e30"), "invalid cleanup message"},
		{"negative range", msg(e2eTable, root, -5, 3), "invalid cleanup message"},
		{"reversed range", msg(e2eTable, root, 5, 3), "invalid cleanup message"},
		{"range at the floor", msg(e2eTable, root, floor-1, floor), "not below the retention floor"},
		{"range above the floor", msg(e2eTable, root, floor+10, floor+20), "not below the retention floor"},
		{"injected keys", `{"v":1,"table":"registry","root":"` + root + `","from":1,"to":3,"keys":["` + root + `_versions/"]}`, "invalid cleanup message"},
		{"oversized", `{"v":1,"table":"registry","root":"` + root + `","from":1,"to":3}` + strings.Repeat(" ", 300<<10), "invalid cleanup message"},
		{"non-JSON", "DELETE " + root, "invalid cleanup message"},
		{"empty", "", "invalid cleanup message"},
		{"JSON array", `[1,2,3]`, "invalid cleanup message"},
	}
	ev := events.SQSEvent{}
	for i, f := range forged {
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: fmt.Sprint("forged-", i), Body: f.body, EventSource: "aws:sqs"})
	}
	raw, _ := json.Marshal(ev)
	logs.b.Reset()
	resp, err := cleaner.Clean(ctx, raw)
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("forged batch: %v, %d reported for retry; want all dropped", err, len(resp.BatchItemFailures))
	}
	dropped := droppedErrors(t, logs.String())
	for i, f := range forged {
		e, ok := dropped[fmt.Sprint("forged-", i)]
		switch {
		case !ok:
			t.Errorf("%s: not dropped as permanent", f.name)
		case f.want != "" && !strings.Contains(e, f.want):
			t.Errorf("%s: error %q does not say %q", f.name, e, f.want)
		case f.want == "" && !strings.Contains(e, "key outside the table") && !strings.Contains(e, "invalid cleanup message"):
			t.Errorf("%s: error %q is neither a foreign key nor an invalid message", f.name, e)
		default:
			t.Logf("%-26s %s", f.name+":", e)
		}
	}
	if got := bucketListing(t, st); got != before {
		t.Fatalf("forged bodies changed the bucket")
	}

	// Through the real queue, next to the compactor's valid ranges.
	for _, f := range forged {
		if len(f.body) > 200<<10 || f.body == "" {
			continue // SQS refuses them itself
		}
		if _, err := sqsc.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(queueURL), MessageBody: aws.String(f.body)}); err != nil {
			t.Fatalf("send %s: %v", f.name, err)
		}
	}
	// Each forged body reaches the cleaner and is never reported for
	// retry (a redelivery by SQS itself, at least once, is no retry).
	receives, retried := drainQueue(t, sqsc, queueURL, func(raw []byte) events.SQSEventResponse {
		resp, err := cleaner.Clean(ctx, raw)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	})
	for _, f := range forged {
		if len(f.body) > 200<<10 || f.body == "" {
			continue
		}
		if receives[f.body] == 0 || retried[f.body] != 0 {
			t.Errorf("%s: received %d times, reported for retry %d times; want received, never retried", f.name, receives[f.body], retried[f.body])
		}
	}
	for body, n := range receives {
		if n != 1 {
			t.Logf("received %d times (at-least-once delivery): %.120s", n, body)
		}
	}
	for _, u := range []string{queueURL, dlqURL} {
		attrs, err := sqsc.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(u),
			AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
		if err != nil {
			t.Fatal(err)
		}
		if a := attrs.Attributes; a["ApproximateNumberOfMessages"] != "0" || a["ApproximateNumberOfMessagesNotVisible"] != "0" {
			t.Errorf("queue %s not empty: %v", u, a)
		}
	}
	// The valid ranges were cleaned: only versions from the floor remain.
	checkTable(t, tb, model, 0)
	if vs, err := tb.Versions(ctx); err != nil || vs[0].Version != floor {
		t.Fatalf("oldest version after cleaning: %v (%v), want the floor %d", vs[:1], err, floor)
	}
	refs, err := cat.Tables(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range refs {
		assertNoUnreferenced(t, st, ref)
	}
}

// droppedErrors maps message id -> error of the cleaner's "dropping
// message that failed permanently" log lines.
func droppedErrors(t *testing.T, log string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, line := range strings.Split(log, "\n") {
		var l map[string]any
		if json.Unmarshal([]byte(line), &l) != nil || !strings.Contains(fmt.Sprint(l["msg"]), "failed permanently") {
			continue
		}
		out[fmt.Sprint(l["message_id"])] = fmt.Sprint(l["err"])
	}
	return out
}

// bucketListing is every key of the bucket with its size.
func bucketListing(t *testing.T, st objstore.Store) string {
	t.Helper()
	var keys []string
	if err := objstore.ListAll(context.Background(), st, "", "", func(o objstore.ObjectInfo) error {
		keys = append(keys, fmt.Sprintf("%s %d", o.Key, o.Size))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	sort.Strings(keys)
	return strings.Join(keys, "\n")
}
