package awsfn_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

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

// TestLambdaKilledMidInvocation kills the compactor or the cleaner bootstrap
// under aws-lambda-rie in the middle of an invocation (the TEST-ONLY
// TABLEKEEP_TEST_CRASH_AFTER_REQUESTS makes the process exit 137 right after
// the Nth matching object-store request was applied, before it sees the
// answer), then redelivers the same event to a fresh emulator, as Lambda
// does after a crash (at-least-once). Maintenance then runs to completion
// (compactor, cleaner until the queue is empty, sweeper) and the table must
// hold exactly the model's rows, every retained version must read, exactly
// KeepLast versions remain, and no data or deletion file is left that no
// stored version references.
//
// The redelivery and later runs use a clock offset past the crashed
// holder's lease: a scheduled run after a crash finds the table lock held by
// the dead invocation until its lease expires.
func TestLambdaKilledMidInvocation(t *testing.T) {
	ctx := context.Background()
	st := testenv.S3Store(t)
	s3Endpoint, awsEndpoint := testenv.S3Endpoint(t), testenv.AWSEndpoint(t)
	bins := buildBootstraps(t, "compactor", "cleaner", "sweeper")
	locks := randomName("tablekeep-locks-")
	if err := lock.CreateLockTable(ctx, testkit.DynamoClient(t), locks); err != nil {
		t.Fatal(err)
	}
	sqsc := testkit.SQSClient(t)

	const tableRoot = "tables/registry/"
	cases := []struct {
		name  string
		fn    string // compactor or cleaner
		crash string // TABLEKEEP_TEST_CRASH_AFTER_REQUESTS
	}{
		// Compactor: after the first compacted data file was written (an
		// orphan once the run dies), after the compaction's manifest commit
		// landed (the run never learns it committed), after the retention
		// floor was raised (ranges not yet enqueued), and at the 12th
		// request of any kind (planning reads).
		{"compactor/data-file-written", "compactor", "1:PUT:" + tableRoot + "data/"},
		{"compactor/commit-applied", "compactor", "1:PUT:" + tableRoot + "_versions/"},
		{"compactor/floor-raised", "compactor", "1:PUT:" + tableRoot + "_refs/floor"},
		{"compactor/request-12", "compactor", "12"},
		// Cleaner: while reading change records, after the first delete
		// request (data files gone, manifests still there) and after the
		// second (manifests gone too, cleanup state not yet written).
		{"cleaner/planning", "cleaner", "2:GET:" + tableRoot + "_changes/"},
		{"cleaner/delete-1", "cleaner", "1:DELETE:" + tableRoot},
		{"cleaner/delete-2", "cleaner", "2:DELETE:" + tableRoot},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			prefix := fmt.Sprintf("kill%d", i)
			queueURL, _, err := queue.CreateQueueWithDLQ(ctx, sqsc, randomName("tablekeep-kill-"), 5, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			cat, tb, model := churnedTable(t, st, prefix, 90, 25)
			env := func(offset string, extra ...string) []string {
				return append([]string{
					"AWS_REGION=us-east-1",
					"AWS_ENDPOINT_URL=",
					"AWS_ENDPOINT_URL_S3=" + s3Endpoint,
					"AWS_ENDPOINT_URL_DYNAMODB=" + awsEndpoint,
					"AWS_ENDPOINT_URL_SQS=" + awsEndpoint,
					"AWS_LAMBDA_FUNCTION_TIMEOUT=120",
					awsfn.EnvWarehouse + "=s3://" + st.Bucket() + "/" + prefix,
					awsfn.EnvLockTable + "=" + locks,
					awsfn.EnvQueueURL + "=" + queueURL,
					awsfn.EnvMargin + "=10s",
					awsfn.EnvLease + "=5m",
					awsfn.EnvLockWait + "=0s",
					awsfn.EnvClockOffset + "=" + offset,
					awsfn.EnvAllowOffset + "=test",
				}, extra...)
			}
			// Before the crash: 2h (past the 1h grace). After it: past the
			// dead holder's 5 min lease too.
			const early, late = "2h", "2h10m"

			event := readEvent(t, "scheduled.json")
			if c.fn == "cleaner" {
				// The compactor enqueues the ranges; the cleaner is killed
				// on the batch received from the queue.
				comp := startRIE(t, "compactor", bins["compactor"], env(early))
				var sum awsfn.CompactSummary
				comp.invoke(t, event, &sum)
				stopRIE(comp)
				ev, n := receiveBatch(t, sqsc, queueURL)
				if n == 0 {
					t.Fatalf("compactor enqueued no range: %+v", sum)
				}
				event = ev
			}

			// The killed invocation.
			killed := startRIE(t, c.fn+"-killed", bins[c.fn], env(early, awsfn.EnvCrashAfter+"="+c.crash))
			body, err := postEvent(killed.url, event)
			waitLog(t, killed, "TEST ONLY: crashing after an object-store request")
			stopRIE(killed)
			t.Logf("killed invocation answered %q (err %v)", bytes.TrimSpace(body), err)
			if err == nil && invokeError(body) == "" {
				t.Fatalf("the killed invocation succeeded: %s", body)
			}

			// Redelivery of the same event to a fresh execution environment.
			cleaner := startRIE(t, "cleaner", bins["cleaner"], env(late))
			compactor := startRIE(t, "compactor", bins["compactor"], env(late))
			sweeper := startRIE(t, "sweeper", bins["sweeper"], env(late))
			if c.fn == "cleaner" {
				var resp events.SQSEventResponse
				cleaner.invoke(t, event, &resp)
				if len(resp.BatchItemFailures) != 0 {
					t.Fatalf("redelivered batch: failures %+v", resp.BatchItemFailures)
				}
			} else {
				var sum awsfn.CompactSummary
				compactor.invoke(t, event, &sum)
				if sum.Errors != 0 || sum.Busy != 0 {
					t.Fatalf("redelivered compactor run: %+v", sum)
				}
			}
			checkTable(t, tb, model, 0)

			// Maintenance to completion: compactor, cleaner until the queue
			// is empty (twice, so ranges the first run left are planned),
			// then the sweeper.
			for round := 0; round < 2; round++ {
				var sum awsfn.CompactSummary
				compactor.invoke(t, readEvent(t, "scheduled.json"), &sum)
				if sum.Errors != 0 {
					t.Fatalf("compactor round %d: %+v", round, sum)
				}
				drainQueue(t, sqsc, queueURL, func(ev []byte) events.SQSEventResponse {
					var resp events.SQSEventResponse
					cleaner.invoke(t, ev, &resp)
					if len(resp.BatchItemFailures) != 0 {
						t.Fatalf("cleaner: failures %+v", resp.BatchItemFailures)
					}
					return resp
				})
			}
			var sw awsfn.SweepSummary
			sweeper.invoke(t, readEvent(t, "scheduler.json"), &sw)
			if sw.Errors != 0 {
				t.Fatalf("sweeper: %+v", sw)
			}
			t.Logf("final sweep deleted %d", sw.Deleted)
			checkTable(t, tb, model, e2eKeepLast)
			refs, err := cat.Tables(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, ref := range refs {
				assertNoUnreferenced(t, st, ref)
			}
		})
	}
}

