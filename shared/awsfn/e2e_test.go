package awsfn_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/tablekeep/tablekeep/shared/awsfn"
	"github.com/tablekeep/tablekeep/shared/internal/testenv"
	"github.com/tablekeep/tablekeep/shared/internal/testkit"
	"github.com/tablekeep/tablekeep/shared/lock"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/queue"
	"github.com/tablekeep/tablekeep/shared/table"
)

// The event files in events/ name this warehouse prefix and table.
const (
	e2ePrefix   = "warehouse"
	e2eTable    = "registry"
	e2eRel      = "tables/registry"
	e2eKeepLast = 5
)

// TestLambdaEndToEnd builds the three bootstraps, runs each under
// aws-lambda-rie against versitygw (S3) and moto (DynamoDB, SQS), and drives
// them the way AWS would: registry churn, the compactor on a schedule, the
// cleaner on SQS batches until the queue is empty, then the sweeper. The
// functions run with the TEST-ONLY clock offset of 2h, so every version and
// file is past its 1h grace window without sleeping.
//
// Least privilege, enforced by the server: each function signs its S3
// requests with its own role's keys (a versitygw IAM account of role "user",
// allowed nothing by itself), and the bucket's policy is generated from
// template.yaml's role statements (awsfn.TemplateS3Statements). Every S3
// request goes through a recording pass-through proxy; the run must end with
// no AccessDenied (a denial is reported with the role, the action and the
// key). Then EveryGrantIsNeeded removes each S3 grant from the template in
// turn and replays the requests the role made against a bucket carrying the
// policy generated from that template: versitygw must deny at least one.
func TestLambdaEndToEnd(t *testing.T) {
	ctx := context.Background()
	st := testenv.S3Store(t)
	awsEndpoint := testenv.AWSEndpoint(t)
	template := readTemplate(t)
	keys := createRoleAccounts(t)
	putTemplatePolicy(t, st, template, e2ePrefix, keys)
	rec := newS3Recorder(t, testenv.S3Endpoint(t))
	bins := buildBootstraps(t, "compactor", "cleaner", "sweeper")

	// AWS resources, as infra/aws-resources.sh creates them.
	locks := randomName("tablekeep-locks-")
	if err := lock.CreateLockTable(ctx, testkit.DynamoClient(t), locks); err != nil {
		t.Fatal(err)
	}
	sqsc := testkit.SQSClient(t)
	queueURL, dlqURL, err := queue.CreateQueueWithDLQ(ctx, sqsc, randomName("tablekeep-cleanup-"), 5, time.Minute)
	if err != nil {
		t.Fatal(err)
	}

	// Churn on a registry-shaped table registered in the catalog.
	cat, tb, model := churnedTable(t, st, e2ePrefix, 120, 30)
	// A leftover of a crashed writer: a data file no version references.
	orphan := tb.Root() + table.DataPrefix + "00000000deadbeef.parquet"
	if err := st.Put(ctx, orphan, []byte("orphan")); err != nil {
		t.Fatal(err)
	}
	before, _ := tb.Stats(ctx)
	t.Logf("after churn: %+v", before)

	env := []string{
		"AWS_REGION=us-east-1",
		"AWS_ENDPOINT_URL=",
		"AWS_ENDPOINT_URL_S3=" + rec.URL(),
		"AWS_ENDPOINT_URL_DYNAMODB=" + awsEndpoint,
		"AWS_ENDPOINT_URL_SQS=" + awsEndpoint,
		"AWS_LAMBDA_FUNCTION_TIMEOUT=120",
		awsfn.EnvWarehouse + "=s3://" + st.Bucket() + "/" + e2ePrefix,
		awsfn.EnvLockTable + "=" + locks,
		awsfn.EnvQueueURL + "=" + queueURL,
		awsfn.EnvMargin + "=10s",
		awsfn.EnvClockOffset + "=2h",
		awsfn.EnvAllowOffset + "=test",
	}
	as := func(role awsfn.Role) []string {
		return append(env[:len(env):len(env)], "AWS_ACCESS_KEY_ID="+keys[role].Access, "AWS_SECRET_ACCESS_KEY="+keys[role].Secret,
			"AWS_SESSION_TOKEN=")
	}
	compactor := startRIE(t, "compactor", bins["compactor"], as(awsfn.RoleCompactor))
	cleaner := startRIE(t, "cleaner", bins["cleaner"], as(awsfn.RoleCleaner))
	sweeper := startRIE(t, "sweeper", bins["sweeper"], as(awsfn.RoleSweeper))

	// Wrong event kinds are rejected with a clear error.
	for _, c := range []struct {
		fn    *rie
		event []byte
		want  string
	}{
		{compactor, readEvent(t, "sqs-cleanup.json"), "compactor: unsupported event: got a batch of Records"},
		{cleaner, readEvent(t, "scheduled.json"), `cleaner: unsupported event: got an event from "aws.events"`},
		{sweeper, []byte(`{"hello":"world"}`), "sweeper: unsupported event: no source (keys [hello])"},
	} {
		if msg := invokeError(c.fn.invokeRaw(t, c.event)); !strings.Contains(msg, c.want) {
			t.Errorf("%s: error %q, want it to contain %q", c.fn.name, msg, c.want)
		}
	}

	// The compactor, on an EventBridge rule's event.
	var comp awsfn.CompactSummary
	compactor.invoke(t, readEvent(t, "scheduled.json"), &comp)
	t.Logf("compactor: %+v", comp)
	var reg *awsfn.TableSummary
	for i := range comp.Tables {
		if comp.Tables[i].Table == e2eTable {
			reg = &comp.Tables[i]
		}
	}
	if comp.Trigger != "aws.events" || comp.Errors != 0 || comp.NotReached != 0 || reg == nil {
		t.Fatalf("compactor summary %+v", comp)
	}
	wantFloor := reg.Latest - e2eKeepLast + 1
	if reg.GroupsDone < 1 || reg.FragmentsOut >= reg.FragmentsIn || reg.FencingToken == 0 ||
		reg.Floor != wantFloor || reg.RangesEnqueued != 1 || reg.Prunable != int(wantFloor-1) {
		t.Fatalf("registry: %+v, want compaction under a fencing token, floor %d, one range of %d versions", *reg, wantFloor, wantFloor-1)
	}

	// events/sqs-cleanup.json: two valid ranges of this table, both cleaned.
	var resp events.SQSEventResponse
	cleaner.invoke(t, readEvent(t, "sqs-cleanup.json"), &resp)
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("sqs-cleanup.json: failures %+v", resp.BatchItemFailures)
	}
	if vs, _ := tb.Versions(ctx); len(vs) == 0 || vs[0].Version != 7 {
		t.Fatalf("after cleaning [1,3] and [4,6] the oldest version is %+v, want 7", vs[:1])
	}
	// events/sqs-malformed.json: garbage, an unknown table, a foreign root.
	// All are dropped (logged), none reported for retry, nothing deleted.
	resp = events.SQSEventResponse{}
	cleaner.invoke(t, readEvent(t, "sqs-malformed.json"), &resp)
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("sqs-malformed.json: %+v reported for retry, want all dropped", resp.BatchItemFailures)
	}

	// A malformed message on the real queue reaches the cleaner and is never reported for retry.
	malformed := `{"v":1,"table":"` + e2eTable + `","root":"elsewhere/","from":1,"to":2}`
	if _, err := sqsc.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(queueURL), MessageBody: aws.String(malformed)}); err != nil {
		t.Fatal(err)
	}
	// The cleaner on SQS batches, as Lambda's event source mapping does:
	// delete what succeeded, make reported failures visible again.
	invocations := 0
	receives, retriedBy := drainQueue(t, sqsc, queueURL, func(raw []byte) events.SQSEventResponse {
		var r events.SQSEventResponse
		cleaner.invoke(t, raw, &r)
		invocations++
		return r
	})
	retried := 0
	for _, n := range retriedBy {
		retried += n
	}
	t.Logf("cleaner: %d invocations, %d retried, receives %v", invocations, retried, receives)
	if receives[malformed] == 0 || retried != 0 {
		t.Errorf("malformed message received %d times, %d items retried; want received, none retried", receives[malformed], retried)
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

	// The sweeper, on an EventBridge Scheduler event.
	var sw awsfn.SweepSummary
	sweeper.invoke(t, readEvent(t, "scheduler.json"), &sw)
	t.Logf("sweeper: %+v", sw)
	if sw.Trigger != "aws.scheduler" || sw.Errors != 0 || sw.NotReached != 0 || sw.Registered != 3 || sw.Deleted < 1 {
		t.Errorf("sweeper summary %+v, want the orphan deleted from 3 tables", sw)
	}

	// Rows exactly as the model says.
	if got := rows(t, tb); !sameRows(got, model) {
		t.Errorf("rows after maintenance:\n got  %v\n want %v", got, model)
	}
	// Versions pruned to policy: exactly the newest KeepLast remain, each readable.
	vs, err := tb.Versions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != e2eKeepLast || vs[0].Version != wantFloor || vs[len(vs)-1].Version != reg.Latest {
		t.Errorf("versions after cleanup %+v, want %d..%d", vs, wantFloor, reg.Latest)
	}
	for _, v := range vs {
		snap, err := tb.Checkout(ctx, v.Version)
		if err != nil {
			t.Fatalf("retained version %d: %v", v.Version, err)
		}
		if err := snap.Scan(ctx, table.ScanOptions{}, func(arrow.RecordBatch) error { return nil }); err != nil {
			t.Errorf("scan retained version %d: %v", v.Version, err)
		}
	}
	// No data or deletion file left that no stored version references, in
	// any registered table; the orphan is gone.
	refs, err := cat.Tables(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range refs {
		assertNoUnreferenced(t, st, ref)
	}
	if _, err := st.Head(ctx, orphan); err == nil {
		t.Errorf("orphan %s survived the sweep", orphan)
	}

	// Every function worked under its own role's keys, and versitygw,
	// enforcing the policy generated from the template, denied nothing.
	made := map[awsfn.Role][]s3Request{}
	for _, role := range awsfn.Roles {
		reqs := rec.Requests(keys[role].Access)
		made[role] = reqs
		if len(reqs) == 0 {
			t.Errorf("%s made no S3 request with its role's keys", role)
		}
		for _, d := range denials(role, reqs) {
			t.Error(d)
		}
		t.Logf("%s: %d S3 requests under its role, %d kinds", role, len(reqs), len(representatives(reqs)))
	}
	if root := rec.Requests(os.Getenv("AWS_ACCESS_KEY_ID")); len(root) > 0 {
		t.Errorf("%d function requests were signed with the root keys, not a role's: %v", len(root), root[0])
	}
	if t.Failed() {
		return
	}
	t.Run("EveryGrantIsNeeded", func(t *testing.T) { everyGrantIsNeeded(t, template, keys, made) })
}

// everyGrantIsNeeded removes each S3 grant of the template in turn and
// replays one request of each kind the role made in the end-to-end run
// against a scratch bucket whose policy versitygw enforces, generated from
// the template with that grant removed. Each removal must make versitygw
// deny at least one of them: a grant nothing needs is one too many, and a
// grant the functions need is shown needed by the real server (the run
// under the full template denied nothing, and neither does its replay).
func everyGrantIsNeeded(t *testing.T, template []byte, keys map[awsfn.Role]roleKeys, made map[awsfn.Role][]s3Request) {
	ctx := context.Background()
	scratch := testenv.S3Store(t)
	clients := map[awsfn.Role]*s3.Client{}
	for _, role := range awsfn.Roles {
		clients[role] = roleClient(t, keys[role])
	}
	replayAll := func(role awsfn.Role) []string {
		var denied []string
		for _, r := range representatives(made[role]) {
			if replay(ctx, t, clients[role], scratch.Bucket(), r) {
				denied = append(denied, fmt.Sprintf("AccessDenied on %s %s (needs %s)", r.Operation, r.Key, r.Action()))
			}
		}
		return denied
	}
	putTemplatePolicy(t, scratch, template, e2ePrefix, keys)
	for _, role := range awsfn.Roles {
		if d := replayAll(role); len(d) > 0 {
			t.Fatalf("%s: the replay under the full template is denied, so it does not reproduce the run: %v", role, d)
		}
	}
	grants := templateGrantsRemoved(t, template)
	if len(grants) == 0 {
		t.Fatal("no S3 grants found in the template")
	}
	for _, g := range grants {
		if strings.Contains(g.Name, ": s3:GetLifecycleConfiguration on") {
			// Read only from a versioned bucket (CheckBucket, TestCheckBucket);
			// versitygw neither versions the stack's buckets nor authorizes
			// lifecycle requests (it answers NotImplemented to anyone), so no
			// server here can show it needed. TestTemplateLeastPrivilege pins it.
			t.Logf("not enforceable locally: %s", g.Name)
			continue
		}
		if strings.Contains(g.Name, ": s3:GetBucketNotification on") {
			// The compactor's cold-start notification check
			// (checkNotifications, TestCheckNotificationsFallsBack):
			// versitygw answers NotImplemented to anyone, so no server here
			// can show it needed. TestTemplateLeastPrivilege pins it.
			t.Logf("not enforceable locally: %s", g.Name)
			continue
		}
		putTemplatePolicy(t, scratch, g.Template, e2ePrefix, keys)
		denied := replayAll(g.Role)
		if len(denied) == 0 {
			t.Errorf("without %s, nothing the %s did is denied: the grant is not needed (or the end-to-end run misses the path that needs it)", g.Name, g.Role)
			continue
		}
		if len(denied) > 2 {
			denied = append(denied[:2], fmt.Sprintf("and %d more", len(denied)-2))
		}
		t.Logf("without %s the %s fails: %s", g.Name, g.Role, strings.Join(denied, "; "))
	}
}

// assertNoUnreferenced lists a table's data and deletion files and checks
// each is referenced by a stored version's manifest.
func assertNoUnreferenced(t *testing.T, st objstore.Store, ref maintenance.TableRef) {
	t.Helper()
	ctx := context.Background()
	tb, err := table.Open(ctx, st, ref.Root, table.Options{})
	if err != nil {
		t.Fatal(err)
	}
	vs, err := tb.Versions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	referenced := map[string]bool{}
	for _, v := range vs {
		snap, err := tb.Checkout(ctx, v.Version)
		if err != nil {
			t.Fatalf("%s version %d: %v", ref.Name, v.Version, err)
		}
		for _, f := range snap.Manifest().Fragments {
			referenced[f.File.DataKey()] = true
			if f.Deletion != nil {
				referenced[table.DeletionKey(f.File, f.Deletion.ID)] = true
			}
		}
	}
	var files, unref int
	for _, prefix := range []string{table.DataPrefix, table.DeletionsPrefix} {
		err := objstore.ListAll(ctx, st, ref.Root+prefix, "", func(o objstore.ObjectInfo) error {
			files++
			if rel := strings.TrimPrefix(o.Key, ref.Root); !referenced[rel] {
				unref++
				t.Errorf("%s: %s is referenced by no stored version", ref.Name, rel)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%s: %d versions, %d files, all referenced: %s", ref.Name, len(vs), files, strconv.FormatBool(unref == 0))
}

// A function with a broken configuration reports every problem, naming the
// variables, at cold start and in each invocation's error (no services needed).
func TestLambdaColdStartConfigError(t *testing.T) {
	bins := buildBootstraps(t, "cleaner")
	fn := startRIE(t, "cleaner", bins["cleaner"], []string{
		"AWS_REGION=us-east-1",
		awsfn.EnvWarehouse + "=s3://tk-bucket/warehouse",
		awsfn.EnvQueueURL + "=",
		awsfn.EnvMargin + "=soon",
		awsfn.EnvClockOffset + "=2h",
		awsfn.EnvAllowOffset + "=",
	})
	for i := 0; i < 2; i++ {
		msg := invokeError(fn.invokeRaw(t, readEvent(t, "sqs-cleanup.json")))
		for _, want := range []string{"TABLEKEEP_QUEUE_URL is not set", `TABLEKEEP_SAFETY_MARGIN="soon" is not a duration`, "TABLEKEEP_CLOCK_OFFSET is for tests only"} {
			if !strings.Contains(msg, want) {
				t.Errorf("invocation %d: error %q does not mention %q", i, msg, want)
			}
		}
	}
	if !strings.Contains(fn.log.String(), `"msg":"cold start failed`) {
		t.Errorf("no cold-start error in the log:\n%s", fn.log.String())
	}
	// The one bootstrap with no role it knows.
	odd := startRIE(t, "janitor", bins["cleaner"], []string{"AWS_REGION=us-east-1", awsfn.EnvFunction + "=janitor"})
	if msg := invokeError(odd.invokeRaw(t, readEvent(t, "scheduled.json"))); !strings.Contains(msg, `TABLEKEEP_FUNCTION="janitor": want compactor, cleaner or sweeper`) {
		t.Errorf("unknown role: %q", msg)
	}
}
