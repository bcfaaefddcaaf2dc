package awsfn_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/tablekeep/tablekeep/shared/awsfn"
	"github.com/tablekeep/tablekeep/shared/catalog"
	fleetpkg "github.com/tablekeep/tablekeep/shared/fleet"
	"github.com/tablekeep/tablekeep/shared/internal/fakeclock"
	"github.com/tablekeep/tablekeep/shared/lock"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/queue"
	"github.com/tablekeep/tablekeep/shared/table"
)

// The events/ samples of the compaction queue name this warehouse.
const (
	fanBucket    = "tablekeep-warehouse"
	fanWarehouse = "s3://" + fanBucket + "/warehouse"
	fanQueueURL  = "https://sqs.us-east-1.amazonaws.com/123456789012/tablekeep-compaction"
	fanQueueARN  = "arn:aws:sqs:us-east-1:123456789012:tablekeep-compaction"
)

// jobRecorder is a JobSender keeping what was sent (and failing on demand).
type jobRecorder struct {
	mu   sync.Mutex
	sent []awsfn.OutJob
	fail error
}

func (r *jobRecorder) SendJobs(_ context.Context, jobs []awsfn.OutJob) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		return r.fail
	}
	r.sent = append(r.sent, jobs...)
	return nil
}

// take returns and forgets what was sent.
func (r *jobRecorder) take() []awsfn.OutJob {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.sent
	r.sent = nil
	return out
}

// hangStore blocks every request under prefix until its context ends: a
// table whose maintenance always times out.
type hangStore struct {
	objstore.Store
	prefix string
}

