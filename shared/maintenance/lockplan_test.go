package maintenance_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/internal/fakeclock"
	"github.com/tablekeep/tablekeep/shared/lock"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/queue"
	"github.com/tablekeep/tablekeep/shared/table"
)

// blockOutput makes the runner's first rewrite-output write wait until
// released, signalling when it got there.
func blockOutput(f *objstore.Faulty) (reached <-chan struct{}, release chan<- struct{}) {
	r, rel := make(chan struct{}), make(chan struct{})
	once := false
	f.SetBefore(func(n int64, op objstore.Op) error {
		if !once && op.Kind == objstore.KindPut && strings.Contains(op.Key, "/"+table.DataPrefix) {
			once = true
			close(r)
			<-rel
		}
		return nil
	})
	return r, rel
}

func TestTwoCompactorsOneTable(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, t.TempDir(), testPolicy(), queue.EmbeddedOptions{})
	tb := e.create(t)
	for i := range 12 {
		upsert(t, tb, fmt.Sprint("k", i), "v")
	}
	e.clock.Advance(2 * time.Hour)
	reached, release := blockOutput(e.faulty)
	type result struct {
		rep maintenance.TableReport
		err error
	}
	done := make(chan result)
	go func() {
		rep, err := e.runner.MaintainTable(ctx, e.ref)
		done <- result{rep, err}
	}()
	<-reached
	other := *e.runner
	other.Owner, other.LockWait = "master-2", 10*time.Second
	other.Store = e.disk
	start := e.clock.Now()
	rep, err := other.MaintainTable(ctx, e.ref)
	waited := e.clock.Now().Sub(start)
	if err != nil || rep.Skipped == "" {
		t.Fatalf("second compactor: %+v %v, want skipped", rep, err)
	}
	if waited < other.LockWait || waited > other.LockWait+time.Second {
		t.Fatalf("second compactor waited %s on the clock, max wait %s", waited, other.LockWait)
	}
	close(release)
	r := <-done
	if r.err != nil || r.rep.Compacted.Committed == 0 {
		t.Fatalf("first compactor: %+v %v", r.rep.Compacted, r.err)
	}
}

