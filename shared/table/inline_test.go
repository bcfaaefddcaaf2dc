package table

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/tablekeep/tablekeep/shared/internal/fakeclock"
	"github.com/tablekeep/tablekeep/shared/objstore"
)

func inlineOpts() Options { return Options{Format: 3, Clock: fakeclock.NoSleep(nil)} }

func regRow(i int) row {
	n := fmt.Sprintf("rollout-%06d", i)
	return row{Name: n, URI: "s3://bucket/rollouts/" + n, At: int64(1_700_000_000_000_000 + i)}
}

func upsertRows(t *testing.T, tbl *Table, rows ...row) *CommitResult {
	t.Helper()
	rec := regBatch(rows...)
	defer rec.Release()
	res, err := tbl.Upsert(context.Background(), rec)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func wantCounts(t *testing.T, what string, got, want objstore.Counts) {
	t.Helper()
	if got != want {
		t.Errorf("%s: requests %+v, want %+v", what, got, want)
	}
}

// A format-3 table built with 100 rows in one fragment (created, filled,
// flushed), then inline rows on top.
func inlineTable(t *testing.T, st objstore.Store) *Table {
	t.Helper()
	ctx := context.Background()
	tbl, err := Create(ctx, st, "reg", regSchema, "name", inlineOpts())
	if err != nil {
		t.Fatal(err)
	}
	var rows []row
	for i := range 100 {
		rows = append(rows, regRow(i))
	}
	upsertRows(t, tbl, rows...) // 100 rows: beyond the bound, a data file
	if n := len(tbl.Cached().Fragments); n != 1 {
		t.Fatalf("%d fragments after the bulk upsert", n)
	}
	return tbl
}

// TestInlineRequestCounts pins the request counts of issue 23: a warm
// one-row upsert is one PUT (the manifest); a cold registry create (open,
// get, upsert) is LIST 1, GET 1, PUT 1; a cold get of a row written since
// the last compaction is LIST 1, GET 1.
func TestInlineRequestCounts(t *testing.T) {
	ctx := context.Background()
	c := objstore.NewCounting(newMemStore())
	tbl := inlineTable(t, c)

	// Warm: an update of a row in the fragment (its keys read once, cached).
	upsertRows(t, tbl, regRow(5))
	c.Reset()
	res := upsertRows(t, tbl, row{Name: regRow(7).Name, URI: "s3://moved", At: 1})
	wantCounts(t, "one-row upsert of a fragment row, warm", c.Counts(), objstore.Counts{Put: 1})
	if res.RowsDeleted != 1 || res.RowsAdded != 1 {
		t.Errorf("upsert result %+v", res)
	}
	c.Reset()
	upsertRows(t, tbl, regRow(1000)) // a new key
	wantCounts(t, "one-row upsert of a new key, warm", c.Counts(), objstore.Counts{Put: 1})

	// Cold registry create: open + get (absent) + upsert of a new name.
	c.Reset()
	cold, err := Open(ctx, c, "reg", inlineOpts())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cold.Snapshot().Get(ctx, regRow(2000).Name); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get of a new name: %v", err)
	}
	upsertRows(t, cold, regRow(2000))
	wantCounts(t, "registry create, cold", c.Counts(), objstore.Counts{List: 1, Get: 1, Put: 1})

	// Cold get of a row written since the last compaction.
	c.Reset()
	cold2, err := Open(ctx, c, "reg", inlineOpts())
	if err != nil {
		t.Fatal(err)
	}
	rec, err := cold2.Snapshot().Get(ctx, regRow(7).Name)
	if err != nil {
		t.Fatal(err)
	}
	if got := rec.Column(1).ValueStr(0); got != "s3://moved" {
		t.Errorf("get: uri %q", got)
	}
	rec.Release()
	wantCounts(t, "get by key of an inline row, cold", c.Counts(), objstore.Counts{List: 1, Get: 1})
	if n := cold2.Cached().Rows(); n != 102 {
		t.Errorf("rows %d, want 102", n)
	}
}