func (h hangStore) hang(ctx context.Context, key string) error {
	if strings.HasPrefix(key, h.prefix) {
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}

func (h hangStore) Get(ctx context.Context, key string) ([]byte, error) {
	if err := h.hang(ctx, key); err != nil {
		return nil, err
	}
	return h.Store.Get(ctx, key)
}

func (h hangStore) List(ctx context.Context, o objstore.ListOptions) (objstore.ListPage, error) {
	if err := h.hang(ctx, o.Prefix); err != nil {
		return objstore.ListPage{}, err
	}
	return h.Store.List(ctx, o)
}

type fleet struct {
	d     *awsfn.Deps
	cat   *catalog.Catalog
	st    objstore.Store
	clock *fakeclock.Clock
	jobs  *jobRecorder
	logs  *syncBuffer
}

// newFleet is a warehouse on local disk with the given tables registered
// (each with a few one-row fragments to compact) and broken ones
// registered but never created (their maintenance always fails), served
// by an in-process compactor with a compaction queue.
func newFleet(t *testing.T, tables []string, broken ...string) *fleet {
	t.Helper()
	ctx := context.Background()
	disk, err := objstore.NewDisk(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// Deadlines are real time: the fake clock starts at the real time and
	// moves only when a test advances it.
	clock := fakeclock.New(time.Now().Truncate(time.Second))
	f := &fleet{st: disk, clock: clock, jobs: &jobRecorder{}, logs: &syncBuffer{}}
	opts := table.Options{Format: 2, Clock: clock}
	if f.cat, err = catalog.Open(ctx, disk, "warehouse", opts); err != nil {
		t.Fatal(err)
	}
	for _, name := range broken {
		if err := f.cat.Register(ctx, name, "tables/"+name, maintenance.Policy{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range tables {
		tb, err := table.Create(ctx, disk, "warehouse/tables/"+name, registrySchema, "name", opts)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 4 {
			if _, err := tb.Upsert(ctx, row(fmt.Sprint("k", i), fmt.Sprint("v", i))); err != nil {
				t.Fatal(err)
			}
		}
		if err := f.cat.Register(ctx, name, "tables/"+name, maintenance.Policy{KeepLast: 3, Grace: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	f.d = &awsfn.Deps{
		Config: awsfn.Config{Role: awsfn.RoleCompactor, Warehouse: fanWarehouse, Bucket: fanBucket, Prefix: "warehouse",
			Margin: 100 * time.Millisecond, Lease: 5 * time.Minute, CompactionQueueURL: fanQueueURL, InlineTables: -1, LogLevel: "debug"},
		Logger: awsfn.NewLogger(f.logs, "debug", awsfn.RoleCompactor), Clock: clock, Store: disk, Root: "warehouse",
		Locker: lock.NewInProcess(clock), Queue: queue.NewEmbedded(queue.EmbeddedOptions{}), Jobs: f.jobs, Metrics: io.Discard,
	}
	return f
}

// write upserts one row into a table (a fresh fragment: the table changed).
func (f *fleet) write(t *testing.T, name, key string) {
	t.Helper()
	tb, err := table.Open(context.Background(), f.st, "warehouse/tables/"+name, table.Options{Clock: f.clock})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Upsert(context.Background(), row(key, "v")); err != nil {
		t.Fatal(err)
	}
}

// fragments is the number of fragments of a table's latest version.
func (f *fleet) fragments(t *testing.T, name string) int {
	t.Helper()
	tb, err := table.Open(context.Background(), f.st, "warehouse/tables/"+name, table.Options{Clock: f.clock})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := tb.Latest(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return len(snap.Manifest().Fragments)
}

func (f *fleet) scheduled(t *testing.T, ctx context.Context) awsfn.CompactSummary {
	t.Helper()
	out, err := f.d.HandleCompactor(ctx, readEvent(t, "scheduled.json"))
	if err != nil {
		t.Fatalf("scheduled run: %v", err)
	}
	return out.(awsfn.CompactSummary)
}

// batch runs the compactor's SQS mode on bodies (one record each).
func (f *fleet) batch(t *testing.T, bodies ...string) events.SQSEventResponse {
	t.Helper()
	out, err := f.d.HandleCompactor(context.Background(), jobsEvent(bodies...))
	if err != nil {
		t.Fatalf("SQS batch: %v", err)
	}
	return out.(events.SQSEventResponse)
}

func jobsEvent(bodies ...string) []byte {
	ev := events.SQSEvent{}
	for i, b := range bodies {
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: fmt.Sprint("m", i), Body: b, EventSource: "aws:sqs",
			EventSourceARN: fanQueueARN, Attributes: map[string]string{"ApproximateReceiveCount": "1"}})
	}
	raw, _ := json.Marshal(ev)
	return raw
}

func jobBody(j awsfn.Job) string {
	b, _ := json.Marshal(j)
	return string(b)
}

func bodies(jobs []awsfn.OutJob) []string {
	var out []string
	for _, j := range jobs {
		out = append(out, jobBody(j.Job))
	}
	return out
}

func tablesOf(jobs []awsfn.OutJob) []string {
	var out []string
	for _, j := range jobs {
		out = append(out, j.Job.Table)
	}
	sort.Strings(out)
	return out
}

// TestFanoutScheduledThenJobs: with InlineTables 2 the scheduled run
// maintains two tables itself and sends the others as table jobs (before
// its inline work); the same handler in its SQS mode maintains them, and a
// job delivered twice or out of order is harmless.
func TestFanoutScheduledThenJobs(t *testing.T) {
	names := []string{"t1", "t2", "t3", "t4", "t5"}
	f := newFleet(t, names)
	f.d.Config.InlineTables = 2
	before := f.fragments(t, "t5")
	sum := f.scheduled(t, context.Background())
	sent := f.jobs.take()
	// _registry and _stats are registered tables too: 7 in all.
	if len(sum.Tables) != 2 || sum.JobsEnqueued != 5 || sum.Registered != 7 || sum.Errors != 0 || sum.NotReached != 0 {
		t.Fatalf("summary %+v", sum)
	}
	for _, j := range sent {
		if j.Job.Reason != fleetpkg.ReasonFanout || j.Job.Attempt != 0 || j.Delay != 0 || j.Job.Warehouse != fanWarehouse {
			t.Fatalf("fan-out job %+v", j)
		}
	}
	// Delivered twice, in reverse order, in one batch: each table once.
	bs := bodies(sent)
	all := append(append([]string{}, bs...), bs[0])
	for i, j := 0, len(all)-1; i < j; i, j = i+1, j-1 {
		all[i], all[j] = all[j], all[i]
	}
	resp := f.batch(t, all...)
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %+v", resp.BatchItemFailures)
	}
	if extra := f.jobs.take(); len(extra) != 0 {
		t.Fatalf("follow-up jobs after successful jobs: %+v", extra)
	}
	for _, n := range names {
		if got := f.fragments(t, n); got != 1 {
			t.Fatalf("%s: %d fragments after maintenance, want 1 (was %d)", n, got, before)
		}
	}
	if !strings.Contains(f.logs.String(), `"msg":"table job done"`) {
		t.Fatal("no table job done log line")
	}
	// Again, late: still harmless.
	if resp := f.batch(t, bs...); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("redelivery: %+v", resp.BatchItemFailures)
	}
}

// TestFanoutFailingTableDoesNotDelayOthers: a table that always fails is
// retried with backoff in its own job, is never maintained inline again
// while its retry is pending, and neither its failure nor its retries hold
// up the other tables, inline or in the same batch.
func TestFanoutFailingTableDoesNotDelayOthers(t *testing.T) {
	good := []string{"b1", "b2", "b3"}
	f := newFleet(t, good, "0-broken") // first in registry order
	sum := f.scheduled(t, context.Background())
	if sum.Errors != 1 || len(sum.Tables) != 6 || sum.Tables[2].Table != "0-broken" || !strings.HasPrefix(sum.Tables[2].Skipped, "error:") {
		t.Fatalf("first run %+v", sum)
	}
	for _, n := range good {
		if f.fragments(t, n) != 1 {
			t.Fatalf("%s not compacted in the run where 0-broken failed", n)
		}
	}
	retry := f.jobs.take()
	if len(retry) != 1 || retry[0].Job.Table != "0-broken" || retry[0].Job.Attempt != 1 || retry[0].Delay != fleetpkg.BackoffOf(fleetpkg.ModeJobs).Delay(1) ||
		!retry[0].Job.NotBefore.Equal(f.clock.Now().Add(time.Minute)) {
		t.Fatalf("retry job %+v", retry)
	}
	// The next scheduled run leaves it to its job: it is not picked first
	// again. The others are maintained if they need it (b1 was written) and
	// skipped as idle otherwise; none is left unreached.
	f.clock.Advance(15 * time.Minute)
	f.write(t, "b1", "new")
	sum = f.scheduled(t, context.Background())
	if sum.InRetry+sum.BackingOff != 1 || sum.Errors != 0 || len(sum.Tables)+sum.Idle != 5 || sum.NotReached != 0 {
		t.Fatalf("second run %+v", sum)
	}
	for _, ts := range sum.Tables {
		if ts.Table == "0-broken" {
			t.Fatal("a table in retry was maintained inline again")
		}
	}
	// Its retry in a batch with a good table's job: the good one is done,
	// the broken one gets its next retry (backoff doubled), and no record
	// is reported for retry (no receive counts towards the DLQ).
	f.clock.Advance(time.Minute)
	resp := f.batch(t, jobBody(retry[0].Job), jobBody(awsfn.Job{V: 1, Warehouse: fanWarehouse, Table: "b2"}))
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %+v", resp.BatchItemFailures)
	}
	next := f.jobs.take()
	if len(next) != 1 || next[0].Job.Attempt != 2 || next[0].Delay != 2*time.Minute {
		t.Fatalf("second retry %+v", next)
	}
	// Delivered before its not-before (SQS delays top out at 15 min): sent
	// back with the rest of the wait, acknowledged, nothing done.
	early := next[0].Job
	early.NotBefore = f.clock.Now().Add(40 * time.Minute)
	if resp := f.batch(t, jobBody(early)); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("early: %+v", resp.BatchItemFailures)
	}
	if back := f.jobs.take(); len(back) != 1 || back[0].Delay != 15*time.Minute || jobBody(back[0].Job) != jobBody(early) {
		t.Fatalf("early job sent back as %+v", back)
	}
	// The backoff is capped, so the table keeps being retried.
	if fleetpkg.BackoffOf(fleetpkg.ModeJobs).Delay(30) != fleetpkg.BackoffOf(fleetpkg.ModeJobs).Max {
		t.Fatalf("backoff(30) = %v", fleetpkg.BackoffOf(fleetpkg.ModeJobs).Delay(30))
	}
	// The job was lost: past MarkerStale the scheduled run resends it.
	f.clock.Advance(fleetpkg.MarkerStale + time.Minute)
	sum = f.scheduled(t, context.Background())
	lost := f.jobs.take()
	if sum.InRetry != 1 || len(lost) != 1 || lost[0].Job.Table != "0-broken" || lost[0].Job.Reason != fleetpkg.ReasonLost {
		t.Fatalf("after the marker went stale: %+v, jobs %+v", sum, lost)
	}
}

// TestFanoutTimedOutTableDoesNotDelayOthers: a table whose maintenance
// always runs into the deadline (every request hangs) is the first inline;
// the tables the run then has no time for are sent as jobs at once, the
// slow one gets a follow-up job and a marker, and the next run maintains
// the others inline while the slow one waits for its job.
func TestFanoutTimedOutTableDoesNotDelayOthers(t *testing.T) {
	f := newFleet(t, []string{"0-slow", "b1", "b2", "b3"})
	f.d.Store = hangStore{Store: f.st, prefix: "warehouse/tables/0-slow/"}
	ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
	defer cancel()
	sum := f.scheduled(t, ctx)
	jobs := f.jobs.take()
	if len(sum.Tables) != 3 || sum.Tables[2].Table != "0-slow" || !strings.HasPrefix(sum.Stopped, "deadline") {
		t.Fatalf("summary %+v", sum)
	}
	got := tablesOf(jobs)
	want := []string{"0-slow", "b1", "b2", "b3"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("jobs for %v, want %v", got, want)
	}
	// The next run, with time: 0-slow is left to its job (or backs off),
	// the rest in need are maintained inline, the others are idle.
	f.d.Store = f.st
	sum = f.scheduled(t, context.Background())
	if sum.InRetry+sum.BackingOff != 1 || sum.Errors != 0 || len(sum.Tables)+sum.Idle != 5 || sum.NotReached != 0 {
		t.Fatalf("next run %+v", sum)
	}
	for _, n := range []string{"b1", "b2", "b3"} {
		if f.fragments(t, n) != 1 {
			t.Fatalf("%s not compacted", n)
		}
	}
}

// TestCompactorJobsRejectBadInput: malformed, forged and unknown-table jobs
// are dropped with a clear error, none is reported for retry, nothing is
// sent and nothing in the store changes; a batch from another queue fails
// the invocation; without a compaction queue an SQS batch is rejected as
// before.
func TestCompactorJobsRejectBadInput(t *testing.T) {
	f := newFleet(t, []string{"registry"})
	ctx := context.Background()
	keys := func() []string {
		var out []string
		after := ""
		for {
			p, err := f.st.List(ctx, objstore.ListOptions{Prefix: "warehouse/", StartAfter: after})
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range p.Objects {
				out = append(out, o.Key)
				after = o.Key
			}
			if !p.Truncated {
				return out
			}
		}
	}
	before := keys()
	bad := map[string]string{
		"not JSON":          "this is not a job",
		"cleanup message":   `{"v":1,"table":"registry","root":"warehouse/tables/registry/","from":1,"to":3}`,
		"version":           `{"v":2,"warehouse":"` + fanWarehouse + `","table":"registry"}`,
		"other warehouse":   `{"v":1,"warehouse":"s3://elsewhere/warehouse","table":"registry"}`,
		"unknown table":     `{"v":1,"warehouse":"` + fanWarehouse + `","table":"no-such-table"}`,
		"path in name":      `{"v":1,"warehouse":"` + fanWarehouse + `","table":"../registry"}`,
		"negative attempt":  `{"v":1,"warehouse":"` + fanWarehouse + `","table":"registry","attempt":-1}`,
		"injected field":    `{"v":1,"warehouse":"` + fanWarehouse + `","table":"registry","root":"warehouse/"}`,
		"no table":          `{"v":1,"warehouse":"` + fanWarehouse + `"}`,
		"foreign S3 source": `{"Records":[{"eventSource":"aws:sns"}]}`,
		"EventBridge other": `{"source":"aws.ec2","detail-type":"Object Created","detail":{}}`,
	}
	var names, bs []string
	for n := range bad {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		bs = append(bs, bad[n])
	}
	resp := f.batch(t, bs...)
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("reported for retry: %+v", resp.BatchItemFailures)
	}
	if sent := f.jobs.take(); len(sent) != 0 {
		t.Fatalf("jobs sent for bad input: %+v", sent)
	}
	if after := keys(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("the store changed:\n%v\n%v", before, after)
	}
	if n := strings.Count(f.logs.String(), "dropping a message it can never process"); n != len(bad) {
		t.Fatalf("%d drop lines, want %d:\n%s", n, len(bad), f.logs.String())
	}
	for _, want := range []string{"unknown table", "job for warehouse", "version 2", "unknown field", "attempt -1"} {
		if !strings.Contains(f.logs.String(), want) {
			t.Errorf("no error naming %q", want)
		}
	}
	// A batch from another queue (a wrongly wired mapping): nothing is
	// acknowledged, the invocation fails.
	ev := events.SQSEvent{Records: []events.SQSMessage{{MessageId: "x", Body: "{}", EventSource: "aws:sqs",
		EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:tablekeep-cleanup"}}}
	raw, _ := json.Marshal(ev)
	if _, err := f.d.HandleCompactor(ctx, raw); !errors.Is(err, awsfn.ErrUnsupportedEvent) || !strings.Contains(err.Error(), "tablekeep-cleanup") {
		t.Fatalf("foreign queue: %v", err)
	}
	// No compaction queue: an SQS batch is not the compactor's.
	f.d.Jobs = nil
	if _, err := f.d.HandleCompactor(ctx, readEvent(t, "sqs-compaction-job.json")); !errors.Is(err, awsfn.ErrUnsupportedEvent) {
		t.Fatalf("without a compaction queue: %v", err)
	}
}

// TestCompactorEventSamples runs the handler on events/sqs-compaction-job.json
// and events/s3-notification.json: the job and both notification formats
// for the registry table maintain it (once for the whole batch); the retry
// job before its not-before is sent back; S3's test event and a
// notification for an unregistered prefix are ignored with a log line, not
// dropped or retried.
func TestCompactorEventSamples(t *testing.T) {
	f := newFleet(t, []string{"registry"})
	f.d.Clock = fakeclock.New(time.Date(2026, 1, 1, 3, 0, 0, 0, time.UTC)) // the samples' time
	ctx := context.Background()
	out, err := f.d.HandleCompactor(ctx, readEvent(t, "sqs-compaction-job.json"))
	if err != nil {
		t.Fatal(err)
	}
	if resp := out.(events.SQSEventResponse); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %+v", resp)
	}
	if f.fragments(t, "registry") != 1 {
		t.Fatal("registry not compacted by its job")
	}
	back := f.jobs.take()
	if len(back) != 1 || back[0].Job.Attempt != 2 || back[0].Delay != 4*time.Minute {
		t.Fatalf("the early retry job came back as %+v", back)
	}

	// Notifications: write to the table again, then deliver the sample.
	g := newFleet(t, []string{"registry"})
	out, err = g.d.HandleCompactor(ctx, readEvent(t, "s3-notification.json"))
	if err != nil {
		t.Fatal(err)
	}
	if resp := out.(events.SQSEventResponse); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %+v", resp)
	}
	if g.fragments(t, "registry") != 1 {
		t.Fatal("registry not compacted on its notification")
	}
	logs := g.logs.String()
	if strings.Count(logs, `"msg":"table job done"`) != 1 || !strings.Contains(logs, `"records":2`) {
		t.Fatalf("want one maintenance for the two notifications of registry:\n%s", logs)
	}
	if !strings.Contains(logs, "no registered table at warehouse/not-registered/") || strings.Contains(logs, "dropping") {
		t.Fatalf("unregistered prefix: want an ignore line and no drop:\n%s", logs)
	}
	if sent := g.jobs.take(); len(sent) != 0 {
		t.Fatalf("jobs sent: %+v", sent)
	}
}

func TestParseNotification(t *testing.T) {
	for _, c := range []struct {
		body string
		keys string
		ok   bool
		err  bool
	}{
		{`{"Records":[{"eventSource":"aws:s3","eventName":"ObjectCreated:Put","s3":{"bucket":{"name":"b"},"object":{"key":"w/t/_versions/a+b%2Bc.manifest"}}}]}`, "[{b w/t/_versions/a b+c.manifest}]", true, false},
		{`{"Records":[{"eventSource":"aws:s3","eventName":"ObjectRemoved:Delete","s3":{"bucket":{"name":"b"},"object":{"key":"k"}}}]}`, "[]", true, false},
		{`{"Records":[{"eventSource":"aws:s3","eventName":"ObjectCreated:Put","s3":{"object":{"key":"%zz"}}}]}`, "[]", true, true},
		{`{"Service":"Amazon S3","Event":"s3:TestEvent"}`, "[]", true, false},
		{`{"source":"aws.s3","detail-type":"Object Created","detail":{"bucket":{"name":"b"},"object":{"key":"a b"}}}`, "[{b a b}]", true, false},
		{`{"source":"aws.s3","detail-type":"Object Deleted","detail":{}}`, "[]", true, false},
		{`{"v":1,"table":"x"}`, "[]", false, false},
		{`garbage`, "[]", false, false},
	} {
		keys, ok, err := awsfn.ParseNotification([]byte(c.body))
		if fmt.Sprint(keys) != c.keys && !(c.keys == "[]" && len(keys) == 0) || ok != c.ok || (err != nil) != c.err {
			t.Errorf("%s: %v %v %v", c.body, keys, ok, err)
		}
		if err != nil && !errors.Is(err, queue.ErrPermanent) {
			t.Errorf("%s: error %v is not permanent", c.body, err)
		}
	}
}

func TestParseJob(t *testing.T) {
	j, err := awsfn.ParseJob([]byte(`{"v":1,"warehouse":"s3://b/w","table":"t","attempt":3,"not_before":"2026-01-01T00:00:00Z","reason":"retry"}`), "s3://b/w")
	if err != nil || j.Attempt != 3 || j.NotBefore.IsZero() || j.Table != "t" {
		t.Fatalf("%+v %v", j, err)
	}
	for _, b := range []string{``, `{}`, `[]`, `{"v":1,"warehouse":"s3://b/w","table":"t"} {}`, `{"v":1,"warehouse":"s3://b/w","table":"t","attempt":2000000}`} {
		if _, err := awsfn.ParseJob([]byte(b), "s3://b/w"); !errors.Is(err, awsfn.ErrInvalidJob) || !errors.Is(err, queue.ErrPermanent) {
			t.Errorf("%q: %v", b, err)
		}
	}
	// Sent jobs read back (the wire format is JSON with the fields above).
	var buf bytes.Buffer
	_ = json.NewEncoder(&buf).Encode(awsfn.Job{V: 1, Warehouse: "s3://b/w", Table: "t"})
	if strings.Contains(buf.String(), "not_before") {
		t.Errorf("a job without not-before encodes it: %s", buf.String())
	}
}

func TestFanoutConfig(t *testing.T) {
	env := map[string]string{
		awsfn.EnvWarehouse: "s3://bucket-x/w", awsfn.EnvLockTable: "locks", awsfn.EnvQueueURL: "https://sqs.us-east-1.amazonaws.com/1/cleanup",
	}
	get := func(k string) string { return env[k] }
	c, err := awsfn.LoadConfig(awsfn.RoleCompactor, get)
	if err != nil || c.CompactionQueueURL != "" || c.InlineTables != -1 {
		t.Fatalf("%+v %v", c, err)
	}
	env[awsfn.EnvCompactionQueueURL] = fanQueueURL
	env[awsfn.EnvInlineTables] = "0"
	if c, err = awsfn.LoadConfig(awsfn.RoleCompactor, get); err != nil || c.CompactionQueueURL != fanQueueURL || c.InlineTables != 0 {
		t.Fatalf("%+v %v", c, err)
	}
	env[awsfn.EnvInlineTime] = "45s"
	if c, err = awsfn.LoadConfig(awsfn.RoleCompactor, get); err != nil || c.InlineTime != 45*time.Second {
		t.Fatalf("%+v %v", c, err)
	}
	env[awsfn.EnvSafetyScanEvery] = "6h"
	if c, err = awsfn.LoadConfig(awsfn.RoleCompactor, get); err != nil || c.SafetyScanEvery != 6*time.Hour {
		t.Fatalf("%s=6h: %+v %v", awsfn.EnvSafetyScanEvery, c.SafetyScanEvery, err)
	}
	env[awsfn.EnvSafetyScanEvery] = "0"
	if c, err = awsfn.LoadConfig(awsfn.RoleCompactor, get); err != nil || c.SafetyScanEvery != 0 {
		t.Fatalf("%s=0: %+v %v", awsfn.EnvSafetyScanEvery, c.SafetyScanEvery, err)
	}
	env[awsfn.EnvSafetyScanEvery] = "8d"
	if _, err = awsfn.LoadConfig(awsfn.RoleCompactor, get); err == nil || !strings.Contains(err.Error(), awsfn.EnvSafetyScanEvery) {
		t.Fatalf("%s=8d accepted: %v", awsfn.EnvSafetyScanEvery, err)
	}
	delete(env, awsfn.EnvSafetyScanEvery)
	env[awsfn.EnvCompactionQueueURL] = env[awsfn.EnvQueueURL]
	env[awsfn.EnvInlineTables] = "-2"
	env[awsfn.EnvInlineTime] = "1h"
	_, err = awsfn.LoadConfig(awsfn.RoleCompactor, get)
	if err == nil || !strings.Contains(err.Error(), awsfn.EnvCompactionQueueURL+" must differ") || !strings.Contains(err.Error(), awsfn.EnvInlineTables) ||
		!strings.Contains(err.Error(), awsfn.EnvInlineTime) {
		t.Fatalf("bad fan-out config accepted: %v", err)
	}
}

// TestFanoutNoProgressIsRetriedWithBackoff: a job whose compaction stops at
// the deadline before committing any group (its first group cannot fit the
// time left) is retried with backoff, not continued at once: a
// continuation would only repeat it.
func TestFanoutNoProgressIsRetriedWithBackoff(t *testing.T) {
	f := newFleet(t, []string{"t1"})
	f.d.Config.Margin = time.Hour // no group ever fits before the deadline
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := f.d.HandleCompactor(ctx, jobsEvent(jobBody(awsfn.Job{V: 1, Warehouse: fanWarehouse, Table: "t1"})))
	if err != nil {
		t.Fatal(err)
	}
	if resp := out.(events.SQSEventResponse); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %+v", resp)
	}
	sent := f.jobs.take()
	if len(sent) != 1 || sent[0].Job.Reason != fleetpkg.ReasonRetry || sent[0].Job.Attempt != 1 || sent[0].Delay != time.Minute {
		t.Fatalf("follow-up %+v, want a retry after 1 min", sent)
	}
	if f.fragments(t, "t1") != 4 {
		t.Fatal("t1 was compacted")
	}
	if !strings.Contains(f.logs.String(), "compaction made no progress") {
		t.Fatal("no 'no progress' error logged")
	}
}

// TestFanoutSimulatedDay runs a warehouse with one always-failing table for
// a simulated day on the fake clock: a scheduled run every 15 minutes and a
// compaction queue delivering each job when its delay (at most 15 min, as
// SQS) has passed. The failing table is maintained inline only in the
// first run, is retried by its own jobs with the backoff capped at an hour,
// its marker never goes stale while its jobs cycle (MarkerStale exceeds the
// longest gap between two of its attempts: the jobs' longest backoff (1 h) plus the capped
// SQS delay rounding), so no duplicate "lost" job is sent; and the other
// table, written before every run, is never left unreached and is
// maintained at least once every CompactMaxWait + one period (need-driven:
// a run where it is below its thresholds skips it as idle).
func TestFanoutSimulatedDay(t *testing.T) {
	good := []string{"g1"}
	f := newFleet(t, good, "0-broken")
	type pending struct {
		job     awsfn.Job
		visible time.Time
	}
	var queued []pending
	enqueue := func() {
		for _, j := range f.jobs.take() {
			queued = append(queued, pending{j.Job, f.clock.Now().Add(min(j.Delay, 15*time.Minute))})
		}
	}
	attempts, lost, inlineBroken, runs := 0, 0, 0, 0
	start := f.clock.Now()
	lastGood := map[string]time.Time{}
	bound := maintenance.DefaultPolicy().CompactMaxWait + 15*time.Minute
	for f.clock.Now().Sub(start) < 24*time.Hour {
		if f.clock.Now().Sub(start)%(15*time.Minute) == 0 {
			runs++
			for _, g := range good {
				f.write(t, g, fmt.Sprint("run", runs))
			}
			sum := f.scheduled(t, context.Background())
			if sum.NotReached != 0 {
				t.Fatalf("run %d: %d tables not reached (%+v)", runs, sum.NotReached, sum)
			}
			for _, ts := range sum.Tables {
				if ts.Skipped == "" {
					lastGood[ts.Table] = f.clock.Now()
				}
				if ts.Table == "0-broken" {
					inlineBroken++
				}
			}
			for _, g := range good {
				if last, ok := lastGood[g]; !ok || f.clock.Now().Sub(last) > bound {
					t.Fatalf("run %d: %s last maintained %v ago, bound %s (%+v)", runs, g, f.clock.Now().Sub(last), bound, sum)
				}
			}
			enqueue()
		}
		var due []string
		rest := queued[:0]
		for _, p := range queued {
			if !p.visible.After(f.clock.Now()) {
				due = append(due, jobBody(p.job))
				if p.job.Reason == fleetpkg.ReasonLost {
					lost++
				}
				if p.job.Table == "0-broken" && !p.job.NotBefore.After(f.clock.Now()) {
					attempts++
				}
			} else {
				rest = append(rest, p)
			}
		}
		queued = rest
		if len(due) > 0 {
			if resp := f.batch(t, due...); len(resp.BatchItemFailures) != 0 {
				t.Fatalf("failures %+v", resp.BatchItemFailures)
			}
			enqueue()
		}
		f.clock.Advance(time.Minute)
	}
	t.Logf("%d scheduled runs, %d attempts of the failing table by its jobs, %d lost-job resends", runs, attempts, lost)
	if inlineBroken != 1 {
		t.Errorf("the failing table was maintained inline in %d runs, want only the first", inlineBroken)
	}
	if lost != 0 {
		t.Errorf("%d jobs resent as lost while the failing table's jobs were cycling", lost)
	}
	// Waits of 1, 2, 4, 8, 16, 32 min, then hourly: about 29 attempts in a day.
	if attempts < 24 || attempts > 32 {
		t.Errorf("%d attempts of the failing table in a day, want about 29 (backoff capped at an hour)", attempts)
	}
}

// TestFanoutJobFailsAtEveryRequest: a table job whose invocation fails at
// any one object-store request (before it is sent, or after: the response
// lost) leaves the table readable with every row, and what it hands on (a
// retry job, a batch failure or an invocation error, each redelivered here
// with the fault gone) finishes the compaction. Rule 1 and 3 for the SQS
// mode.
func TestFanoutJobFailsAtEveryRequest(t *testing.T) {
	want := map[string]string{"k0": "v0", "k1": "v1", "k2": "v2", "k3": "v3"}
	setup := func() (*fleet, *objstore.Faulty) {
		f := newFleet(t, []string{"t1"})
		fs := objstore.NewFaulty(f.st)
		f.d.Store = fs
		return f, fs
	}
	job := jobBody(awsfn.Job{V: 1, Warehouse: fanWarehouse, Table: "t1"})
	f, fs := setup()
	if resp := f.batch(t, job); len(resp.BatchItemFailures) != 0 || f.fragments(t, "t1") != 1 {
		t.Fatalf("clean run: %+v", resp)
	}
	total := fs.Requests()
	t.Logf("a clean job makes %d requests", total)
	for _, after := range []bool{false, true} {
		for n := int64(1); n <= total; n++ {
			f, fs := setup()
			hook := func(i int64, op objstore.Op) error {
				if i == n {
					return fmt.Errorf("request %d (%s %s): %w", i, op.Kind, op.Key, objstore.ErrInjected)
				}
				return nil
			}
			if after {
				fs.SetAfter(hook)
			} else {
				fs.SetBefore(hook)
			}
			out, err := f.d.HandleCompactor(context.Background(), jobsEvent(job))
			fs.SetBefore(nil)
			fs.SetAfter(nil)
			redeliver := err != nil
			if err == nil && len(out.(events.SQSEventResponse).BatchItemFailures) > 0 {
				redeliver = true
			}
			next := bodies(f.jobs.take())
			if redeliver {
				next = append(next, job)
			}
			for len(next) > 0 {
				var j awsfn.Job
				_ = json.Unmarshal([]byte(next[0]), &j)
				if wait := j.NotBefore.Sub(f.clock.Now()); wait > 0 {
					f.clock.Advance(wait) // delivered when due
				}
				if resp := f.batch(t, jobBody(j)); len(resp.BatchItemFailures) != 0 {
					t.Fatalf("fault at %d (after %v): redelivery failed: %+v", n, after, resp)
				}
				next = append(next[1:], bodies(f.jobs.take())...)
			}
			tb, err := table.Open(context.Background(), f.st, "warehouse/tables/t1", table.Options{Clock: f.clock})
			if err != nil {
				t.Fatal(err)
			}
			if got := rows(t, tb); !sameRows(got, want) {
				t.Fatalf("fault at %d (after %v): rows %v", n, after, got)
			}
			if fr := f.fragments(t, "t1"); fr != 1 {
				t.Fatalf("fault at %d (after %v): %d fragments once the follow-ups ran", n, after, fr)
			}
		}
	}
}

// tickStore advances the fake clock by step on every request: maintenance
// that takes time.
type tickStore struct {
	objstore.Store
	clock *fakeclock.Clock
	step  time.Duration
}

func (s tickStore) Get(ctx context.Context, key string) ([]byte, error) {
	s.clock.Advance(s.step)
	return s.Store.Get(ctx, key)
}

func (s tickStore) List(ctx context.Context, o objstore.ListOptions) (objstore.ListPage, error) {
	s.clock.Advance(s.step)
	return s.Store.List(ctx, o)
}

// TestFanoutInlineTime: with TABLEKEEP_INLINE_TIME the scheduled run stops
// starting tables itself once the budget (minus the longest table so far)
// is spent and sends the rest as jobs, so it ends soon after the budget
// however many tables there are.
func TestFanoutInlineTime(t *testing.T) {
	f := newFleet(t, []string{"t1", "t2", "t3", "t4", "t5", "t6"})
	f.d.Store = tickStore{Store: f.st, clock: f.clock, step: 100 * time.Millisecond}
	f.d.Config.InlineTime = 10 * time.Second
	start := f.clock.Now()
	sum := f.scheduled(t, context.Background())
	elapsed := f.clock.Now().Sub(start)
	t.Logf("inline %d tables in %v (simulated), %d jobs, stopped %q", len(sum.Tables), elapsed, sum.JobsEnqueued, sum.Stopped)
	if len(sum.Tables) < 1 || len(sum.Tables) >= 8 || len(sum.Tables)+sum.JobsEnqueued != 8 || !strings.HasPrefix(sum.Stopped, "inline time 10s") {
		t.Fatalf("summary %+v", sum)
	}
	if elapsed > 20*time.Second {
		t.Errorf("the run took %v of simulated time with an inline budget of 10 s", elapsed)
	}
}

// panicStore panics on every GET under prefix: a table whose maintenance
// kills the invocation (as running out of memory does) every time it is
// tried. The scan (LISTs only) still sees it.
type panicStore struct {
	objstore.Store
	prefix string
}

func (p panicStore) Get(ctx context.Context, key string) ([]byte, error) {
	if strings.HasPrefix(key, p.prefix) {
		panic("killed while maintaining " + key)
	}
	return p.Store.Get(ctx, key)
}

// TestFanoutInlineCrashIsNotPickedFirstAgain: a scheduled run that dies
// while maintaining a table inline (a panic here; out of memory or a kill
// on Lambda) leaves its inline run record. The next scheduled run, once
// that run's deadline has passed, does not maintain the record's tables
// inline: each gets a retry job with backoff and a retry marker, and the
// other tables are maintained as usual. Without the record, every run
// would pick the same table first again and die on it.
func TestFanoutInlineCrashIsNotPickedFirstAgain(t *testing.T) {
	f := newFleet(t, []string{"0-boom", "b1", "b2", "b3"})
	f.d.Store = panicStore{Store: f.st, prefix: "warehouse/tables/0-boom/"}
	func() {
		defer func() {
			if r := recover(); r == nil {
				t.Fatal("the first run did not die on 0-boom")
			}
		}()
		f.scheduled(t, context.Background())
	}()
	if n := len(inlineRuns(t, f.st)); n != 1 {
		t.Fatalf("%d inline run records after the run died, want 1", n)
	}
	// Within the dead run's deadline it may still be running: its tables
	// are left alone, nothing is sent for them.
	f.jobs.take()
	sum := f.scheduled(t, context.Background())
	// (_registry and _stats, maintained before the run died, are idle: until
	// the index was sharded, the record itself sorted first in _fleet/ and
	// made the index unreadable, so every table was in need here.)
	if len(f.jobs.take()) != 0 || sum.InRetry+sum.Idle != sum.Registered || sum.InRetry < 4 || len(sum.Tables) != 0 {
		t.Fatalf("run within the dead run's deadline: %+v", sum)
	}
	// Past its deadline: every table of the dead run (which one killed it
	// is unknown) gets a retry job with backoff and a marker.
	f.clock.Advance(20 * time.Minute)
	sum = f.scheduled(t, context.Background())
	jobs := f.jobs.take()
	if len(sum.Tables) != 0 || len(jobs) != 4 {
		t.Fatalf("run after the dead run's deadline: %+v, jobs %v", sum, tablesOf(jobs))
	}
	var others []awsfn.OutJob
	for _, j := range jobs {
		if j.Job.Reason != fleetpkg.ReasonRetry || j.Delay <= 0 {
			t.Fatalf("job %+v, want a retry with backoff", j)
		}
		if j.Job.Table != "0-boom" {
			others = append(others, j)
		}
	}
	// The compaction queue's consumer runs the jobs after their delay (0-boom's
	// job kills its consumer each time and ends in the DLQ: not run here).
	f.clock.Advance(16 * time.Minute)
	f.batch(t, bodies(others)...)
	for range 3 {
		f.clock.Advance(16 * time.Minute)
		sum = f.scheduled(t, context.Background())
		f.jobs.take()
		for _, tr := range sum.Tables {
			if tr.Table == "0-boom" {
				t.Fatalf("0-boom maintained inline again: %+v", sum)
			}
		}
	}
	for _, n := range []string{"b1", "b2", "b3"} {
		if f.fragments(t, n) != 1 {
			t.Fatalf("%s not compacted", n)
		}
	}
	if _, err := f.st.Head(context.Background(), "warehouse/_fleet/retry/0-boom"); err != nil {
		t.Fatalf("0-boom has no retry marker: %v", err)
	}
	if recs := inlineRuns(t, f.st); len(recs) != 0 {
		t.Fatalf("inline run records left after runs that finished: %v", recs)
	}
}

// inlineRuns lists the inline run records (warehouse/_fleet/inline-run/).
func inlineRuns(t *testing.T, st objstore.Store) []string {
	t.Helper()
	var out []string
	if err := objstore.ListAll(context.Background(), st, "warehouse/_fleet/inline-run", "", func(o objstore.ObjectInfo) error {
		out = append(out, o.Key)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}
