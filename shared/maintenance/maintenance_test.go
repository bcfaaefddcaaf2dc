package maintenance_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/embedded"
	"github.com/tablekeep/tablekeep/shared/lock"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/table"
)

// The seed's three tests (#274), ported to an embedded warehouse: file
// locks, the in-process queue, the real catalog, and a fake clock.

const regRoot = "tables/reg"

func openWarehouse(t *testing.T, keepLast int) (*embedded.Warehouse, *fakeClock, *table.Table) {
	t.Helper()
	ctx := context.Background()
	clk := newFakeClock()
	w, err := embedded.Open(ctx, t.TempDir(), clk, discard, nil)
	if err != nil {
		t.Fatal(err)
	}
	tb, err := table.Create(ctx, w.Store, regRoot, kvSchema, "name", table.Options{Clock: clk, Format: 2}) // pinned: asserts fragments
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Catalog.Register(ctx, "reg", regRoot, maintenance.Policy{KeepLast: keepLast}); err != nil {
		t.Fatal(err)
	}
	return w, clk, tb
}

// seedUpsert is the seed's upsert: delete then append (two commits when the
// row exists), so a retried create is idempotent.
func seedUpsert(t *testing.T, tb *table.Table, name, val string) {
	t.Helper()
	ctx := context.Background()
	if _, err := tb.Delete(ctx, name); err != nil {
		t.Fatalf("delete %s: %v", name, err)
	}
	rec := kv(name, val)
	defer rec.Release()
	if _, err := tb.Append(ctx, rec); err != nil {
		t.Fatalf("append %s: %v", name, err)
	}
}

func runner(w *embedded.Warehouse) *maintenance.Runner {
	return &maintenance.Runner{
		Store: w.Store, Catalog: w.Catalog, Locker: w.Locker, Queue: maintenance.QueueEnqueuer{Q: w.Queue},
		Clock: w.Clock, Logger: discard, Owner: "master",
	}
}