func TestExpiredLeaseCannotCommit(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, t.TempDir(), testPolicy(), queue.EmbeddedOptions{})
	tb := e.create(t)
	for i := range 12 {
		upsert(t, tb, fmt.Sprint("k", i), "v")
	}
	e.clock.Advance(2 * time.Hour)
	before := listing(t, e.disk, e.ref.Root+table.VersionsPrefix)
	floorBefore, _ := tb.Floor(ctx)
	reached, release := blockOutput(e.faulty)
	done := make(chan error)
	go func() {
		_, err := e.runner.MaintainTable(ctx, e.ref)
		done <- err
	}()
	<-reached
	// The holder stalls past its lease; another master takes the lock over.
	e.clock.Advance(6 * time.Minute)
	l, err := e.locker.Acquire(ctx, e.runner.TableLockName(e.ref), lock.AcquireOptions{Owner: "master-2", Lease: 5 * time.Minute, MaxWait: -1})
	if err != nil {
		t.Fatalf("take-over: %v", err)
	}
	close(release)
	err = <-done
	if !errors.Is(err, lock.ErrLeaseExpired) && !errors.Is(err, lock.ErrLeaseLost) {
		t.Fatalf("stale holder: %v, want a fencing error", err)
	}
	if err := sameListing(before, listing(t, e.disk, e.ref.Root+table.VersionsPrefix)); err != nil {
		t.Fatalf("stale holder changed the table: %v", err)
	}
	if f, _ := tb.Floor(ctx); f != floorBefore {
		t.Fatalf("floor moved %d -> %d", floorBefore, f)
	}
	if e.q.Len() != 0 {
		t.Fatal("stale holder enqueued ranges")
	}
	// The new holder's fence passes.
	if err := lock.NewFence(e.locker, l, e.clock, 0).CheckFence(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestPrunePlanner(t *testing.T) {
	ctx := context.Background()
	p := testPolicy() // KeepLast 3, grace 1h
	e := newEnv(t, t.TempDir(), p, queue.EmbeddedOptions{})
	ts := fakeclock.NewStore(e.disk, e.clock)
	e.disk = ts
	tb := e.create(t)
	for i := range 10 { // v2..v11 at T0
		upsert(t, tb, fmt.Sprint("k", i), "a")
	}
	e.clock.Advance(2 * time.Hour)
	for i := range 5 { // v12..v16 at T0+2h
		upsert(t, tb, fmt.Sprint("k", i), "b")
	}
	if err := tb.Tag(ctx, "t5", 5); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(10 * time.Minute)
	// v11 was superseded (by v12) 10 minutes ago: grace keeps it.
	plan, err := maintenance.PlanPrune(ctx, tb, tblName, p, e.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if plan.Floor != 11 || plan.Latest != 16 {
		t.Fatalf("grace: floor %d latest %d, want 11 16", plan.Floor, plan.Latest)
	}
	// Past grace, KeepLast decides; the tag is kept out of the prunable set.
	e.clock.Advance(2 * time.Hour)
	plan, err = maintenance.PlanPrune(ctx, tb, tblName, p, e.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if plan.Floor != 14 || plan.Prunable != 12 || fmt.Sprint(plan.Tagged) != "[5]" {
		t.Fatalf("keep-last: floor %d prunable %d tagged %v, want 14 12 [5]", plan.Floor, plan.Prunable, plan.Tagged)
	}
	if len(plan.Ranges) != 1 || plan.Ranges[0].From != 1 || plan.Ranges[0].To != 13 {
		t.Fatalf("ranges %+v", plan.Ranges)
	}
	q := &bodies{}
	if err := maintenance.ApplyPrune(ctx, tb, &plan, q); err != nil {
		t.Fatal(err)
	}
	if len(q.take()) != 1 {
		t.Fatal("not enqueued")
	}
	// Tagging below the raised floor fails. (Checkout below it still
	// succeeds until the cleaner deletes the manifest: see the report.)
	if err := tb.Tag(ctx, "late", 12); !errors.Is(err, table.ErrVersionPruned) {
		t.Fatalf("tag below the floor: %v", err)
	}
	// In flight: the next run enqueues nothing.
	again, err := maintenance.PlanPrune(ctx, tb, tblName, p, e.clock.Now())
	if err != nil || len(again.Ranges) != 0 {
		t.Fatalf("second run: %+v %v", again.Ranges, err)
	}
	// New versions: only the new range is enqueued.
	for i := range 3 { // v17..v19
		upsert(t, tb, fmt.Sprint("k", i), "c")
	}
	e.clock.Advance(2 * time.Hour)
	plan, err = maintenance.PlanPrune(ctx, tb, tblName, p, e.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if plan.Floor != 17 || plan.Replanned != 0 || len(plan.Ranges) != 1 || plan.Ranges[0].From != 14 || plan.Ranges[0].To != 16 {
		t.Fatalf("new versions: floor %d replanned %d ranges %+v", plan.Floor, plan.Replanned, plan.Ranges)
	}
	if err := maintenance.ApplyPrune(ctx, tb, &plan, q); err != nil {
		t.Fatal(err)
	}
	q.take() // both messages are lost
	// Each range is re-planned ReplanAfter after its own send, whatever was
	// enqueued since: [1, 13] (sent 2h before [14, 16]) first.
	e.clock.Advance(p.ReplanAfter - 2*time.Hour - time.Minute)
	if plan, _ = maintenance.PlanPrune(ctx, tb, tblName, p, e.clock.Now()); len(plan.Ranges) != 0 {
		t.Fatalf("replanned early: %+v", plan.Ranges)
	}
	e.clock.Advance(2 * time.Minute)
	if plan, _ = maintenance.PlanPrune(ctx, tb, tblName, p, e.clock.Now()); plan.Replanned != 1 || len(plan.Ranges) != 1 || plan.Ranges[0].From != 1 || plan.Ranges[0].To != 13 {
		t.Fatalf("lost [1, 13] not replanned alone: replanned %d ranges %+v", plan.Replanned, plan.Ranges)
	}
	e.clock.Advance(2 * time.Hour) // (PlanPrune alone records nothing)
	plan, err = maintenance.PlanPrune(ctx, tb, tblName, p, e.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if plan.Replanned != 2 || len(plan.Ranges) != 2 || plan.Ranges[0].From != 1 || plan.Ranges[len(plan.Ranges)-1].To != 16 {
		t.Fatalf("lost messages not replanned: replanned %d ranges %+v", plan.Replanned, plan.Ranges)
	}
	// Draining the replanned ranges leaves the tagged version and [17, 19].
	if err := maintenance.ApplyPrune(ctx, tb, &plan, maintenance.QueueEnqueuer{Q: e.q}); err != nil {
		t.Fatal(err)
	}
	e.clean.Store = ts
	e.drain(t)
	vs, _ := tb.Versions(ctx)
	var got []uint64
	for _, v := range vs {
		got = append(got, v.Version)
	}
	if fmt.Sprint(got) != "[5 17 18 19]" {
		t.Fatalf("stored versions %v", got)
	}
}