// TestInlineMergeAndDeletes: scan, get and counts merge inline rows with
// fragments, inline deletion positions and deletion vectors; deletes of
// inline rows and of fragment rows; flush and time travel to a version
// whose inline rows a later flush and compaction moved into fragments.
func TestInlineMergeAndDeletes(t *testing.T) {
	ctx := context.Background()
	st := newMemStore()
	tbl := inlineTable(t, st)
	want := map[string]row{}
	for i := range 100 {
		want[regRow(i).Name] = regRow(i)
	}
	upd := row{Name: regRow(3).Name, URI: "s3://v2", At: 2}
	upsertRows(t, tbl, upd, regRow(500))
	want[upd.Name], want[regRow(500).Name] = upd, regRow(500)
	if _, err := tbl.Delete(ctx, regRow(500).Name, regRow(9).Name); err != nil { // an inline row and a fragment row
		t.Fatal(err)
	}
	delete(want, regRow(500).Name)
	delete(want, regRow(9).Name)
	m := tbl.Cached()
	if len(m.Inline) != 1 || len(m.Fragments) != 1 || len(m.Fragments[0].Inline) != 2 || m.Fragments[0].Deletion != nil {
		t.Fatalf("manifest: %d inline rows, fragments %+v", len(m.Inline), m.Fragments)
	}
	if err := sameRows(rowsOf(t, tbl.Snapshot()), want); err != nil {
		t.Fatal(err)
	}
	if m.Rows() != uint64(len(want)) {
		t.Fatalf("rows %d, want %d", m.Rows(), len(want))
	}
	before := m.Version
	wantBefore := cloneRows(want)

	// A flush moves the inline rows to a data file; then a compaction-like
	// rewrite of both fragments.
	if _, err := tbl.FlushInline(ctx); err != nil {
		t.Fatal(err)
	}
	if m := tbl.Cached(); len(m.Inline) != 0 || len(m.Fragments) != 2 {
		t.Fatalf("after flush: %d inline, %d fragments", len(m.Inline), len(m.Fragments))
	}
	if err := sameRows(rowsOf(t, tbl.Snapshot()), want); err != nil {
		t.Fatal("after flush:", err)
	}
	compactAll(t, tbl)
	if err := sameRows(rowsOf(t, tbl.Snapshot()), want); err != nil {
		t.Fatal("after compaction:", err)
	}
	old, err := tbl.Checkout(ctx, before)
	if err != nil {
		t.Fatal(err)
	}
	if err := sameRows(rowsOf(t, old), wantBefore); err != nil {
		t.Fatal("time travel:", err)
	}
	// A restore of that version keeps its inline rows.
	if _, err := tbl.Restore(ctx, before); err != nil {
		t.Fatal(err)
	}
	if err := sameRows(rowsOf(t, tbl.Snapshot()), wantBefore); err != nil {
		t.Fatal("restore:", err)
	}
}

// compactAll rewrites every fragment of the latest version into one.
func compactAll(t *testing.T, tbl *Table) {
	t.Helper()
	ctx := context.Background()
	m := tbl.Cached()
	rec, inputs, err := tbl.ReadGroup(ctx, m, m.Fragments)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	out, err := tbl.WriteRewriteOutput(ctx, m, rec)
	if err != nil {
		t.Fatal(err)
	}
	rw := &Rewrite{Groups: []RewriteGroup{{Inputs: inputs, Output: out}}, ReadVersion: m.Version}
	if _, err := tbl.CommitRewrite(ctx, rw, tbl.opts.Clock.Now()); err != nil {
		t.Fatal(err)
	}
}

