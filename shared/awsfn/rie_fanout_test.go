package awsfn_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tablekeep/tablekeep/shared/awsfn"
	"github.com/tablekeep/tablekeep/shared/catalog"
	"github.com/tablekeep/tablekeep/shared/internal/testenv"
	"github.com/tablekeep/tablekeep/shared/internal/testkit"
	"github.com/tablekeep/tablekeep/shared/lock"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/queue"
	"github.com/tablekeep/tablekeep/shared/table"
)

// notifyRelay stands in for S3's delivery of event notifications to SQS:
// versitygw posts its webhook body (S3's notification JSON with versitygw's
// "s3:"-prefixed event names and unencoded keys) and the relay sends it to
// the queue as S3 would: event names without the prefix, keys URL-encoded.
// It forwards only while enabled.
type notifyRelay struct {
	t        *testing.T
	sqsc     *sqs.Client
	queueURL string
	enabled  atomic.Bool
	mu       sync.Mutex
	keys     []string // manifest keys forwarded
	errs     []string
}

func (r *notifyRelay) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil || !r.enabled.Load() {
		w.WriteHeader(http.StatusOK)
		return
	}
	var ev map[string]any
	if err := json.Unmarshal(body, &ev); err != nil {
		r.fail("webhook body %q: %v", body, err)
		return
	}
	recs, _ := ev["Records"].([]any)
	for _, rec := range recs {
		m, _ := rec.(map[string]any)
		if name, ok := m["eventName"].(string); ok {
			m["eventName"] = strings.TrimPrefix(name, "s3:")
		}
		s3m, _ := m["s3"].(map[string]any)
		obj, _ := s3m["object"].(map[string]any)
		if key, ok := obj["key"].(string); ok {
			parts := strings.Split(key, "/")
			for i, p := range parts {
				parts[i] = url.QueryEscape(p)
			}
			obj["key"] = strings.Join(parts, "/")
			if strings.HasSuffix(key, ".manifest") {
				r.mu.Lock()
				r.keys = append(r.keys, key)
				r.mu.Unlock()
			}
		}
	}
	out, _ := json.Marshal(ev)
	if _, err := r.sqsc.SendMessage(req.Context(), &sqs.SendMessageInput{QueueUrl: aws.String(r.queueURL), MessageBody: aws.String(string(out))}); err != nil {
		r.fail("relay to SQS: %v", err)
	}
	w.WriteHeader(http.StatusOK)
}

func (r *notifyRelay) fail(format string, a ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, a...))
}

func (r *notifyRelay) forwarded() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string{}, r.keys...)
}

func versitygwBinary(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p
	}
	gopath, _ := exec.Command("go", "env", "GOPATH").Output()
	p := filepath.Join(strings.TrimSpace(string(gopath)), "bin", "versitygw")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("versitygw not found on PATH or in %s: run `make tools` (it installs it)", filepath.Dir(p))
	}
	return p
}

// startNotifyingGateway runs a versitygw of the test's own (posix backend
// in a temporary directory, the stack's credentials) that posts an S3
// event notification for every object created to webhook. It returns its
// endpoint; it is killed when the test ends.
func startNotifyingGateway(t *testing.T, webhook string) string {
	t.Helper()
	dir := t.TempDir()
	filter := filepath.Join(dir, "filter.json")
	if err := os.WriteFile(filter, []byte(`{"s3:ObjectCreated:*": true}`), 0o644); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		t.Fatal(err)
	}
	for attempt := 1; ; attempt++ {
		port := freePort(t)
		log := &syncBuffer{}
		cmd := exec.Command(versitygwBinary(t), "--port", fmt.Sprintf("127.0.0.1:%d", port), "--region", "us-east-1",
			"--event-webhook-url", webhook, "--event-filter", filter, "posix", data)
		cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY="+os.Getenv("AWS_ACCESS_KEY_ID"), "ROOT_SECRET_KEY="+os.Getenv("AWS_SECRET_ACCESS_KEY"))
		cmd.Stdout, cmd.Stderr = log, log
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatalf("start versitygw: %v", err)
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		stop := func() {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		if waitListening(fmt.Sprintf("127.0.0.1:%d", port), exited) {
			t.Cleanup(func() {
				stop()
				if t.Failed() {
					t.Logf("--- versitygw (webhook) output:\n%s", log.String())
				}
			})
			return fmt.Sprintf("http://127.0.0.1:%d", port)
		}
		stop()
		if attempt == 3 {
			t.Fatalf("versitygw with --event-webhook-url did not start:\n%s", log.String())
		}
	}
}

