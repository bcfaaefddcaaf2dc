package awsfn_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tablekeep/tablekeep/shared/awsfn"
	"github.com/tablekeep/tablekeep/shared/catalog"
	"github.com/tablekeep/tablekeep/shared/internal/faultproxy"
	"github.com/tablekeep/tablekeep/shared/internal/testenv"
	"github.com/tablekeep/tablekeep/shared/internal/testkit"
	"github.com/tablekeep/tablekeep/shared/lock"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/queue"
	"github.com/tablekeep/tablekeep/shared/table"
)

// The deployed cleaner's settings (template.yaml): CleanerFunction Timeout,
// CleanerBatchSize, the queue's VisibilityTimeout and the redrive policy's
// maxReceiveCount.
const (
	rieCleanerTimeout    = 90
	rieCleanerBatch      = 10
	rieQueueVisibility   = 540 * time.Second
	rieMaxReceiveCount   = 5
	rieLatencyRanges     = 10
	rieLatencyRangeSize  = 1000 // maintenance.DefaultPolicy().RangeVersions
	rieLatencyNames      = 20   // rows in the table
	rieLatencyMaxInvokes = 12   // bound on cleaner invocations to drain the queue
)

// TestLambdaCleanerAtS3Latency is issue 10's "must show": the cleaner
// bootstrap under aws-lambda-rie, its S3 endpoint a fault proxy that delays
// every S3 request by the `s3` latency profile (GET 20 ms, PUT 30, LIST 40,
// DeleteObjects 120; DynamoDB and SQS are not delayed), with the template's
// 90 s timeout and 30 s safety margin, drains one SQS event carrying a batch
// of 10 messages of 1,000-version ranges: no message is reported failed, the
// queue is then drained by further invocations (continuations and deferred
// messages, each a fresh message), no message reaches the DLQ, none is
// received maxReceiveCount times, and every version below the floor is gone
// while the rows are intact.
//
// The history (10,005 versions) is written at zero latency straight to
// versitygw, and the compactor function (also at zero latency) raises the
// floor and enqueues the ranges; only the cleaner pays S3 latency. Each
// version upserts all rieLatencyNames rows in one fragment, so the previous
// fragment is wholly deleted and dropped: manifests stay one fragment and
// each pruned version leaves a manifest, a change record and a data file to
// delete (~3 keys per version, ~30,000 keys in all).
//
// Wall time and keys/s per invocation are logged, not asserted.
func TestLambdaCleanerAtS3Latency(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 10,005-version history and runs the cleaner at S3 latency")
	}
	ctx := context.Background()
	st := testenv.S3Store(t)
	s3Endpoint, awsEndpoint := testenv.S3Endpoint(t), testenv.AWSEndpoint(t)
	bins := buildBootstraps(t, "compactor", "cleaner")
	locks := randomName("tablekeep-locks-")
	if err := lock.CreateLockTable(ctx, testkit.DynamoClient(t), locks); err != nil {
		t.Fatal(err)
	}
	sqsc := testkit.SQSClient(t)
	queueURL, dlqURL, err := queue.CreateQueueWithDLQ(ctx, sqsc, randomName("tablekeep-latency-"), rieMaxReceiveCount, rieQueueVisibility)
	if err != nil {
		t.Fatal(err)
	}

	const prefix = "latency"
	latest := uint64(rieLatencyRanges*rieLatencyRangeSize + e2eKeepLast)
	start := time.Now()
	tb, model := longHistory(t, st, prefix, latest)
	t.Logf("history: %d versions written in %s", latest, time.Since(start).Round(time.Millisecond))

	env := func(s3 string) []string {
		return []string{
			"AWS_REGION=us-east-1",
			"AWS_ENDPOINT_URL=",
			"AWS_ENDPOINT_URL_S3=" + s3,
			"AWS_ENDPOINT_URL_DYNAMODB=" + awsEndpoint,
			"AWS_ENDPOINT_URL_SQS=" + awsEndpoint,
			"AWS_LAMBDA_FUNCTION_TIMEOUT=" + strconv.Itoa(rieCleanerTimeout),
			awsfn.EnvWarehouse + "=s3://" + st.Bucket() + "/" + prefix,
			awsfn.EnvLockTable + "=" + locks,
			awsfn.EnvQueueURL + "=" + queueURL,
			awsfn.EnvClockOffset + "=2h",
			awsfn.EnvAllowOffset + "=test",
		}
	}

	// The compactor, at zero latency, raises the floor to latest-4 and
	// enqueues [1,1000] ... [9001,10000].
	compactor := startRIE(t, "compactor", bins["compactor"], env(s3Endpoint))
	var comp awsfn.CompactSummary
	compactor.invoke(t, readEvent(t, "scheduled.json"), &comp)
	stopRIE(compactor)
	var reg *awsfn.TableSummary
	for i := range comp.Tables {
		if comp.Tables[i].Table == e2eTable {
			reg = &comp.Tables[i]
		}
	}
	wantFloor := latest - e2eKeepLast + 1
	if comp.Errors != 0 || reg == nil || reg.Floor != wantFloor || reg.RangesEnqueued != rieLatencyRanges {
		t.Fatalf("compactor: %+v; want floor %d and %d ranges enqueued", comp, wantFloor, rieLatencyRanges)
	}

	// The cleaner, its S3 requests through the latency proxy.
	proxy, err := faultproxy.Start(s3Endpoint, faultproxy.Options{Latency: objstore.S3Profile()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	cleaner := startRIE(t, "cleaner", bins["cleaner"], env(proxy.URL()))

	// The first event: the whole batch of 10 ranges, as the event source
	// mapping with BatchSize 10 delivers it.
	raw, msgs := receiveN(t, sqsc, queueURL, rieCleanerBatch)
	if len(msgs) != rieCleanerBatch {
		t.Fatalf("first batch has %d messages, want %d", len(msgs), rieCleanerBatch)
	}
	for _, m := range msgs {
		r, err := maintenance.DecodeRangeMessage([]byte(aws.ToString(m.Body)))
		if err != nil {
			t.Fatal(err)
		}
		if n := r.To - r.From + 1; n != rieLatencyRangeSize {
			t.Fatalf("range %d..%d has %d versions, want %d", r.From, r.To, n, rieLatencyRangeSize)
		}
	}
	maxReceives := 0
	var totalKeys int
	var totalTime time.Duration
	for inv := 1; ; inv++ {
		for _, m := range msgs {
			n, _ := strconv.Atoi(m.Attributes[string(sqstypes.MessageSystemAttributeNameApproximateReceiveCount)])
			maxReceives = max(maxReceives, n)
		}
		before := proxy.Stats()
		began := time.Now()
		var resp events.SQSEventResponse
		cleaner.invoke(t, raw, &resp)
		took := time.Since(began)
		out := cleaner.log.String()
		keys := lastBatchField(out, "keys_deleted")
		totalKeys += keys
		totalTime += took
		t.Logf("invocation %d: %d messages in %s, %d keys deleted (%.0f keys/s), %d cleaned, %d continued, %d deferred, %d failed; S3 requests %s",
			inv, len(msgs), took.Round(time.Millisecond), keys, float64(keys)/took.Seconds(), lastBatchField(out, "cleaned"),
			lastBatchField(out, "continued"), lastBatchField(out, "deferred"), len(resp.BatchItemFailures),
			statsDiff(before, proxy.Stats()))
		if len(resp.BatchItemFailures) != 0 {
			t.Fatalf("invocation %d: %d messages reported failed: %+v", inv, len(resp.BatchItemFailures), resp.BatchItemFailures)
		}
		settleBatch(t, sqsc, queueURL, msgs, resp)
		if testkit.QueueDepth(t, sqsc, queueURL) == 0 {
			break
		}
		if inv == rieLatencyMaxInvokes {
			t.Fatalf("queue not drained after %d invocations: %d messages left", inv, testkit.QueueDepth(t, sqsc, queueURL))
		}
		// Continuations and deferred messages sent back by the cleaner.
		raw, msgs = receiveN(t, sqsc, queueURL, rieCleanerBatch)
		if len(msgs) == 0 {
			t.Fatalf("queue depth %d but nothing to receive", testkit.QueueDepth(t, sqsc, queueURL))
		}
	}
	t.Logf("cleaner: %d keys in %s (%.0f keys/s); highest receive count %d (maxReceiveCount %d)",
		totalKeys, totalTime.Round(time.Millisecond), float64(totalKeys)/totalTime.Seconds(), maxReceives, rieMaxReceiveCount)
	if maxReceives >= rieMaxReceiveCount {
		t.Errorf("a message was received %d times; the redrive policy moves it to the DLQ at %d", maxReceives, rieMaxReceiveCount)
	}
	if n := testkit.QueueDepth(t, sqsc, dlqURL); n != 0 {
		t.Errorf("%d messages dead-lettered", n)
	}

	// Versions below the floor are gone (manifests deleted); the newest
	// KeepLast remain, each readable, with the rows of the last commit.
	vs, err := tb.Versions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != e2eKeepLast || vs[0].Version != wantFloor || vs[len(vs)-1].Version != latest {
		t.Fatalf("%d versions stored after cleanup (%v..), want %d..%d", len(vs), vs[:min(len(vs), 3)], wantFloor, latest)
	}
	checkTable(t, tb, model, e2eKeepLast)
	cat, err := catalog.Open(ctx, st, prefix, table.Options{})
	if err != nil {
		t.Fatal(err)
	}
	refs, err := cat.Tables(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range refs {
		assertNoUnreferenced(t, st, ref)
	}
}

// longHistory registers tables/registry under prefix (KeepLast 5, grace 1h)
// and commits until its latest version is latest, each commit an upsert of
// all rieLatencyNames rows in one fragment (the previous fragment is then
// wholly deleted and dropped). It returns the table and its rows.
func longHistory(t *testing.T, st objstore.Store, prefix string, latest uint64) (*table.Table, map[string]string) {
	t.Helper()
	ctx := context.Background()
	cat, err := catalog.Open(ctx, st, prefix, table.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tb, err := table.Create(ctx, st, prefix+"/"+e2eRel, registrySchema, "name", table.Options{Format: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := cat.Register(ctx, e2eTable, e2eRel, maintenance.Policy{KeepLast: e2eKeepLast, Grace: time.Hour}); err != nil {
		t.Fatal(err)
	}
	model := map[string]string{}
	for v := tb.Cached().Version; v < latest; v = tb.Cached().Version {
		b := array.NewRecordBuilder(memory.DefaultAllocator, registrySchema)
		for i := 0; i < rieLatencyNames; i++ {
			name, uri := fmt.Sprint("store-", i), fmt.Sprintf("s3://data/store-%d/v%d", i, v+1)
			b.Field(0).(*array.StringBuilder).Append(name)
			b.Field(1).(*array.StringBuilder).Append(uri)
			model[name] = uri
		}
		rec := b.NewRecordBatch()
		b.Release()
		_, err := tb.Upsert(ctx, rec)
		rec.Release()
		if err != nil {
			t.Fatalf("commit of version %d: %v", v+1, err)
		}
	}
	if got := len(tb.Cached().Fragments); got != 1 {
		t.Fatalf("history has %d fragments, want 1", got)
	}
	return tb, model
}

// receiveN receives up to n messages (hidden for the queue's visibility
// timeout, as the event source mapping does) in as many receives as it
// takes, and returns them as one SQS event.
func receiveN(t *testing.T, sqsc *sqs.Client, queueURL string, n int) ([]byte, []sqstypes.Message) {
	t.Helper()
	var all []sqstypes.Message
	for tries := 0; len(all) < n && tries < 5; tries++ {
		// n <= 10, so a receive (at most n-len(all) ... 10) never takes
		// more than the batch: receiveEvent asks for 10, n is 10.
		_, msgs := receiveEvent(t, sqsc, queueURL, int32(rieQueueVisibility/time.Second))
		if len(msgs) == 0 && len(all) > 0 {
			break
		}
		all = append(all, msgs...)
	}
	if len(all) > n {
		t.Fatalf("received %d messages, want at most %d", len(all), n)
	}
	ev := events.SQSEvent{}
	for _, m := range all {
		ev.Records = append(ev.Records, events.SQSMessage{
			MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle), Body: aws.ToString(m.Body),
			Attributes: m.Attributes, EventSource: "aws:sqs", EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:cleanup", AWSRegion: "us-east-1",
		})
	}
	raw, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return raw, all
}

// lastBatchField is the integer field of the cleaner's last "cleaner batch"
// log line (keys_deleted, cleaned, continued, deferred), 0 if absent.
func lastBatchField(log, field string) int {
	i := strings.LastIndex(log, `"msg":"cleaner batch"`)
	if i < 0 {
		return 0
	}
	line := log[i:]
	if j := strings.IndexByte(line, '\n'); j >= 0 {
		line = line[:j]
	}
	k := `"` + field + `":`
	j := strings.Index(line, k)
	if j < 0 {
		return 0
	}
	s := line[j+len(k):]
	end := strings.IndexAny(s, ",}")
	if end < 0 {
		return 0
	}
	n, _ := strconv.Atoi(s[:end])
	return n
}

// statsDiff prints the proxy's requests between two snapshots.
func statsDiff(before, after faultproxy.Stats) string {
	var parts []string
	kinds := make([]string, 0, len(after.ByKind))
	for k := range after.ByKind {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		if d := after.ByKind[k] - before.ByKind[k]; d != 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", k, d))
		}
	}
	return fmt.Sprintf("%d (%s)", after.Requests-before.Requests, strings.Join(parts, " "))
}
