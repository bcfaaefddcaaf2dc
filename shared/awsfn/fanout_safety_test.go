package awsfn_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/awsfn"
	fleetpkg "github.com/tablekeep/tablekeep/shared/fleet"
	"github.com/tablekeep/tablekeep/shared/internal/fakeclock"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/table"
)

// register creates and registers one more table of the fleet.
func (f *fleet) register(t *testing.T, name string) {
	t.Helper()
	ctx := context.Background()
	opts := table.Options{Format: 2, Clock: f.clock}
	tb, err := table.Create(ctx, f.st, "warehouse/tables/"+name, registrySchema, "name", opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if _, err := tb.Upsert(ctx, row(fmt.Sprint("k", i), "v")); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.cat.Register(ctx, name, "tables/"+name, maintenance.Policy{KeepLast: 3, Grace: time.Hour}); err != nil {
		t.Fatal(err)
	}
}

// Issue 19 item 5: a scheduled run that overlaps a dead run's window and
// has inline tables of its own must not drop the dead run's tables from
// the inline record when it finishes: the run after the dead run's
// deadline must still hand the table that killed it a retry job instead
// of dying on it inline again.
func TestFanoutOverlappingRunKeepsDeadRunsRecord(t *testing.T) {
	f := newFleet(t, []string{"0-boom", "b1"})
	f.d.Store = panicStore{Store: f.st, prefix: "warehouse/tables/0-boom/"}
	func() {
		defer func() {
			if r := recover(); r == nil {
				t.Fatal("the first run did not die on 0-boom")
			}
		}()
		f.scheduled(t, context.Background())
	}()
	f.jobs.take()
	// A table registered since: the overlapping run maintains it inline.
	f.clock.Advance(time.Minute)
	f.register(t, "late")
	sum := f.scheduled(t, context.Background())
	var did []string
	for _, ts := range sum.Tables {
		did = append(did, ts.Table)
	}
	if fmt.Sprint(did) != "[late]" {
		t.Fatalf("overlapping run maintained %v inline, want [late] (%+v)", did, sum)
	}
	f.jobs.take()
	// Past the dead run's deadline.
	f.clock.Advance(20 * time.Minute)
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("the run after the dead run's deadline died on 0-boom inline: the overlapping run dropped the dead run's record (%v)", r)
			}
		}()
		sum = f.scheduled(t, context.Background())
	}()
	var boom *awsfn.OutJob
	jobs := f.jobs.take()
	for i, j := range jobs {
		if j.Job.Table == "0-boom" {
			boom = &jobs[i]
		}
	}
	if boom == nil || boom.Job.Reason != fleetpkg.ReasonRetry || boom.Delay <= 0 {
		t.Fatalf("0-boom got no retry job: %v", tablesOf(jobs))
	}
	if recs := inlineRuns(t, f.st); len(recs) != 0 {
		t.Fatalf("inline run records left once the dead run's tables have their jobs: %v", recs)
	}
}

// Issue 19 item 6: a table that keeps failing in job mode, whose next
// retry job is lost, is resent a job within MarkerStale + one period of the
// marker's last write (the fleet index's backoff is the same policy and
// does not hide it for up to 6 h).
func TestFanoutLostRetryJobOfFailingTableResent(t *testing.T) {
	f := newFleet(t, []string{"b1"}, "0-broken")
	f.scheduled(t, context.Background())
	var job awsfn.OutJob
	for _, j := range f.jobs.take() {
		if j.Job.Table == "0-broken" {
			job = j
		}
	}
	// Six failed retries by job: backoffs 2, 4, ..., 64 min (capped at 60).
	for range 6 {
		if job.Job.Table == "" {
			t.Fatal("no retry job")
		}
		f.clock.Advance(job.Delay)
		f.batch(t, jobBody(job.Job))
		next := f.jobs.take()
		if len(next) != 1 || next[0].Job.Reason != fleetpkg.ReasonRetry {
			t.Fatalf("retry of a failing table: %+v", next)
		}
		if want := job.Job.Attempt + 1; next[0].Job.Attempt != want || next[0].Delay != fleetpkg.BackoffOf(fleetpkg.ModeJobs).Delay(want) {
			t.Fatalf("retry %+v, want attempt %d after %s (one policy)", next[0], want, fleetpkg.BackoffOf(fleetpkg.ModeJobs).Delay(want))
		}
		job = next[0]
	}
	// That job is lost. Scheduled runs every 15 min.
	lostAt := f.clock.Now()
	bound := fleetpkg.MarkerStale + 15*time.Minute
	for f.clock.Now().Sub(lostAt) <= bound {
		f.clock.Advance(15 * time.Minute)
		f.scheduled(t, context.Background())
		for _, j := range f.jobs.take() {
			if j.Job.Table == "0-broken" {
				if j.Job.Reason != fleetpkg.ReasonLost {
					t.Fatalf("0-broken: %+v, want its lost job resent", j)
				}
				if f.clock.Now().Sub(lostAt) <= fleetpkg.MarkerStale {
					t.Fatalf("resent %s after the loss, before MarkerStale %s: the job was not lost yet", f.clock.Now().Sub(lostAt), fleetpkg.MarkerStale)
				}
				return
			}
		}
	}
	t.Fatalf("the lost retry job of a failing table was not resent within MarkerStale + 15 min (%s)", bound)
}