// receiveJobs receives up to 10 messages of the compaction queue as the
// SQS event Lambda's event source mapping would pass to the compactor.
func receiveJobs(t *testing.T, sqsc *sqs.Client, queueURL string, wait int32) ([]byte, []sqstypes.Message) {
	t.Helper()
	out, err := sqsc.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
		QueueUrl: aws.String(queueURL), MaxNumberOfMessages: 10, WaitTimeSeconds: wait, VisibilityTimeout: 30,
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
	})
	if err != nil {
		t.Fatal(err)
	}
	arn := "arn:aws:sqs:us-east-1:123456789012:" + queueURL[strings.LastIndex(queueURL, "/")+1:]
	ev := events.SQSEvent{}
	for _, m := range out.Messages {
		ev.Records = append(ev.Records, events.SQSMessage{
			MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle), Body: aws.ToString(m.Body),
			Attributes: m.Attributes, EventSource: "aws:sqs", EventSourceARN: arn, AWSRegion: "us-east-1",
		})
	}
	raw, _ := json.Marshal(ev)
	return raw, out.Messages
}

// TestLambdaFanoutEndToEnd runs the compactor bootstrap under
// aws-lambda-rie against a versitygw of its own (with webhook event
// notifications relayed into a moto SQS compaction queue) and moto
// (DynamoDB lock table, cleanup and compaction queues), in both modes:
//
//  1. fan-out: a scheduled event with TABLEKEEP_INLINE_TABLES=1 maintains
//     one table itself and sends every other table as a job; the SQS
//     batches of the compaction queue, given to the same function as
//     Lambda's event source mapping does, maintain them (a forged job on
//     the queue is dropped, not retried);
//  2. notifications: a write to one s3:// table makes versitygw post a
//     notification, the relay puts it on the queue, and the compactor's
//     SQS mode compacts that table, with no scheduled invocation in
//     between; a manifest-like key under no registered table is ignored.
func TestLambdaFanoutEndToEnd(t *testing.T) {
	ctx := context.Background()
	awsEndpoint := testenv.AWSEndpoint(t)
	bins := buildBootstraps(t, "compactor")
	sqsc := testkit.SQSClient(t)
	locks := randomName("tablekeep-locks-")
	if err := lock.CreateLockTable(ctx, testkit.DynamoClient(t), locks); err != nil {
		t.Fatal(err)
	}
	cleanupURL, _, err := queue.CreateQueueWithDLQ(ctx, sqsc, randomName("tablekeep-cleanup-"), 5, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	jobsURL, jobsDLQ, err := queue.CreateQueueWithDLQ(ctx, sqsc, randomName("tablekeep-compaction-"), 3, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	relay := &notifyRelay{t: t, sqsc: sqsc, queueURL: jobsURL}
	hook := httptest.NewServer(relay)
	defer hook.Close()
	s3Endpoint := startNotifyingGateway(t, hook.URL)

	bucket := testenv.BucketName(t)
	st, err := objstore.NewS3FromConfig(ctx, objstore.S3Options{Bucket: bucket, Endpoint: s3Endpoint, Region: "us-east-1", PathStyle: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Client().CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatalf("create bucket on the webhook gateway: %v", err)
	}
	const prefix = "warehouse"
	cat, err := catalog.Open(ctx, st, prefix, table.Options{})
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"t1", "t2", "t3", "t4"}
	tables := map[string]*table.Table{}
	for _, n := range names {
		tb, err := table.Create(ctx, st, prefix+"/tables/"+n, registrySchema, "name", table.Options{Format: 2})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			if _, err := tb.Upsert(ctx, row(fmt.Sprint("k", i), fmt.Sprint(n, "-v", i))); err != nil {
				t.Fatal(err)
			}
		}
		if err := cat.Register(ctx, n, "tables/"+n, maintenance.Policy{KeepLast: 3, Grace: time.Hour}); err != nil {
			t.Fatal(err)
		}
		tables[n] = tb
	}
	fragments := func(n string) int {
		snap, err := tables[n].Latest(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return len(snap.Manifest().Fragments)
	}

	env := []string{
		"AWS_REGION=us-east-1",
		"AWS_ENDPOINT_URL=",
		"AWS_ENDPOINT_URL_S3=" + s3Endpoint,
		"AWS_ENDPOINT_URL_DYNAMODB=" + awsEndpoint,
		"AWS_ENDPOINT_URL_SQS=" + awsEndpoint,
		"AWS_LAMBDA_FUNCTION_TIMEOUT=120",
		awsfn.EnvWarehouse + "=s3://" + bucket + "/" + prefix,
		awsfn.EnvLockTable + "=" + locks,
		awsfn.EnvQueueURL + "=" + cleanupURL,
		awsfn.EnvCompactionQueueURL + "=" + jobsURL,
		awsfn.EnvInlineTables + "=1",
		awsfn.EnvMargin + "=10s",
	}
	compactor := startRIE(t, "compactor", bins["compactor"], env)

	// invokeBatches gives the compaction queue's batches to the compactor
	// until the queue is empty (a batch reported failed is a test failure),
	// and returns how many records it handled.
	invokeBatches := func(wait int32) int {
		n := 0
		deadline := time.Now().Add(time.Minute)
		for {
			raw, msgs := receiveJobs(t, sqsc, jobsURL, wait)
			if len(msgs) == 0 {
				if testkit.QueueDepth(t, sqsc, jobsURL) == 0 {
					return n
				}
				if time.Now().After(deadline) {
					t.Fatalf("compaction queue not drained after a minute")
				}
				continue
			}
			var resp events.SQSEventResponse
			compactor.invoke(t, raw, &resp)
			if len(resp.BatchItemFailures) != 0 {
				t.Fatalf("batch items reported failed: %+v", resp.BatchItemFailures)
			}
			settleBatch(t, sqsc, jobsURL, msgs, resp)
			n += len(msgs)
		}
	}

	// 1. Fan-out: the scheduled run does one table, sends the rest.
	var sum awsfn.CompactSummary
	compactor.invoke(t, readEvent(t, "scheduled.json"), &sum)
	t.Logf("scheduled run: tables %d, jobs %d, registered %d", len(sum.Tables), sum.JobsEnqueued, sum.Registered)
	if len(sum.Tables) != 1 || sum.Registered != 6 || sum.JobsEnqueued != 5 || sum.Errors != 0 || sum.NotReached != 0 {
		t.Fatalf("scheduled run %+v, want 1 table inline and 5 jobs", sum)
	}
	// A forged job next to them: another warehouse's table.
	forged := `{"v":1,"warehouse":"s3://elsewhere/warehouse","table":"t1","attempt":0}`
	if _, err := sqsc.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(jobsURL), MessageBody: aws.String(forged)}); err != nil {
		t.Fatal(err)
	}
	if n := invokeBatches(1); n != 6 {
		t.Errorf("%d records handled, want 5 jobs and the forged one", n)
	}
	for _, n := range names {
		if f := fragments(n); f != 1 {
			t.Errorf("%s: %d fragments after fan-out, want 1", n, f)
		}
	}
	logs := compactor.log.String()
	if c := strings.Count(logs, `"msg":"table job done"`); c < 4 {
		t.Errorf("%d table jobs done, want at least the 4 user tables' (the inline one may be _registry)", c)
	}
	if !strings.Contains(logs, "dropping a message it can never process") || !strings.Contains(logs, `job for warehouse \"s3://elsewhere/warehouse\"`) {
		t.Errorf("the forged job was not dropped with a clear error")
	}

	// 2. Notifications: a write to t2, and nothing scheduled after it.
	relay.enabled.Store(true)
	before := len(relay.forwarded())
	logMark := len(compactor.log.String())
	for i := range 2 {
		if _, err := tables["t2"].Upsert(ctx, row(fmt.Sprint("n", i), "notified")); err != nil {
			t.Fatal(err)
		}
	}
	// A manifest-like key under no registered table.
	if err := st.Put(ctx, prefix+"/not-a-table/_versions/18446744073709551614.manifest", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if f := fragments("t2"); f != 3 {
		t.Fatalf("t2: %d fragments after two writes, want 3", f)
	}
	latestBefore, _ := tables["t2"].Latest(ctx)
	// The webhook posts asynchronously: wait for the notifications.
	deadline := time.Now().Add(30 * time.Second)
	for len(relay.forwarded())-before < 3 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if got := relay.forwarded()[before:]; len(got) < 3 {
		t.Fatalf("versitygw's webhook forwarded %v, want the two manifests of t2 and the stray one", got)
	}
	invokeBatches(2)
	// The compaction's own manifest is notified too (one more, idle,
	// maintenance of t2): stop relaying and take what is in flight.
	relay.enabled.Store(false)
	invokeBatches(1)
	if f := fragments("t2"); f != 1 {
		t.Errorf("t2: %d fragments after its notifications, want 1 (compacted without a scheduled run)", f)
	}
	latest, _ := tables["t2"].Latest(ctx)
	if latest.Version() <= latestBefore.Version() {
		t.Errorf("t2 not compacted: latest version %d, was %d", latest.Version(), latestBefore.Version())
	}
	if got := rows(t, tables["t2"]); got["n0"] != "notified" || got["n1"] != "notified" || got["k0"] != "t2-v0" || len(got) != 5 {
		t.Errorf("t2 rows after compaction: %v", got)
	}
	logs = compactor.log.String()[logMark:]
	notified := false
	for _, l := range strings.Split(logs, "\n") {
		notified = notified || (strings.Contains(l, `"msg":"table job done"`) && strings.Contains(l, `"table":"t2"`) && strings.Contains(l, `"groups_committed":1`))
	}
	if !notified || strings.Contains(logs, `"msg":"compactor run"`) {
		t.Errorf("want t2 compacted by a notification batch (and no scheduled run):\n%s", logs)
	}
	if !strings.Contains(logs, "no registered table at warehouse/not-a-table/") {
		t.Errorf("the stray manifest was not ignored with a log line")
	}
	relay.mu.Lock()
	if len(relay.errs) > 0 {
		t.Errorf("relay errors: %v", relay.errs)
	}
	relay.mu.Unlock()
	if n := testkit.QueueDepth(t, sqsc, jobsDLQ); n != 0 {
		t.Errorf("the compaction DLQ holds %d messages", n)
	}
}
