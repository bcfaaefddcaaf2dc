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