// churnedTable registers tables/registry under prefix with KeepLast 5 and
// commits ops upserts and deletes (every fifth a delete) over names names;
// it returns the model of its rows.
func churnedTable(t *testing.T, st objstore.Store, prefix string, ops, names int) (*catalog.Catalog, *table.Table, map[string]string) {
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
	for i := 0; i < ops; i++ {
		name := fmt.Sprint("store-", i%names)
		if i%5 == 4 {
			if _, err := tb.Delete(ctx, name); err != nil {
				t.Fatal(err)
			}
			delete(model, name)
			continue
		}
		uri := fmt.Sprintf("s3://data/%s/v%d", name, i)
		if _, err := tb.Upsert(ctx, row(name, uri)); err != nil {
			t.Fatal(err)
		}
		model[name] = uri
	}
	return cat, tb, model
}

// checkTable: rows equal the model, every stored version at or above the
// floor reads, and (keep > 0) exactly keep versions are stored.
func checkTable(t *testing.T, tb *table.Table, model map[string]string, keep int) {
	t.Helper()
	ctx := context.Background()
	if got := rows(t, tb); !sameRows(got, model) {
		t.Fatalf("rows:\n got  %v\n want %v", got, model)
	}
	floor, err := tb.Floor(ctx)
	if err != nil {
		t.Fatal(err)
	}
	vs, err := tb.Versions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		if v.Version < floor {
			continue
		}
		snap, err := tb.Checkout(ctx, v.Version)
		if err != nil {
			t.Fatalf("retained version %d: %v", v.Version, err)
		}
		if err := snap.Scan(ctx, table.ScanOptions{}, func(arrow.RecordBatch) error { return nil }); err != nil {
			t.Fatalf("scan retained version %d: %v", v.Version, err)
		}
	}
	if keep > 0 && (len(vs) != keep || vs[0].Version != floor) {
		t.Fatalf("%d versions stored from %d, floor %d; want exactly %d from the floor", len(vs), vs[0].Version, floor, keep)
	}
}

// receiveBatch receives up to 10 messages as the SQS event Lambda would
// pass, and deletes them from the queue (the test invokes the cleaner with
// the batch and fails on any reported failure).
func receiveBatch(t *testing.T, sqsc *sqs.Client, queueURL string) ([]byte, int) {
	t.Helper()
	raw, msgs := receiveEvent(t, sqsc, queueURL, 60)
	settleBatch(t, sqsc, queueURL, msgs, events.SQSEventResponse{})
	return raw, len(msgs)
}

// postEvent invokes without failing the test: a killed runtime may answer
// with an error body or drop the connection.
func postEvent(url string, event []byte) ([]byte, error) {
	client := &http.Client{Timeout: time.Minute}
	resp, err := client.Post(url, "application/json", bytes.NewReader(event))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return body, err
}

// waitLog waits for want in r's output. The line is written before the
// runtime exits, which the answer to the invocation follows, so it is
// normally there at once; the bound (a minute, not the 5 s it was) only
// stops a test whose runtime never wrote it, on however loaded a machine.
func waitLog(t *testing.T, r *rie, want string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(r.log.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %q not in its output:\n%s", r.name, want, r.log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stopRIE kills an emulator and its runtime now (its test cleanup then
// finds it gone).
func stopRIE(r *rie) { _ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL) }
