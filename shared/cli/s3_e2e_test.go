package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/tablekeep/tablekeep/shared/awsfn"
	"github.com/tablekeep/tablekeep/shared/internal/awshttp"
	"github.com/tablekeep/tablekeep/shared/internal/testenv"
	"github.com/tablekeep/tablekeep/shared/lock"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/queue"
)

// stackEnv points the CLI at the local stack the way `source .stack/env`
// does: only TABLEKEEP_S3_ENDPOINT and TABLEKEEP_AWS_ENDPOINT, none of the
// SDK's endpoint variables (the CLI maps them), and no warehouse or lock
// table from the environment.
func stackEnv(t *testing.T) {
	t.Helper()
	testenv.S3Endpoint(t)
	testenv.AWSEndpoint(t)
	for _, k := range []string{"AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL_SQS",
		awsfn.EnvWarehouse, awsfn.EnvLockTable, awsfn.EnvQueueURL} {
		t.Setenv(k, "")
	}
	t.Setenv("AWS_REGION", "us-east-1")
}

// lockTable creates a DynamoDB lock table on moto and returns its name.
func lockTable(t *testing.T) string {
	t.Helper()
	cfg, err := config.LoadDefaultConfig(context.Background(), config.WithRegion("us-east-1"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.BaseEndpoint = aws.String(testenv.AWSEndpoint(t))
	name := strings.Replace(testenv.BucketName(t), "tk-", "locks-", 1)
	if err := lock.CreateLockTable(context.Background(), dynamodb.NewFromConfig(awshttp.Config(cfg)), name); err != nil {
		t.Fatalf("create lock table on moto: %v", err)
	}
	return name
}

func listKeys(t *testing.T, st objstore.Store) map[string]bool {
	t.Helper()
	keys := map[string]bool{}
	if err := objstore.ListAll(context.Background(), st, "", "", func(o objstore.ObjectInfo) error {
		keys[o.Key] = true
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return keys
}

// TestS3WarehouseEndToEnd is issue 12's must-show: the CLI against the
// local stack (versitygw for S3, moto for the DynamoDB lock): an s3://
// table is created and churned, registered in an s3:// warehouse; status
// says it is behind (exit 1); the dry run plans; the real run deletes
// exactly the keys the dry run listed; status is then healthy (exit 0) and
// the rows are unchanged.
func TestS3WarehouseEndToEnd(t *testing.T) {
	stackEnv(t)
	t.Setenv(EnvAllowClockAhead, "test") // --clock-ahead: versions look 10 h old
	st := testenv.S3Store(t)
	locks := lockTable(t)
	wh := "s3://" + st.Bucket() + "/warehouse"
	tbl := "--table=" + wh + "/tables/events"

	// S3 errors are one line, in the CLI's style.
	nb := "s3://" + st.Bucket() + "-missing/warehouse"
	fails(t, 1, nb+": bucket does not exist", "", "status", "--warehouse", nb)
	fails(t, 1, nb+"/t: bucket does not exist", "", "stats", "--table", nb+"/t")

	ok(t, "", "create", tbl, "--schema", "name:utf8,uri:utf8", "--key", "name", "--table-format", "2")
	model := map[string]string{}
	for i := range 30 {
		k := fmt.Sprintf("k%d", i%7)
		ok(t, fmt.Sprintf(`{"name":%q,"uri":"u%d"}`+"\n", k, i), "upsert", tbl)
		model[k] = fmt.Sprintf("u%d", i)
		if i%10 == 9 {
			ok(t, "", "delete", tbl, "--key", k)
			delete(model, k)
		}
	}
	// 34 versions: create, 30 upserts, 3 deletes. An orphan for the sweep.
	orphan := "warehouse/tables/events/data/00000000deadbeef.parquet"
	if err := st.Put(context.Background(), orphan, []byte("orphan")); err != nil {
		t.Fatal(err)
	}

	out := ok(t, "", "register", "events", "tables/events", "--warehouse", wh)
	if want := "registered events at tables/events in " + wh + " (keep-last 10, grace 1h, target 1048576 rows, deleted-threshold 0.1)\n"; out != want {
		t.Fatalf("register: %q, want %q", out, want)
	}
	if out := ok(t, "", "tables", "--warehouse", wh); !strings.Contains(out, "events") || !strings.Contains(out, "_registry") {
		t.Fatalf("tables:\n%s", out)
	}
	// Writes need the functions' lock table; the error says how to get one.
	fails(t, 2, "aws dynamodb create-table", "", "maintain", "--warehouse", wh)

	// Never maintained: behind, exit 1, and the reason.
	r := run(t, "", "status", "--warehouse", wh, "--clock-ahead", "10h", "-o", "json")
	if r.code != 1 || !strings.Contains(r.err, "unhealthy tables: ") || !strings.Contains(r.err, "events") {
		t.Fatalf("status before: exit %d, stderr %q\n%s", r.code, r.err, r.out)
	}
	var doc struct {
		Healthy bool          `json:"healthy"`
		Tables  []tableStatus `json:"tables"`
	}
	if err := json.Unmarshal([]byte(r.out), &doc); err != nil {
		t.Fatalf("%v: %s", err, r.out)
	}
	for _, s := range doc.Tables {
		if s.Table == "events" && (s.Health != "behind" || s.Versions != 34 || s.PrunableNow != 24 || s.Compactable != 6 ||
			!strings.Contains(s.Reason, "24 versions prunable since") || s.GarbageFiles != 1) {
			t.Fatalf("status before: %+v", s)
		}
	}
	if doc.Healthy {
		t.Fatalf("status before: healthy")
	}

	// Dry run: the plan, with every key.
	maint := []string{"--warehouse", wh, "--lock-table", locks, "--clock-ahead", "10h", "-o", "json"}
	out = ok(t, "", append([]string{"maintain", "--dry-run", "--keys"}, maint...)...)
	var dry maintainOut
	if err := json.Unmarshal([]byte(out), &dry); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	planned := map[string]bool{}
	for _, tj := range dry.Tables {
		for _, rj := range tj.Cleanup {
			for _, k := range rj.Keys {
				planned[k] = true
			}
		}
		if tj.Sweep != nil {
			for _, k := range tj.Sweep.List {
				planned[k] = true
			}
		}
		// Versions 1-25 go: the compaction's commit (35) keeps 26-35.
		if tj.Table == "events" && (tj.Groups != 1 || tj.Floor != 26 || tj.Prunable != 25 || len(tj.Kept) == 0) {
			t.Fatalf("dry run: %+v", tj)
		}
	}
	if len(planned) != dry.DeleteKeys || !planned[orphan] {
		t.Fatalf("dry run: %d distinct keys, delete_keys %d, orphan planned %v", len(planned), dry.DeleteKeys, planned[orphan])
	}

	// The real run deletes exactly those keys (the prune state, which the
	// run rewrites, is its own bookkeeping), and reports them.
	before := listKeys(t, st)
	out = ok(t, "", append([]string{"maintain"}, maint...)...)
	var real maintainOut
	if err := json.Unmarshal([]byte(out), &real); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	after := listKeys(t, st)
	deleted := map[string]bool{}
	for k := range before {
		if !after[k] && !bookkeeping(k) {
			deleted[k] = true
		}
	}
	if !maps.Equal(deleted, planned) {
		var onlyPlanned, onlyDeleted []string
		for k := range planned {
			if !deleted[k] {
				onlyPlanned = append(onlyPlanned, k)
			}
		}
		for k := range deleted {
			if !planned[k] {
				onlyDeleted = append(onlyDeleted, k)
			}
		}
		slices.Sort(onlyPlanned)
		slices.Sort(onlyDeleted)
		t.Fatalf("planned %d keys, deleted %d\nplanned only: %v\ndeleted only: %v", len(planned), len(deleted), onlyPlanned, onlyDeleted)
	}
	if real.DeleteKeys != len(deleted) || real.VersionsPruned != 25 || real.DeleteBytes <= 0 {
		t.Fatalf("real run report: %d keys (deleted %d), %d versions pruned, %d bytes", real.DeleteKeys, len(deleted), real.VersionsPruned, real.DeleteBytes)
	}
	t.Logf("dry run planned and real run deleted %d keys (%s)", len(deleted), shortBytes(real.DeleteBytes))

	// Healthy now: exit 0. (Under --clock-ahead, what the run itself just
	// wrote looks 10 h old too, such as its _stats rows: the warehouse as a
	// whole is checked at the real time.)
	out = ok(t, "", "status", "--warehouse", wh, "--table", "events", "--clock-ahead", "10h")
	if !regexp.MustCompile(`(?m)^events +tablekeep +ok +10 +0 +0 of 1 +0 B +20`).MatchString(out) {
		t.Fatalf("status after:\n%s", out)
	}
	if out := ok(t, "", "status", "--warehouse", wh); strings.Contains(out, "behind") {
		t.Fatalf("status after:\n%s", out)
	}
	// The rows are the model's.
	got := map[string]string{}
	for _, row := range jsonLines(t, ok(t, "", "scan", tbl, "-o", "json")) {
		got[row["name"].(string)] = row["uri"].(string)
	}
	if !maps.Equal(got, model) {
		t.Fatalf("rows %v, want %v", got, model)
	}
}

// TestS3MaintainSendsCleanupToQueue: with --queue-url the cleanup ranges go
// to the deployment's SQS queue (moto) for its cleaner function, nothing is
// cleaned in-process, and the report says how many ranges were sent.
func TestS3MaintainSendsCleanupToQueue(t *testing.T) {
	stackEnv(t)
	t.Setenv(EnvAllowClockAhead, "test")
	st := testenv.S3Store(t)
	locks := lockTable(t)
	cfg, err := config.LoadDefaultConfig(context.Background(), config.WithRegion("us-east-1"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.BaseEndpoint = aws.String(testenv.AWSEndpoint(t))
	client := sqs.NewFromConfig(awshttp.Config(cfg))
	url, _, err := queue.CreateQueueWithDLQ(context.Background(), client, strings.Replace(testenv.BucketName(t), "tk-", "q-", 1), 5, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	wh := "s3://" + st.Bucket() + "/w"
	tbl := "--table=" + wh + "/t"
	ok(t, "", "create", tbl, "--schema", "name:utf8", "--key", "name")
	for i := range 15 {
		ok(t, fmt.Sprintf("{\"name\":\"k%d\"}\n", i%3), "upsert", tbl)
	}
	ok(t, "", "register", "t", "t", "--warehouse", wh)
	before := listKeys(t, st)
	// The functions' variables stand for --warehouse and --lock-table.
	t.Setenv(awsfn.EnvWarehouse, wh)
	t.Setenv(awsfn.EnvLockTable, locks)
	out := ok(t, "", "maintain", "--queue-url", url, "--table", "t", "--clock-ahead", "10h", "-o", "json")
	var rep maintainOut
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.RangesSent != 1 || rep.VersionsPruned != 0 || rep.CleanupHandled != 0 {
		t.Fatalf("report: %s", out)
	}
	// The pruned versions' manifests and change records are left to the
	// cleaner (the sweep may still remove unreferenced data files).
	after := listKeys(t, st)
	for k := range before {
		if !after[k] && (strings.Contains(k, "/_versions/") || strings.Contains(k, "/_changes/")) {
			t.Fatalf("%s deleted in-process", k)
		}
	}
	q := queue.NewSQS(client, url, queue.SQSOptions{})
	ds, err := q.Receive(context.Background(), 10, time.Minute)
	if err != nil || len(ds) != 1 {
		t.Fatalf("receive: %d messages, %v", len(ds), err)
	}
	m, err := maintenance.DecodeRangeMessage(ds[0].Body)
	if err != nil || m.Table != "t" || m.From != 1 {
		t.Fatalf("message %s: %+v %v", ds[0].Body, m, err)
	}
}