func TestMaintainBoundsVersionsAndPreservesRows(t *testing.T) {
	ctx := context.Background()
	const keepLast = 5
	w, clk, tb := openWarehouse(t, keepLast)
	model := map[string]string{}
	for round := range 2 {
		for i := range 20 {
			name, val := fmt.Sprintf("store-%02d", i), fmt.Sprintf("uri-%d-%d", round, i)
			seedUpsert(t, tb, name, val)
			model[name] = val
		}
	}
	before, err := tb.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if before.Versions < 40 || before.Fragments < 20 {
		t.Fatalf("setup: %d versions, %d fragments", before.Versions, before.Fragments)
	}
	clk.Advance(2 * time.Hour)
	rep, err := w.Maintain(ctx, embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range rep.Run.Tables {
		if tr.Skipped != "" {
			t.Fatalf("%s skipped: %s", tr.Table, tr.Skipped)
		}
	}
	if rep.Drain.Succeeded == 0 || rep.Drain.DeadLettered != 0 {
		t.Fatalf("drain %+v", rep.Drain)
	}
	after, err := tb.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tags, _ := tb.Tags(ctx)
	if after.Versions > keepLast+len(tags) {
		t.Fatalf("%d versions stored after maintenance, keep-last %d", after.Versions, keepLast)
	}
	if after.Fragments != 1 || after.DeletedRows != 0 {
		t.Fatalf("fragments not folded: %+v", after)
	}
	if err := diffRows(latestRows(t, tb), model); err != nil {
		t.Fatal(err)
	}
	checkRetained(t, tb, nil)
	// Further writes work, on this handle and a fresh one.
	seedUpsert(t, tb, "store-00", "again")
	model["store-00"] = "again"
	upsert(t, tb, "store-new", "new")
	model["store-new"] = "new"
	fresh, err := table.Open(ctx, w.Store, regRoot, table.Options{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	if err := diffRows(latestRows(t, fresh), model); err != nil {
		t.Fatal(err)
	}
}

func TestCleanupRunsDetachedFromTheTable(t *testing.T) {
	ctx := context.Background()
	w, clk, tb := openWarehouse(t, 3)
	model := map[string]string{}
	for i := range 20 {
		name := fmt.Sprintf("store-%02d", i%12)
		val := fmt.Sprint("v", i)
		seedUpsert(t, tb, name, val)
		model[name] = val
	}
	clk.Advance(2 * time.Hour)
	r := runner(w)
	ref, err := w.Catalog.Resolve(ctx, "reg")
	if err != nil {
		t.Fatal(err)
	}
	tr, err := r.MaintainTable(ctx, ref)
	if err != nil || tr.Skipped != "" {
		t.Fatalf("maintain: %v %q", err, tr.Skipped)
	}
	if tr.Compacted.Committed == 0 || len(tr.Prune.Ranges) == 0 || w.Queue.Len() == 0 {
		t.Fatalf("expected compaction and enqueued ranges: %+v, queue %d", tr.Prune, w.Queue.Len())
	}
	// The cleaner message is outstanding: the table lock is free, and
	// writes land (through the old handle, which reloads, and a new one).
	regRef, err := w.Catalog.Resolve(ctx, "reg")
	if err != nil {
		t.Fatal(err)
	}
	held, err := w.Locker.Acquire(ctx, (&maintenance.Runner{}).TableLockName(regRef), lock.AcquireOptions{Owner: "other-master", Lease: time.Hour, MaxWait: -1})
	if err != nil {
		t.Fatalf("table lock still held after compaction: %v", err)
	}
	seedUpsert(t, tb, "mid-cleanup", "written while the cleaner is outstanding")
	model["mid-cleanup"] = "written while the cleaner is outstanding"
	seedUpsert(t, tb, "store-03", "rewritten mid-cleanup")
	model["store-03"] = "rewritten mid-cleanup"
	// The cleaner needs no lock: it drains while somebody else holds it.
	cl := w.Cleaner()
	var deleted int
	for {
		ds, err := w.Queue.Receive(ctx, 10, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) == 0 {
			break
		}
		for _, d := range ds {
			res, err := cl.Clean(ctx, d.Body)
			if err != nil {
				t.Fatalf("clean: %v", err)
			}
			deleted += res.VersionsDeleted
			if err := w.Queue.Ack(ctx, d); err != nil {
				t.Fatal(err)
			}
		}
	}
	if deleted == 0 {
		t.Fatal("the cleaner deleted no versions")
	}
	if err := w.Locker.Release(ctx, held); err != nil {
		t.Fatal(err)
	}
	fresh, err := table.Open(ctx, w.Store, regRoot, table.Options{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	if err := diffRows(latestRows(t, fresh), model); err != nil {
		t.Fatal(err)
	}
	if err := diffRows(latestRows(t, tb), model); err != nil {
		t.Fatal(err)
	}
	checkRetained(t, fresh, nil)
}

func TestMaintenanceDoesNotLoseConcurrentWorkerUpserts(t *testing.T) {
	ctx := context.Background()
	w, clk, master := openWarehouse(t, 2)
	worker, err := table.Open(ctx, w.Store, regRoot, table.Options{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	model := map[string]string{}
	write := func(h *table.Table, who string, n int) {
		for i := range n {
			name := fmt.Sprintf("%s-%02d", who, len(model)+i)
			seedUpsert(t, h, name, who)
			model[name] = who
		}
	}
	write(master, "master", 10)
	write(worker, "before", 6)
	clk.Advance(2 * time.Hour)
	r := runner(w)
	ref, err := w.Catalog.Resolve(ctx, "reg")
	if err != nil {
		t.Fatal(err)
	}
	tr, err := r.MaintainTable(ctx, ref)
	if err != nil || tr.Compacted.Committed == 0 {
		t.Fatalf("compact: %v %+v", err, tr.Compacted)
	}
	write(worker, "between", 4)
	if _, err := maintenance.DrainLocal(ctx, w.Queue, w.Cleaner(), discard); err != nil {
		t.Fatal(err)
	}
	write(worker, "after", 6)
	if len(model) != 26 {
		t.Fatalf("model has %d rows", len(model))
	}
	for name, h := range map[string]*table.Table{"master": master, "worker": worker} {
		if err := diffRows(latestRows(t, h), model); err != nil {
			t.Fatalf("%s handle: %v", name, err)
		}
	}
	// A second round, and the master's long-cached handle still writes.
	clk.Advance(2 * time.Hour)
	if _, err := r.MaintainTable(ctx, ref); err != nil {
		t.Fatal(err)
	}
	write(worker, "round2", 2)
	if _, err := maintenance.DrainLocal(ctx, w.Queue, w.Cleaner(), discard); err != nil {
		t.Fatal(err)
	}
	write(master, "master2", 2)
	for name, h := range map[string]*table.Table{"master": master, "worker": worker} {
		if err := diffRows(latestRows(t, h), model); err != nil {
			t.Fatalf("%s handle: %v", name, err)
		}
	}
	checkRetained(t, worker, nil)
}