// Issue 19 item 6: a retry marker whose body is not JSON (or is dated in
// the future) is stale, so its table is resent a job instead of being left
// for ever to a job that does not exist.
func TestFanoutBadRetryMarkerIsStale(t *testing.T) {
	f := newFleet(t, []string{"t1", "t2", "t3"})
	ctx := context.Background()
	if err := f.st.Put(ctx, "warehouse/_fleet/retry/t1", []byte("not json")); err != nil {
		t.Fatal(err)
	}
	future := fmt.Sprintf(`{"table":"t2","attempt":1,"reason":"retry","at":%q}`, f.clock.Now().AddDate(100, 0, 0).Format(time.RFC3339))
	if err := f.st.Put(ctx, "warehouse/_fleet/retry/t2", []byte(future)); err != nil {
		t.Fatal(err)
	}
	// A marker dated within the skew allowance is fresh.
	near := fmt.Sprintf(`{"table":"t3","attempt":1,"reason":"retry","at":%q}`, f.clock.Now().Add(time.Minute).Format(time.RFC3339))
	if err := f.st.Put(ctx, "warehouse/_fleet/retry/t3", []byte(near)); err != nil {
		t.Fatal(err)
	}
	f.scheduled(t, ctx)
	lost := map[string]bool{}
	for _, j := range f.jobs.take() {
		if j.Job.Reason == fleetpkg.ReasonLost {
			lost[j.Job.Table] = true
		}
	}
	if !lost["t1"] || !lost["t2"] || lost["t3"] {
		t.Fatalf("lost jobs resent for %v, want t1 (not JSON) and t2 (dated 100 years ahead), not t3 (1 min ahead)", lost)
	}
	if !strings.Contains(f.logs.String(), "retry marker is not a marker") {
		t.Fatal("the bad marker was not logged")
	}
}

// notification is an S3 notification of a manifest of table name.
func notification(name string, v int) string {
	return fmt.Sprintf(`{"Records":[{"eventSource":"aws:s3","eventName":"ObjectCreated:Put","s3":{"bucket":{"name":%q},"object":{"key":"warehouse/tables/%s/_versions/%020d.manifest"}}}]}`,
		fanBucket, name, v)
}

// Issue 19 item 6: notifications of a failing table (in retry: a fresh
// marker) leave it to its pending retry job: no maintenance, no new retry
// chain at attempt 1 for each notification batch.
func TestFanoutNotificationsRespectRetry(t *testing.T) {
	f := newFleet(t, []string{"b1"}, "0-broken")
	f.scheduled(t, context.Background())
	f.jobs.take()
	for i := range 7 {
		f.clock.Advance(5 * time.Minute)
		if resp := f.batch(t, notification("0-broken", i+1)); len(resp.BatchItemFailures) != 0 {
			t.Fatalf("failures %+v", resp)
		}
		if jobs := f.jobs.take(); len(jobs) != 0 {
			t.Fatalf("notification batch %d of a table in retry sent %+v: another retry chain", i, jobs)
		}
	}
	// A notification of a healthy table is still maintained.
	f.write(t, "b1", "x")
	f.batch(t, notification("b1", 99))
	if !strings.Contains(f.logs.String(), `"msg":"table job done","function":"compactor","table":"b1"`) {
		t.Fatal("the healthy table's notification was not maintained")
	}
}

// Issue 19 item 6: a job whose not_before is beyond the longest legitimate
// wait (MaxJobWait = the jobs' longest backoff + 15 min) is dropped with a clear
// error, not sent back every 15 min for ever; one at exactly MaxJobWait is
// sent back.
func TestFanoutJobNotBeforeBeyondLongestWaitDropped(t *testing.T) {
	f := newFleet(t, []string{"t1"})
	now := f.clock.Now()
	at := func(nb time.Time) string {
		return jobBody(awsfn.Job{V: 1, Warehouse: fanWarehouse, Table: "t1", Attempt: 1, Reason: fleetpkg.ReasonRetry, NotBefore: nb})
	}
	if resp := f.batch(t, at(now.Add(fleetpkg.MaxJobWait))); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %+v", resp)
	}
	if back := f.jobs.take(); len(back) != 1 || back[0].Delay != 15*time.Minute {
		t.Fatalf("a job at exactly MaxJobWait: sent back as %+v, want once with 15 min", back)
	}
	for _, nb := range []time.Time{now.Add(fleetpkg.MaxJobWait + time.Second), now.AddDate(100, 0, 0), time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)} {
		if resp := f.batch(t, at(nb)); len(resp.BatchItemFailures) != 0 {
			t.Fatalf("not_before %s: failures %+v", nb, resp)
		}
		if back := f.jobs.take(); len(back) != 0 {
			t.Fatalf("not_before %s: sent back as %+v, want dropped", nb, back)
		}
	}
	if n := strings.Count(f.logs.String(), "beyond the longest wait"); n != 3 {
		t.Fatalf("%d drops logged, want 3", n)
	}
}

