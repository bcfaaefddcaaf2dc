package maintenance_test

import (
	"errors"

	"context"
	"fmt"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/internal/testkit"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/queue"
	"github.com/tablekeep/tablekeep/shared/table"
)

// TestCleanerReadsNothingForInlineVersions: on a format-3 table, versions
// whose commits added and removed no file (inline writes) have no change
// record; the planner repairs none of them (the latest manifest's record
// index says so) and the cleaner GETs nothing for them: its messages name
// the versions that have records. Before format 3 it read one record per
// pruned version (and the planner re-created each missing one).
func TestCleanerReadsNothingForInlineVersions(t *testing.T) {
	ctx := context.Background()
	p := testPolicy()
	e := newEnv(t, t.TempDir(), p, queue.EmbeddedOptions{})
	e.format = 3
	tb := e.create(t)
	model := map[string]string{}
	for i := range 40 {
		name, val := fmt.Sprintf("k%02d", i%25), fmt.Sprint("v", i)
		upsert(t, tb, name, val)
		model[name] = val
	}
	if n := len(tb.Cached().Fragments); n != 0 {
		t.Fatalf("%d fragments: the writes were not inline", n)
	}
	e.clock.Advance(2 * time.Hour)
	rep, err := e.runner.MaintainTable(ctx, e.ref)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Prune.Repaired != 0 {
		t.Errorf("planner repaired %d change records of inline versions", rep.Prune.Repaired)
	}
	if len(rep.Prune.Ranges) == 0 {
		t.Fatal("nothing to prune")
	}
	var mu sync.Mutex
	var gets []string
	e.faulty.SetBefore(func(_ int64, op objstore.Op) error {
		if op.Kind == objstore.KindGet {
			mu.Lock()
			gets = append(gets, op.Key)
			mu.Unlock()
		}
		return nil
	})
	e.drain(t)
	e.faulty.SetBefore(nil)
	records := 0
	for _, k := range gets {
		if strings.Contains(k, table.ChangesPrefix) {
			records++
		}
	}
	if records != 0 {
		t.Errorf("cleaner GET %d change records for inline-only versions (%v)", records, gets)
	}
	vs, err := e.open(t).Versions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) > p.KeepLast+2 {
		t.Errorf("%d versions left after cleanup", len(vs))
	}
	if err := diffRows(latestRows(t, e.open(t)), model); err != nil {
		t.Fatal(err)
	}
}

// TestInlineRecordIndexRepairsFileVersions: a format-3 version that did
// add or remove a file and whose change record is missing (a committer
// crashed between its manifest and its record) is still repaired by the
// planner: the record index lists it.
func TestInlineRecordIndexRepairsFileVersions(t *testing.T) {
	ctx := context.Background()
	p := testPolicy()
	e := newEnv(t, t.TempDir(), p, queue.EmbeddedOptions{})
	e.format, e.inlineMax = 3, 60
	tb := e.create(t)
	var fileVersions []uint64
	for i := range 30 {
		res := upsert(t, tb, fmt.Sprintf("k%02d", i%9), fmt.Sprint("v", i))
		if has, known := tb.Cached().HasRecord(res.Version); known && has {
			fileVersions = append(fileVersions, res.Version)
		}
	}
	if len(fileVersions) < 2 {
		t.Fatalf("only %d file-changing versions", len(fileVersions))
	}
	lost := fileVersions[0]
	if err := e.disk.Delete(ctx, []string{e.ref.Root + table.ChangeKey(lost)}); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(2 * time.Hour)
	rep, err := e.runner.MaintainTable(ctx, e.ref)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Prune.Repaired != 1 {
		t.Errorf("repaired %d change records, want 1 (version %d)", rep.Prune.Repaired, lost)
	}
	e.drain(t)
	if err := diffRows(latestRows(t, e.open(t)), latestRows(t, tb)); err != nil {
		t.Fatal(err)
	}
}

// TestRangeMessageRecordsChecked: a message's records must ascend within
// [From+1, To+1] and number at most MaxMessageRecords.
func TestRangeMessageRecordsChecked(t *testing.T) {
	for _, body := range []string{
		`{"v":1,"table":"t","root":"r/","from":5,"to":9,"records":[5]}`,
		`{"v":1,"table":"t","root":"r/","from":5,"to":9,"records":[11]}`,
		`{"v":1,"table":"t","root":"r/","from":5,"to":9,"records":[7,7]}`,
		`{"v":1,"table":"t","root":"r/","from":5,"to":9,"records":[8,6]}`,
	} {
		if _, err := maintenance.DecodeRangeMessage([]byte(body)); !errors.Is(err, maintenance.ErrInvalidMessage) {
			t.Errorf("%s: %v", body, err)
		}
	}
	m, err := maintenance.DecodeRangeMessage([]byte(`{"v":1,"table":"t","root":"r/","from":5,"to":9,"records":[6,10]}`))
	if err != nil || m.Records == nil || len(*m.Records) != 2 {
		t.Errorf("valid records: %+v %v", m, err)
	}
	m, err = maintenance.DecodeRangeMessage([]byte(`{"v":1,"table":"t","root":"r/","from":5,"to":9,"records":[]}`))
	if err != nil || m.Records == nil || len(*m.Records) != 0 {
		t.Errorf("empty records: %+v %v", m, err)
	}
}