// TestInlineRebaseOverFlushAndCompaction: writers whose cached base
// predates a flush and a compaction by another handle rebase their inline
// rows and inline deletions onto it: nothing lost, duplicated or resurrected.
func TestInlineRebaseOverFlushAndCompaction(t *testing.T) {
	ctx := context.Background()
	st := newMemStore()
	a := inlineTable(t, st)
	upsertRows(t, a, regRow(600), row{Name: regRow(4).Name, URI: "s3://a", At: 3})
	b, err := Open(ctx, st, "reg", inlineOpts())
	if err != nil {
		t.Fatal(err)
	}
	// b flushes and compacts; a still has the older base cached.
	if _, err := b.FlushInline(ctx); err != nil {
		t.Fatal(err)
	}
	compactAll(t, b)
	// a: replace an inline row that b moved, delete a fragment row, add one.
	upsertRows(t, a, row{Name: regRow(600).Name, URI: "s3://a2", At: 4}, regRow(700))
	if _, err := a.Delete(ctx, regRow(4).Name, regRow(11).Name); err != nil {
		t.Fatal(err)
	}
	// And a flush by a that raced b's (a's own cache is current now; b's
	// is stale): b flushes a's rows after a deleted some.
	if _, err := b.FlushInline(ctx); err != nil {
		t.Fatal(err)
	}
	want := map[string]row{}
	for i := range 100 {
		want[regRow(i).Name] = regRow(i)
	}
	delete(want, regRow(4).Name)
	delete(want, regRow(11).Name)
	want[regRow(600).Name] = row{Name: regRow(600).Name, URI: "s3://a2", At: 4}
	want[regRow(700).Name] = regRow(700)
	latestRowsAre(t, want, a, b)
}

// TestInlineBoundFlushesToFile: a commit whose result would exceed the
// inline bound writes a data file instead, so the latest manifest stays
// small; a format-3 manifest is refused by a decoder that reads only 1-2.
func TestInlineBoundFlushesToFile(t *testing.T) {
	ctx := context.Background()
	st := newMemStore()
	tbl := inlineTable(t, st)
	for i := range 200 {
		upsertRows(t, tbl, regRow(1000+i))
		if b := inlineBytes(tbl.Cached()); b > tbl.Cached().InlineMaxBytes {
			t.Fatalf("inline bytes %d over the bound", b)
		}
	}
	m := tbl.Cached()
	body, err := st.Get(ctx, "reg/"+manifestKey(m.Version))
	if err != nil {
		t.Fatal(err)
	}
	if len(body) > 4096 {
		t.Errorf("latest manifest %d bytes", len(body))
	}
	if len(m.Fragments) < 2 {
		t.Errorf("no data file written past the bound: %d fragments", len(m.Fragments))
	}
	if m.Rows() != 300 {
		t.Errorf("rows %d", m.Rows())
	}
	if got := len(rowsOf(t, tbl.Snapshot())); got != 300 {
		t.Errorf("scan %d rows", got)
	}
}

// TestInlineNoChangeRecord: a version that added and removed no file has
// no change record (format 3); one that did has one.
func TestInlineNoChangeRecord(t *testing.T) {
	ctx := context.Background()
	st := newMemStore()
	tbl := inlineTable(t, st)
	res := upsertRows(t, tbl, regRow(800))
	if _, err := tbl.ChangeRecord(ctx, res.Version); !errors.Is(err, objstore.ErrNotExist) {
		t.Errorf("inline-only version %d: change record %v", res.Version, err)
	}
	if _, err := tbl.ChangeRecord(ctx, 1); !errors.Is(err, objstore.ErrNotExist) {
		t.Errorf("create: change record %v", err)
	}
	if _, err := tbl.ChangeRecord(ctx, 2); err != nil { // the bulk upsert's data file
		t.Errorf("version 2: %v", err)
	}
}

// TestInlineStatsCountRows: stats count inline rows and inline deletions.
func TestInlineStatsCountRows(t *testing.T) {
	tbl := inlineTable(t, newMemStore())
	upsertRows(t, tbl, regRow(900), row{Name: regRow(1).Name, URI: "x", At: 1})
	s := StatsOf(tbl.Cached())
	if s.Rows != 101 || s.DeletedRows != 1 {
		t.Errorf("stats rows %d deleted %d, want 101 and 1", s.Rows, s.DeletedRows)
	}
}

