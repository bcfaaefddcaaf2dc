package table

import (
	"context"
	"fmt"
	"testing"

	"github.com/tablekeep/tablekeep/shared/internal/fakeclock"
	"github.com/tablekeep/tablekeep/shared/objstore"
)

// foldCompact reads m's fragments frags and its inline rows as one group
// and writes the output; commit commits it.
func foldCompact(t *testing.T, tbl *Table, m *Manifest, frags []Fragment) (commit func() (*CommitResult, error)) {
	t.Helper()
	ctx := context.Background()
	readAt := tbl.opts.Clock.Now()
	rec, inputs, err := tbl.ReadFoldGroup(ctx, m, frags, m.Inline, GroupReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	out, err := tbl.WriteRewriteOutput(ctx, m, rec)
	if err != nil {
		t.Fatal(err)
	}
	rw := &Rewrite{Groups: []RewriteGroup{{Inputs: inputs, Output: out, Fold: m.Inline}}, ReadVersion: m.Version}
	return func() (*CommitResult, error) { return tbl.CommitRewrite(ctx, rw, readAt) }
}

// TestFoldRewriteFlushesAndCompactsInOneCommit: a rewrite group that folds
// the inline rows into its output (RewriteGroup.Fold) moves them out of the
// manifest in the same commit as the compaction: one data file, one
// manifest, one change record. Writers that raced it (an upsert replacing
// a folded inline row, deletes of a folded row and of an input's row, a
// new row) keep every row live in exactly one place, and the version
// before still reads as it was.
func TestFoldRewriteFlushesAndCompactsInOneCommit(t *testing.T) {
	ctx := context.Background()
	mem := newMemStore()
	st := objstore.NewCounting(mem)
	a := inlineTable(t, st)
	upsertRows(t, a, regRow(600), regRow(601), regRow(602), row{Name: regRow(4).Name, URI: "s3://a", At: 3})
	m := a.Cached()
	if len(m.Inline) != 4 || len(m.Fragments) != 1 {
		t.Fatalf("base: %d inline rows, %d fragments", len(m.Inline), len(m.Fragments))
	}
	before := rowsOf(t, a.Snapshot())
	commit := foldCompact(t, a, m, m.Fragments)

	// A writer races the compaction.
	b, err := Open(ctx, st, "reg", inlineOpts())
	if err != nil {
		t.Fatal(err)
	}
	upsertRows(t, b, row{Name: regRow(601).Name, URI: "s3://b", At: 5}, regRow(700))
	if _, err := b.Delete(ctx, regRow(602).Name, regRow(11).Name); err != nil {
		t.Fatal(err)
	}
	want := cloneRows(before)
	want[regRow(601).Name] = row{Name: regRow(601).Name, URI: "s3://b", At: 5}
	want[regRow(700).Name] = regRow(700)
	delete(want, regRow(602).Name)
	delete(want, regRow(11).Name)

	st.Reset()
	res, err := commit()
	if err != nil {
		t.Fatal(err)
	}
	// The commit refreshes (LIST, GET: b committed since the read), writes
	// a vector for row 11 remapped onto the output, one manifest and one
	// change record.
	if c := st.Counts(); c != (objstore.Counts{List: 1, Get: 1, Put: 3}) {
		t.Errorf("commit: %+v", c)
	}
	got := a.Cached()
	if len(got.Fragments) != 1 {
		t.Errorf("%d fragments after the fold, want 1", len(got.Fragments))
	}
	// Only b's rows written after the read are still inline.
	for _, r := range got.Inline {
		if r.Version <= m.Version {
			t.Errorf("inline row (%d, %d) read by the fold still inline", r.Version, r.Seq)
		}
	}
	if len(got.Inline) != 2 {
		t.Errorf("%d inline rows, want 2 (b's upsert)", len(got.Inline))
	}
	if got.Op.Kind != 5 || got.Op.RowsAdded != 0 || got.Op.RowsDeleted != 0 {
		t.Errorf("op %+v, want a rewrite recording 0 and 0", got.Op)
	}
	latestRowsAre(t, want, a, b)
	// Time travel: the version read and the one before the fold.
	for v, w := range map[uint64]map[string]row{m.Version: before} {
		snap, err := a.Checkout(ctx, v)
		if err != nil {
			t.Fatal(err)
		}
		if err := sameRows(rowsOf(t, snap), w); err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
	}
	prev, err := a.Checkout(ctx, res.Version-1)
	if err != nil {
		t.Fatal(err)
	}
	prevWant := cloneRows(want)
	if err := sameRows(rowsOf(t, prev), prevWant); err != nil {
		t.Fatalf("v%d (b's delete): %v", res.Version-1, err)
	}
	rec, err := a.ChangeRecord(ctx, res.Version)
	if err != nil || len(rec.Added) != 2 || len(rec.Removed) != 1 {
		t.Errorf("change record %+v, %v: want the output and its vector added and the input removed", rec, err)
	}
}

// TestFoldRewriteInputsAllDeleted: every input of a folding group deleted
// while it was written: the output still carries the folded rows (the
// inputs' rows deleted in it) and goes last, where a flush puts its file.
func TestFoldRewriteInputsAllDeleted(t *testing.T) {
	ctx := context.Background()
	st := newMemStore()
	a, err := Create(ctx, st, "t", regSchema, "name", inlineOpts())
	if err != nil {
		t.Fatal(err)
	}
	upsertRows(t, a, row{"a", "1", 1})
	if _, err := a.FlushInline(ctx); err != nil {
		t.Fatal(err)
	}
	upsertRows(t, a, row{"b", "2", 2}, row{"c", "3", 3})
	m := a.Cached()
	if len(m.Fragments) != 1 || len(m.Inline) != 2 {
		t.Fatalf("base: %d fragments, %d inline rows", len(m.Fragments), len(m.Inline))
	}
	commit := foldCompact(t, a, m, m.Fragments)
	b, err := Open(ctx, st, "t", inlineOpts())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Delete(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	upsertRows(t, b, row{"c", "33", 33}, row{"d", "4", 4})
	if len(b.Cached().Fragments) != 0 {
		t.Fatalf("the delete left %d fragments", len(b.Cached().Fragments))
	}
	if _, err := commit(); err != nil {
		t.Fatal(err)
	}
	want := map[string]row{"b": {"b", "2", 2}, "c": {"c", "33", 33}, "d": {"d", "4", 4}}
	latestRowsAre(t, want, a, b)
	if got := a.Cached(); len(got.Fragments) != 1 || got.Fragments[0].LiveRows() != 1 || len(got.Inline) != 2 {
		t.Errorf("%d fragments, %d inline rows: want the output with b alone live, c and d inline", len(got.Fragments), len(got.Inline))
	}
}

// TestCrashAtEveryRequestOfFoldRewrite: failing each request of a
// folding compaction (read, output, commit; before it is sent and after it
// was applied) leaves the table at its rows, inline or moved, never half:
// a row is never lost or live twice, and a flush afterwards converges.
func TestCrashAtEveryRequestOfFoldRewrite(t *testing.T) {
	ctx := context.Background()
	for _, after := range []bool{false, true} {
		covered := false
		for n := int64(1); !covered; n++ {
			st := newMemStore()
			f := objstore.NewFaulty(st)
			tbl, err := Create(ctx, f, "t", regSchema, "name", Options{Clock: fakeclock.NoSleep(nil), Format: 3})
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]row{}
			for _, r := range []row{{"a", "1", 1}, {"b", "2", 2}} {
				upsertRows(t, tbl, r)
				want[r.Name] = r
			}
			if _, err := tbl.FlushInline(ctx); err != nil {
				t.Fatal(err)
			}
			for _, r := range []row{{"c", "3", 3}, {"a", "11", 11}} {
				upsertRows(t, tbl, r)
				want[r.Name] = r
			}
			m := tbl.Cached()
			f.Reset()
			fault := objstore.FailNth(n, objstore.ErrInjected)
			if after {
				f.SetAfter(fault)
			} else {
				f.SetBefore(fault)
			}
			opErr := func() error {
				rec, inputs, err := tbl.ReadFoldGroup(ctx, m, m.Fragments, m.Inline, GroupReadOptions{})
				if err != nil {
					return err
				}
				defer rec.Release()
				out, err := tbl.WriteRewriteOutput(ctx, m, rec)
				if err != nil {
					return err
				}
				rw := &Rewrite{Groups: []RewriteGroup{{Inputs: inputs, Output: out, Fold: m.Inline}}, ReadVersion: m.Version}
				_, err = tbl.CommitRewrite(ctx, rw, tbl.opts.Clock.Now())
				return err
			}()
			sent := f.Requests()
			f.SetBefore(nil)
			f.SetAfter(nil)
			label := fmt.Sprintf("after=%v n=%d (%v)", after, n, opErr)
			fresh, err := Open(ctx, st, "t", Options{})
			if err != nil {
				t.Fatalf("%s: reopen: %v", label, err)
			}
			if err := sameRows(rowsOf(t, fresh.Snapshot()), want); err != nil || fresh.Cached().Rows() != uint64(len(want)) {
				t.Fatalf("%s: %v (count %d)", label, err, fresh.Cached().Rows())
			}
			if _, err := fresh.FlushInline(ctx); err != nil {
				t.Fatalf("%s: flush: %v", label, err)
			}
			if err := sameRows(rowsOf(t, fresh.Snapshot()), want); err != nil || len(fresh.Cached().Inline) != 0 {
				t.Fatalf("%s: after the flush: %v, %d inline rows", label, err, len(fresh.Cached().Inline))
			}
			covered = sent < n
		}
	}
}
