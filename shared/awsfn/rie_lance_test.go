package awsfn_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/tablekeep/tablekeep/shared/awsfn"
	"github.com/tablekeep/tablekeep/shared/catalog"
	"github.com/tablekeep/tablekeep/shared/internal/testenv"
	"github.com/tablekeep/tablekeep/shared/internal/testkit"
	"github.com/tablekeep/tablekeep/shared/lance/lancetest"
	"github.com/tablekeep/tablekeep/shared/lock"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/queue"
	"github.com/tablekeep/tablekeep/shared/table"
)

// TestLambdaLanceEndToEnd: LanceDB writes a dataset straight onto
// versitygw (the seed's churn, deletions, an index, two tags), registered
// in the warehouse's catalog with format lance. The three bootstraps run
// under aws-lambda-rie against versitygw and moto, as AWS would run them:
//  1. the compactor in fan-out mode: its scheduled scan sends the dataset
//     as a table job, and its SQS job mode prunes it (under the DynamoDB
//     lease, fenced; no compaction), sending the ranges to the cleanup queue;
//  2. the cleaner drains the ranges from SQS; the sweeper sweeps the dataset (nothing to delete);
//  3. LanceDB, on S3, checks out every retained version and reads exactly
//     the rows it read before, and the latest accepts a write;
//  4. the compactor's scheduled inline pass (no compaction queue) finds the
//     dataset idle once settled, and maintains it in the pass after
//     LanceDB writes past the change threshold.
//
// The functions run with the TEST-ONLY clock offset of 2h, so every version
// is past its 1h grace window without sleeping.
func TestLambdaLanceEndToEnd(t *testing.T) {
	ctx := context.Background()
	st := testenv.S3Store(t)
	awsEndpoint := testenv.AWSEndpoint(t)
	s3Endpoint := testenv.S3Endpoint(t)
	bins := buildBootstraps(t, "compactor", "cleaner", "sweeper")
	sqsc := testkit.SQSClient(t)
	locks := randomName("tablekeep-locks-")
	if err := lock.CreateLockTable(ctx, testkit.DynamoClient(t), locks); err != nil {
		t.Fatal(err)
	}
	cleanupURL, cleanupDLQ, err := queue.CreateQueueWithDLQ(ctx, sqsc, randomName("tablekeep-cleanup-"), 5, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	jobsURL, _, err := queue.CreateQueueWithDLQ(ctx, sqsc, randomName("tablekeep-compaction-"), 3, time.Minute)
	if err != nil {
		t.Fatal(err)
	}

	// LanceDB on versitygw.
	const prefix = "warehouse"
	opts, _ := json.Marshal(map[string]string{
		"aws_access_key_id": os.Getenv("AWS_ACCESS_KEY_ID"), "aws_secret_access_key": os.Getenv("AWS_SECRET_ACCESS_KEY"),
		"aws_endpoint": s3Endpoint, "aws_region": "us-east-1", "allow_http": "true",
	})
	lenv := []string{"LANCE_STORAGE_OPTIONS=" + string(opts)}
	dbURI := "s3://" + st.Bucket() + "/" + prefix + "/lance"
	var c lancetest.Created
	lancetest.Node(t, lenv, &c, "create", dbURI, "ds", "20")
	var before lancetest.Dumped
	lancetest.Node(t, lenv, &before, "dump", dbURI, "ds")

	cat, err := catalog.Open(ctx, st, prefix, table.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p := maintenance.Policy{KeepLast: 3, Grace: time.Hour}
	if err := cat.RegisterFormat(ctx, "ds", "lance/ds.lance", p, catalog.FormatLance); err != nil {
		t.Fatal(err)
	}
	root := prefix + "/lance/ds.lance/"
	filesBefore := s3Keys(t, st, root)

	env := []string{
		"AWS_REGION=us-east-1",
		"AWS_ENDPOINT_URL=",
		"AWS_ENDPOINT_URL_S3=" + s3Endpoint,
		"AWS_ENDPOINT_URL_DYNAMODB=" + awsEndpoint,
		"AWS_ENDPOINT_URL_SQS=" + awsEndpoint,
		"AWS_LAMBDA_FUNCTION_TIMEOUT=120",
		awsfn.EnvWarehouse + "=s3://" + st.Bucket() + "/" + prefix,
		awsfn.EnvLockTable + "=" + locks,
		awsfn.EnvQueueURL + "=" + cleanupURL,
		awsfn.EnvMargin + "=10s",
		awsfn.EnvClockOffset + "=2h",
		awsfn.EnvAllowOffset + "=test",
	}
	fanout := startRIE(t, "compactor-fanout", bins["compactor"], append(env[:len(env):len(env)],
		awsfn.EnvCompactionQueueURL+"="+jobsURL, awsfn.EnvInlineTables+"=0"))
	inline := startRIE(t, "compactor-inline", bins["compactor"], env)
	cleaner := startRIE(t, "cleaner", bins["cleaner"], env)
	sweeper := startRIE(t, "sweeper", bins["sweeper"], env)

	// 1. The scheduled scan fans the dataset out; the job mode prunes it.
	var sched awsfn.CompactSummary
	fanout.invoke(t, readEvent(t, "scheduled.json"), &sched)
	if sched.JobsEnqueued < 1 || sched.Errors != 0 {
		t.Fatalf("scheduled fan-out: %+v", sched)
	}
	var job *jobDone
	for deadline := time.Now().Add(time.Minute); job == nil; {
		raw, msgs := receiveJobs(t, sqsc, jobsURL, 1)
		if len(msgs) == 0 {
			if testkit.QueueDepth(t, sqsc, jobsURL) == 0 || time.Now().After(deadline) {
				break
			}
			continue
		}
		var resp events.SQSEventResponse
		fanout.invoke(t, raw, &resp)
		if len(resp.BatchItemFailures) != 0 {
			t.Fatalf("job batch items reported failed: %+v", resp.BatchItemFailures)
		}
		settleBatch(t, sqsc, jobsURL, msgs, resp)
		job = jobLog(fanout.log.String(), "ds")
	}
	floor := c.Latest - uint64(p.KeepLast) + 1
	if job == nil || job.Token == 0 || job.Format != "lance" || job.Floor != floor || job.Ranges == 0 || job.Groups != 0 || job.Latest != c.Latest {
		t.Fatalf("the job mode's maintenance of the dataset: %+v (want floor %d, ranges under a token, no compaction)", job, floor)
	}

	// 2. The cleaner drains the ranges; the sweeper sweeps the dataset.
	_, retried := drainQueue(t, sqsc, cleanupURL, func(raw []byte) events.SQSEventResponse {
		var r events.SQSEventResponse
		cleaner.invoke(t, raw, &r)
		return r
	})
	if len(retried) != 0 || testkit.QueueDepth(t, sqsc, cleanupDLQ) != 0 {
		t.Fatalf("cleanup retried %v, dead letters %d", retried, testkit.QueueDepth(t, sqsc, cleanupDLQ))
	}
	var sw awsfn.SweepSummary
	sweeper.invoke(t, readEvent(t, "scheduler.json"), &sw)
	for _, s := range sw.Tables {
		// Swept (every stored manifest read), nothing old enough to delete.
		if s.Table == "ds" && (s.Skipped != "" || s.Deleted != 0 || s.Listed == 0) {
			t.Fatalf("sweeper on the Lance dataset: %+v", s)
		}
	}
	if sw.Errors != 0 {
		t.Fatalf("sweeper: %+v", sw)
	}
	deleted := 0
	left := s3Keys(t, st, root)
	for k := range filesBefore {
		if !left[k] {
			deleted++
		}
	}
	if deleted == 0 {
		t.Fatal("nothing was deleted from the dataset")
	}

	// 3. LanceDB reads every retained version as before, on S3.
	var after lancetest.Dumped
	lancetest.Node(t, lenv, &after, "dump", dbURI, "ds")
	lancetest.CheckRetained(t, before, after, lancetest.AtOrAbove(floor, c.Tags))
	t.Logf("S3: %d versions, floor %d, %d files deleted; LanceDB reads %v", len(c.Versions), floor, deleted, after.Versions)

	// 4. The scheduled inline pass: settled, the dataset is idle.
	var pass awsfn.CompactSummary
	for range 3 {
		pass = awsfn.CompactSummary{}
		inline.invoke(t, readEvent(t, "scheduled.json"), &pass)
		if pass.Errors != 0 {
			t.Fatalf("inline pass: %+v", pass)
		}
	}
	for _, s := range pass.Tables {
		if s.Table == "ds" {
			t.Fatalf("an unchanged Lance dataset was maintained: %+v", s)
		}
	}
	if pass.Idle < 1 {
		t.Fatalf("inline pass: %+v, want the dataset idle", pass)
	}
	// LanceDB writes past the change threshold: the next pass maintains it.
	var w struct {
		Latest uint64 `json:"latest"`
	}
	for range (maintenance.DefaultPolicy().CompactMinFragments + 1) / 2 {
		lancetest.Node(t, lenv, &w, "write", dbURI, "ds")
	}
	pass = awsfn.CompactSummary{}
	inline.invoke(t, readEvent(t, "scheduled.json"), &pass)
	var ds *awsfn.TableSummary
	for i := range pass.Tables {
		if pass.Tables[i].Table == "ds" {
			ds = &pass.Tables[i]
		}
	}
	if ds == nil || ds.Latest != w.Latest || ds.Skipped != "" {
		t.Fatalf("after LanceDB wrote up to version %d the pass maintained %+v (%+v)", w.Latest, ds, pass)
	}
}

// jobDone is the job mode's log line for one table ("table job done"),
// with the fencing token of its "prune plan" step.
type jobDone struct {
	Table    string `json:"table"`
	Msg      string `json:"msg"`
	Step     string `json:"step"`
	Groups   int    `json:"groups_committed"`
	Latest   uint64 `json:"latest_version"`
	Floor    uint64 `json:"floor"`
	Ranges   int    `json:"ranges_enqueued"`
	Token    uint64 `json:"fencing_token"`
	Format   string `json:"format"`
	Stopped  string `json:"stopped"`
	Prunable int    `json:"prunable"`
}

// jobLog finds the table's "table job done" line in the compactor's log
// (the job mode answers with batch failures only) and the fencing token
// of its prune step.
func jobLog(log, name string) *jobDone {
	var done *jobDone
	var token uint64
	var format string
	for _, line := range strings.Split(log, "\n") {
		i := strings.Index(line, "{")
		if i < 0 || !strings.Contains(line, `"table":"`+name+`"`) {
			continue
		}
		var j jobDone
		if json.Unmarshal([]byte(line[i:]), &j) != nil {
			continue
		}
		switch {
		case j.Msg == "maintenance step" && j.Step == "prune plan":
			token, format = j.Token, j.Format
		case j.Msg == "table job done":
			done = &j
		}
	}
	if done != nil {
		done.Token, done.Format = token, format
	}
	return done
}

func s3Keys(t *testing.T, st objstore.Store, prefix string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	if err := objstore.ListAll(context.Background(), st, prefix, "", func(o objstore.ObjectInfo) error {
		out[o.Key] = true
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}