// TestCrashAtEveryRequestOfInlineFlush: a format-3 upsert that reaches the
// inline bound (batch 1), or whose batch is above it (batch 2), flushes
// the inline rows with its own into one data file;
// failing each of its requests (before it is sent, and after it was
// applied) leaves the table at its previous rows or the whole commit, and
// a retry converges.
func TestCrashAtEveryRequestOfInlineFlush(t *testing.T) {
	ctx := context.Background()
	for _, after := range []bool{false, true} {
		for _, batch := range [][]row{{{"d", "4", 4}}, {{"b", "22", 22}, {"d", "4", 4}}} {
			covered := false
			for n := int64(1); !covered; n++ {
				st := newMemStore()
				f := objstore.NewFaulty(st)
				tbl, err := Create(ctx, f, "t", regSchema, "name", Options{Clock: fakeclock.NoSleep(nil), Format: 3, InlineMaxBytes: 45})
				if err != nil {
					t.Fatal(err)
				}
				base := map[string]row{}
				for _, r := range []row{{"a", "1", 1}, {"b", "2", 2}, {"c", "3", 3}} {
					if _, err := tbl.Append(ctx, regBatch(r)); err != nil {
						t.Fatal(err)
					}
					base[r.Name] = r
				}
				if m := tbl.Cached(); len(m.Inline) != 3 || len(m.Fragments) != 0 {
					t.Fatalf("base: %d inline rows, %d fragments", len(m.Inline), len(m.Fragments))
				}
				want := cloneRows(base)
				for _, r := range batch {
					want[r.Name] = r
				}
				f.Reset()
				fault := objstore.FailNth(n, objstore.ErrInjected)
				if after {
					f.SetAfter(fault)
				} else {
					f.SetBefore(fault)
				}
				_, opErr := tbl.Upsert(ctx, regBatch(batch...))
				sent := f.Requests()
				f.SetBefore(nil)
				f.SetAfter(nil)
				label := fmt.Sprintf("after=%v batch=%d n=%d", after, len(batch), n)
				fresh, err := Open(ctx, st, "t", Options{})
				if err != nil {
					t.Fatalf("%s: reopen: %v", label, err)
				}
				got := rowsOf(t, fresh.Snapshot())
				if sameRows(got, base) != nil && sameRows(got, want) != nil {
					t.Fatalf("%s: half a commit visible: %v", label, got)
				}
				if opErr != nil {
					if sameRows(got, base) != nil {
						t.Fatalf("%s: op failed (%v) but its commit is visible", label, opErr)
					}
					if _, err := fresh.Upsert(ctx, regBatch(batch...)); err != nil {
						t.Fatalf("%s: retry: %v", label, err)
					}
				}
				m := fresh.Cached()
				if err := sameRows(rowsOf(t, fresh.Snapshot()), want); err != nil || m.Rows() != uint64(len(want)) {
					t.Fatalf("%s: %v (count %d)", label, err, m.Rows())
				}
				if len(m.Fragments) != 1 || m.InlineBytes() > m.InlineMaxBytes {
					t.Fatalf("%s: %d fragments, inline bytes %d: not flushed", label, len(m.Fragments), m.InlineBytes())
				}
				if len(m.Inline) != 0 { // batch 2 is above the bound: its file takes the inline rows too (4.7)
					t.Fatalf("%s: %d inline rows left: the writer did not flush", label, len(m.Inline))
				}
				covered = sent < n
			}
		}
	}
}