// errDenied is a permission error on one object (S3's AccessDenied).
var errDenied = errors.New("AccessDenied: not allowed to read this object")

// Issue 29 item 7: a retry marker whose GET fails for a reason other than
// "not found" (a permission error on that one object) is aged by its store
// time (the LIST's LastModified): its table is resent a job once that is
// more than MarkerStale old, not left "in retry" for ever (it counted as
// written now at every run).
func TestFanoutUnreadableRetryMarkerAgesByStoreTime(t *testing.T) {
	f := newFleet(t, []string{"t1", "t2"})
	ctx := context.Background()
	stamped := fakeclock.NewStore(f.st, f.clock)
	key := "warehouse/_fleet/retry/t1"
	faulty := objstore.NewFaulty(stamped)
	faulty.SetBefore(func(_ int64, op objstore.Op) error {
		if op.Kind == objstore.KindGet && op.Key == key {
			return errDenied
		}
		return nil
	})
	f.d.Store = faulty
	if err := fleetpkg.PutMarker(ctx, stamped, "warehouse/", fleetpkg.Marker{Table: "t1", Attempt: 3, Reason: fleetpkg.ReasonRetry, At: f.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	written := f.clock.Now()
	bound := fleetpkg.MarkerStale + 15*time.Minute
	for f.clock.Now().Sub(written) <= bound {
		f.clock.Advance(15 * time.Minute)
		f.scheduled(t, ctx)
		for _, j := range f.jobs.take() {
			if j.Job.Table != "t1" {
				continue
			}
			if j.Job.Reason != fleetpkg.ReasonLost {
				t.Fatalf("t1: %+v, want its lost job resent", j)
			}
			if age := f.clock.Now().Sub(written); age <= fleetpkg.MarkerStale {
				t.Fatalf("unreadable marker resent %s after its write, before MarkerStale %s", age, fleetpkg.MarkerStale)
			}
			if !strings.Contains(f.logs.String(), "retry marker unreadable") {
				t.Fatal("the unreadable marker was not logged")
			}
			return
		}
	}
	t.Fatalf("a table whose retry marker cannot be read (%v) was not resent within MarkerStale + 15 min (%s): in retry for ever", errDenied, bound)
}

// Issue 29 item 7: the compactor without a compaction queue retries a
// failing table only from its scheduled runs, so it backs off as the
// scheduled passes do (fleet.ModePass, 15 min doubling to 6 h): the 1 min
// to 1 h of the retry jobs (ModeJobs) is for the fan-out, whose cap must
// stay below MarkerStale, and without a queue it made every 1-minute run
// retry the table and a broken table cost a retry an hour for ever.
func TestCompactorWithoutQueueBacksOffAsPasses(t *testing.T) {
	f := newFleet(t, []string{"b1"}, "0-broken")
	f.d.Jobs = nil
	f.d.Config.CompactionQueueURL = ""
	ctx := context.Background()
	pass := fleetpkg.BackoffOf(fleetpkg.ModePass)
	var tries []time.Duration // each attempt, since the first
	start := f.clock.Now()
	for f.clock.Now().Sub(start) <= pass.Delay(1)+pass.Delay(2)+pass.Delay(3) {
		sum := f.scheduled(t, ctx)
		for _, ts := range sum.Tables {
			if ts.Table == "0-broken" {
				if !strings.HasPrefix(ts.Skipped, "error:") {
					t.Fatalf("0-broken: %+v, want it failed", ts)
				}
				tries = append(tries, f.clock.Now().Sub(start))
			}
		}
		f.clock.Advance(time.Minute)
	}
	want := []time.Duration{0, pass.Delay(1), pass.Delay(1) + pass.Delay(2), pass.Delay(1) + pass.Delay(2) + pass.Delay(3)}
	if fmt.Sprint(tries) != fmt.Sprint(want) {
		t.Fatalf("a failing table without a compaction queue was tried at %v (1-minute runs), want %v (ModePass: %s, %s, %s)",
			tries, want, pass.Delay(1), pass.Delay(2), pass.Delay(3))
	}
}