// TestInlineRecordIndexRepairsByHead: a format-3 range whose span the
// record index names only a few versions of checks those records with a
// HEAD each instead of listing _changes/; a named record that is missing
// (a committer crashed between its manifest and its record) is repaired
// all the same, and the range is cleaned from it.
func TestInlineRecordIndexRepairsByHead(t *testing.T) {
	ctx := context.Background()
	p := testPolicy()
	e := newEnv(t, t.TempDir(), p, queue.EmbeddedOptions{})
	e.format, e.inlineMax = 3, 200
	tb := e.create(t)
	var fileVersions []uint64
	for i := range 12 {
		upsert(t, tb, fmt.Sprintf("k%02d", i%9), fmt.Sprint("v", i))
		if i%4 == 3 {
			res, err := tb.FlushInline(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if has, known := tb.Cached().HasRecord(res.Version); known && has {
				fileVersions = append(fileVersions, res.Version)
			}
		}
	}
	if len(fileVersions) < 2 || len(fileVersions) > 4 {
		t.Fatalf("%d file-changing versions, want 1-4", len(fileVersions))
	}
	lost := fileVersions[0]
	if err := e.disk.Delete(ctx, []string{e.ref.Root + table.ChangeKey(lost)}); err != nil {
		t.Fatal(err)
	}
	var changeLists int
	e.faulty.SetBefore(func(_ int64, op objstore.Op) error {
		if op.Kind == objstore.KindList && strings.Contains(op.Key, table.ChangesPrefix) {
			changeLists++
		}
		return nil
	})
	e.clock.Advance(2 * time.Hour)
	rep, err := e.runner.MaintainTable(ctx, e.ref)
	e.faulty.SetBefore(nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Prune.Repaired != 1 || changeLists != 0 {
		t.Errorf("repaired %d change records with %d listings of _changes/, want 1 (version %d) and none", rep.Prune.Repaired, changeLists, lost)
	}
	if _, err := e.disk.Head(ctx, e.ref.Root+table.ChangeKey(lost)); err != nil && rep.Prune.Floor <= lost {
		t.Errorf("record %d not repaired: %v", lost, err)
	}
	e.drain(t)
	if err := diffRows(latestRows(t, e.open(t)), latestRows(t, tb)); err != nil {
		t.Fatal(err)
	}
}

// TestFoldedFlushOneCommit: a format-3 compaction that would flush the
// inline rows and then compact the flushed file with the small fragment
// before it writes one data file, one manifest and one change record; its
// plan (the dry run's) names that one group, with the inline rows folded;
// every row stays, and the version before still reads as it was.
func TestFoldedFlushOneCommit(t *testing.T) {
	ctx := context.Background()
	st := objstore.NewCounting(testkit.DiskStore(t))
	clk := newFakeClock()
	tb, err := table.Create(ctx, st, "t/", kvSchema, "name", table.Options{Format: 3, InlineMaxBytes: 200, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		upsert(t, tb, fmt.Sprintf("a%d", i), "x")
	}
	if _, err := tb.FlushInline(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 0; 2*tb.Cached().InlineBytes() < tb.Cached().InlineMaxBytes; i++ {
		upsert(t, tb, fmt.Sprintf("b%d", i), "y")
	}
	upsert(t, tb, "a1", "z") // an inline deletion of the fragment's row
	before := latestRows(t, tb)
	m := tb.Cached()
	if len(m.Fragments) != 1 || len(m.Inline) == 0 {
		t.Fatalf("base: %d fragments, %d inline rows", len(m.Fragments), len(m.Inline))
	}
	c := maintenance.NewCompactor(nil, clk)
	plan, err := c.Plan(ctx, tb, maintenance.DefaultPolicy())
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Groups) != 1 || len(plan.Groups[0].Fragments) != 1 || len(plan.Groups[0].Fold) != len(m.Inline) {
		t.Fatalf("plan %+v: want one group of the fragment with the %d inline rows folded", plan, len(m.Inline))
	}
	st.Reset()
	res, err := c.Run(ctx, tb, maintenance.DefaultPolicy())
	if err != nil {
		t.Fatal(err)
	}
	if res.Committed != 1 || len(res.Versions) != 1 || res.FlushedRows != uint64(len(m.Inline)) {
		t.Errorf("run %+v: want one commit flushing %d rows", res, len(m.Inline))
	}
	// LIST and GET the latest (the handle's cache is older than the run's
	// read), GET the fragment; PUT the output, the manifest, the record.
	if got := st.Counts(); got.Put != 3 || got.Get > 2 {
		t.Errorf("run requests %v, want PUT 3 (output, manifest, change record) and no read of a flushed file", got)
	}
	after := tb.Cached()
	if len(after.Inline) != 0 || len(after.Fragments) != 1 {
		t.Errorf("after: %d inline rows, %d fragments; want 0 and 1", len(after.Inline), len(after.Fragments))
	}
	if err := diffRows(latestRows(t, tb), before); err != nil {
		t.Fatal(err)
	}
	snap, err := tb.Checkout(ctx, m.Version)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := scanSnap(ctx, snap)
	if err != nil {
		t.Fatal(err)
	}
	if err := diffRows(rows, before); err != nil {
		t.Fatalf("version %d: %v", m.Version, err)
	}
}