// latestRowsAre fails t unless the latest version each handle reads holds
// exactly the rows want, and counts as many.
func latestRowsAre(t *testing.T, want map[string]row, hs ...*Table) {
	t.Helper()
	for _, h := range hs {
		snap, err := h.Latest(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if err := sameRows(rowsOf(t, snap), want); err != nil {
			t.Fatal(err)
		}
		if snap.CountRows() != uint64(len(want)) {
			t.Fatalf("count %d, want %d", snap.CountRows(), len(want))
		}
	}
}

// TestInlineBigBatchFoldsInlineRows (issue 29 item 8, docs/format.md 4.7
// "The bound"): an append or upsert whose own rows are above the inline
// bound writes them and the manifest's inline rows into one data file (the
// inline rows first, those the upsert replaced as inline deletions of it),
// so the manifest keeps no inline row; before, the batch had a data file of
// its own and the inline rows stayed in the manifest. The requests are
// those of a batch written to its own file.
func TestInlineBigBatchFoldsInlineRows(t *testing.T) {
	ctx := context.Background()
	for _, upsert := range []bool{false, true} {
		c := objstore.NewCounting(newMemStore())
		tbl := inlineTable(t, c)
		want := rowsOf(t, tbl.Snapshot())
		for i := range 3 {
			upsertRows(t, tbl, regRow(1000+i))
			want[regRow(1000+i).Name] = regRow(1000 + i)
		}
		if n := len(tbl.Cached().Inline); n != 3 {
			t.Fatalf("%d inline rows before the big batch, want 3", n)
		}
		var rows []row
		for i := range 100 {
			rows = append(rows, regRow(2000+i))
		}
		if upsert {
			rows = append(rows, row{Name: regRow(1001).Name, URI: "s3://replaced", At: 1})
		}
		rec := regBatch(rows...)
		c.Reset()
		var res *CommitResult
		var err error
		if upsert {
			res, err = tbl.Upsert(ctx, rec)
		} else {
			res, err = tbl.Append(ctx, rec)
		}
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
		// A data file, its change record, the manifest.
		wantCounts(t, fmt.Sprintf("big batch (upsert %v)", upsert), c.Counts(), objstore.Counts{Put: 3})
		for _, r := range rows {
			want[r.Name] = r
		}
		m := tbl.Cached()
		if len(m.Inline) != 0 || len(m.Fragments) != 2 {
			t.Fatalf("upsert %v: %d inline rows and %d fragments after a batch above the bound, want 0 and 2 (the inline rows in the batch's file, 4.7)",
				upsert, len(m.Inline), len(m.Fragments))
		}
		f := m.Fragments[1]
		wantDeleted := 0
		if upsert {
			wantDeleted = 1 // the replaced inline row, an inline deletion of the file
		}
		if f.Rows != uint64(3+len(rows)) || len(f.Inline) != wantDeleted {
			t.Errorf("upsert %v: the file has %d rows, inline deletions %v; want %d rows, %d deleted", upsert, f.Rows, f.Inline, 3+len(rows), wantDeleted)
		}
		if res.RowsAdded != uint64(len(rows)) || res.RowsDeleted != uint64(wantDeleted) {
			t.Errorf("upsert %v: result %+v, want %d added, %d deleted (folded rows are moved, not added)", upsert, res, len(rows), wantDeleted)
		}
		if got := rowsOf(t, tbl.Snapshot()); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("upsert %v: rows differ: %d rows, want %d", upsert, len(got), len(want))
		}
	}
}

// TestInlineBigBatchFoldRebases: a big batch's fold is a flush, applied to
// the base it commits on: an inline row another handle replaced since the
// batch read it is an inline deletion of the batch's file, and that
// handle's row stays inline, so every key is live once.
func TestInlineBigBatchFoldRebases(t *testing.T) {
	ctx := context.Background()
	st := newMemStore()
	a := inlineTable(t, st)
	for i := range 3 {
		upsertRows(t, a, regRow(1000+i))
	}
	b, err := Open(ctx, st, "reg", inlineOpts())
	if err != nil {
		t.Fatal(err)
	}
	moved := row{Name: regRow(1001).Name, URI: "s3://by-b", At: 7}
	upsertRows(t, b, moved) // a's cached version is now behind
	var rows []row
	for i := range 100 {
		rows = append(rows, regRow(2000+i))
	}
	rec := regBatch(rows...)
	defer rec.Release()
	if _, err := a.Append(ctx, rec); err != nil {
		t.Fatal(err)
	}
	m := a.Cached()
	if len(m.Inline) != 1 || m.Inline[0].Key == nil {
		t.Fatalf("inline rows after the rebased fold: %d, want b's one", len(m.Inline))
	}
	f := m.Fragments[len(m.Fragments)-1]
	if f.Rows != 103 || len(f.Inline) != 1 || f.Inline[0] != 1 {
		t.Fatalf("the batch's file: %d rows, inline deletions %v; want 103 and [1] (the row b replaced)", f.Rows, f.Inline)
	}
	got := rowsOf(t, a.Snapshot())
	if len(got) != 203 || got[moved.Name] != moved {
		t.Fatalf("%d rows, %s = %+v; want 203 and b's row", len(got), moved.Name, got[moved.Name])
	}
	if n := a.Cached().Rows(); n != 203 {
		t.Fatalf("counted rows %d, want 203 (no key live twice)", n)
	}
}
