package table

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tablekeep/tablekeep/shared/dataset"
	"github.com/tablekeep/tablekeep/shared/internal/fakeclock"
	"github.com/tablekeep/tablekeep/shared/objstore"
)

// noteField is the column the schema-evolution tests add to regSchema.
var noteField = arrow.Field{Name: "note", Type: arrow.BinaryTypes.String, Nullable: true}

var evolvedSchema = arrow.NewSchema(append(regSchema.Fields(), noteField), nil)

// noteRow is a row of evolvedSchema; Note nil is null.
type noteRow struct {
	row
	Note *string
}

func strp(s string) *string { return &s }

func noteBatch(rows ...noteRow) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, evolvedSchema)
	defer b.Release()
	for _, r := range rows {
		b.Field(0).(*array.StringBuilder).Append(r.Name)
		b.Field(1).(*array.StringBuilder).Append(r.URI)
		b.Field(2).(*array.TimestampBuilder).Append(arrow.Timestamp(r.At))
		if r.Note == nil {
			b.Field(3).AppendNull()
		} else {
			b.Field(3).(*array.StringBuilder).Append(*r.Note)
		}
	}
	return b.NewRecordBatch()
}

// notesOf reads every live row's note ("<null>" for null) by name, and
// checks the snapshot's batches have its schema.
func notesOf(t *testing.T, s *Snapshot) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := s.Scan(context.Background(), ScanOptions{}, func(rec arrow.RecordBatch) error {
		if !schemasEqual(rec.Schema(), s.Schema()) {
			t.Fatalf("v%d: batch schema %s, snapshot %s", s.Version(), rec.Schema(), s.Schema())
		}
		notes := rec.Column(3).(*array.String)
		for i := range int(rec.NumRows()) {
			n := "<null>"
			if notes.IsValid(i) {
				n = notes.Value(i)
			}
			out[rec.Column(0).(*array.String).Value(i)] = n
		}
		return nil
	})
	if err != nil {
		t.Fatalf("scan v%d: %v", s.Version(), err)
	}
	return out
}

func sameNotes(t *testing.T, got, want map[string]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("notes %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("notes %v, want %v", got, want)
		}
	}
}

// TestAddColumns: old fragments read the added column as nulls, new writes
// must use the new schema, an older version keeps its schema, compaction
// rewrites with the full schema, and a stale handle picks the new schema up.
func TestAddColumns(t *testing.T) {
	storeKinds(t, func(t *testing.T, newStore func(*testing.T) objstore.Store) {
		ctx := context.Background()
		st := newStore(t)
		tbl, err := Create(ctx, st, "t", regSchema, "name", Options{Format: 2})
		if err != nil {
			t.Fatal(err)
		}
		stale, err := Open(ctx, st, "t", Options{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tbl.Append(ctx, regBatch(row{"a", "1", 1}, row{"b", "2", 2})); err != nil {
			t.Fatal(err)
		}
		res, err := tbl.AddColumns(ctx, arrow.Field{Name: "note", Type: arrow.BinaryTypes.String, Nullable: true})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Committed || res.Version != 3 || res.RowsAdded != 0 || res.RowsDeleted != 0 {
			t.Fatalf("add columns: %+v", res)
		}
		m := tbl.Cached()
		if m.Op.Kind != dataset.OpAddColumns || !schemasEqual(m.Schema, evolvedSchema) || len(m.Fragments) != 1 {
			t.Fatalf("v3: op %s, schema %s, %d fragments", m.Op.Kind, m.Schema, len(m.Fragments))
		}
		if c, err := tbl.ChangeRecord(ctx, 3); err != nil || len(c.Added) != 0 || len(c.Removed) != 0 || c.Op != dataset.OpAddColumns {
			t.Fatalf("change record of v3: %+v, %v", c, err)
		}
		// The old schema is refused now; the new one is accepted.
		if _, err := tbl.Upsert(ctx, regBatch(row{"c", "3", 3})); !errors.Is(err, ErrSchemaMismatch) {
			t.Fatalf("old-schema upsert: %v, want ErrSchemaMismatch", err)
		}
		if _, err := tbl.Upsert(ctx, noteBatch(noteRow{row{"b", "22", 22}, strp("bee")}, noteRow{row{"c", "3", 3}, nil})); err != nil {
			t.Fatal(err)
		}
		// A handle whose cache predates the change refreshes on a batch that does not fit.
		if _, err := stale.Append(ctx, noteBatch(noteRow{row{"d", "4", 4}, strp("dee")})); err != nil {
			t.Fatalf("stale handle, new-schema append: %v", err)
		}
		want := map[string]string{"a": "<null>", "b": "bee", "c": "<null>", "d": "dee"}
		snap, err := tbl.Latest(ctx)
		if err != nil {
			t.Fatal(err)
		}
		sameNotes(t, notesOf(t, snap), want)
		if got, err := snap.Get(ctx, "a"); err != nil || got.NumCols() != 4 || got.Column(3).IsValid(0) {
			t.Fatalf("get a: %v, %v", got, err)
		}
		if err := snap.Scan(ctx, ScanOptions{Columns: []string{"note", "name"}}, func(rec arrow.RecordBatch) error {
			if rec.NumCols() != 2 || rec.Schema().Field(0).Name != "note" {
				t.Fatalf("projection: %s", rec.Schema())
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		// Version 2 keeps its schema and rows.
		old, err := tbl.Checkout(ctx, 2)
		if err != nil {
			t.Fatal(err)
		}
		if !schemasEqual(old.Schema(), regSchema) {
			t.Fatalf("v2 schema %s", old.Schema())
		}
		if err := sameRows(rowsOf(t, old), map[string]row{"a": {"a", "1", 1}, "b": {"b", "2", 2}}); err != nil {
			t.Fatal(err)
		}
		// Compaction reads old and new fragments and writes the full schema.
		read := tbl.Cached()
		rec, inputs, err := tbl.ReadGroup(ctx, read, read.Fragments)
		if err != nil {
			t.Fatal(err)
		}
		out, err := tbl.WriteRewriteOutput(ctx, read, rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tbl.CommitRewrite(ctx, &Rewrite{Groups: []RewriteGroup{{Inputs: inputs, Output: out}}}, time.Now()); err != nil {
			t.Fatal(err)
		}
		snap, err = tbl.Latest(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(snap.Manifest().Fragments); n != 1 {
			t.Fatalf("%d fragments after compaction", n)
		}
		sameNotes(t, notesOf(t, snap), want)
		if n := parquetColumns(t, st, tbl, snap.Manifest().Fragments[0]); n != 4 {
			t.Fatalf("compacted data file has %d columns, want 4", n)
		}
	})
}

// parquetColumns is the number of columns in a fragment's data file.
func parquetColumns(t *testing.T, st objstore.Store, tbl *Table, f Fragment) int {
	t.Helper()
	b, err := st.Get(context.Background(), tbl.key(f.File.DataKey()))
	if err != nil {
		t.Fatal(err)
	}
	wide := arrow.NewSchema(append(evolvedSchema.Fields(), arrow.Field{Name: "zz", Type: arrow.BinaryTypes.String, Nullable: true}), nil)
	// Count the columns the file holds: decode with exactly k fields succeeds
	// only for k >= the file's count.
	for k := 1; k <= wide.NumFields(); k++ {
		r, err := decodeParquet(context.Background(), "k", b, arrow.NewSchema(wide.Fields()[:k], nil), nil)
		if err == nil {
			r.Release()
			return k
		}
	}
	return -1
}

// TestAddColumnsRefused: bad additions are ErrInvalidSchema and commit nothing.
func TestAddColumnsRefused(t *testing.T) {
	ctx := context.Background()
	st, _ := objstore.NewDisk(t.TempDir())
	tbl, err := Create(ctx, st, "t", regSchema, "name", Options{})
	if err != nil {
		t.Fatal(err)
	}
	for name, fields := range map[string][]arrow.Field{
		"none":         nil,
		"not nullable": {{Name: "x", Type: arrow.BinaryTypes.String}},
		"existing":     {{Name: "uri", Type: arrow.BinaryTypes.String, Nullable: true}},
		"twice":        {{Name: "x", Type: arrow.BinaryTypes.String, Nullable: true}, {Name: "x", Type: arrow.PrimitiveTypes.Int64, Nullable: true}},
		"bad type":     {{Name: "x", Type: arrow.PrimitiveTypes.Float32, Nullable: true}},
		"empty name":   {{Name: "", Type: arrow.BinaryTypes.String, Nullable: true}},
	} {
		if _, err := tbl.AddColumns(ctx, fields...); !errors.Is(err, ErrInvalidSchema) {
			t.Fatalf("%s: %v, want ErrInvalidSchema", name, err)
		}
	}
	if m, err := tbl.Refresh(ctx); err != nil || m.Version != 1 {
		t.Fatalf("latest %v, %v: want version 1 (nothing committed)", m, err)
	}
}

// TestAddColumnsConflicts: AddColumns and a write prepared on the other
// schema rebase over each other (the write's data file is a prefix of the
// new schema); two additions of one name: the later is refused.
func TestAddColumnsConflicts(t *testing.T) {
	ctx := context.Background()
	st, _ := objstore.NewDisk(t.TempDir())
	a, err := Create(ctx, st, "t", regSchema, "name", Options{Clock: fakeclock.NoSleep(nil)})
	if err != nil {
		t.Fatal(err)
	}
	a.Append(ctx, regBatch(row{"a", "1", 1}))
	b, _ := Open(ctx, st, "t", Options{Clock: fakeclock.NoSleep(nil)}) // cache: version 2
	if _, err := a.AddColumns(ctx, noteField); err != nil {
		t.Fatal(err)
	}
	// b prepares an old-schema upsert on version 2 and commits on version 3.
	res, err := b.Upsert(ctx, regBatch(row{"a", "11", 11}, row{"b", "2", 2}))
	if err != nil {
		t.Fatal(err)
	}
	if res.Version != 4 || res.Attempts != 2 || res.RowsDeleted != 1 {
		t.Fatalf("rebased upsert: %+v", res)
	}
	snap, _ := a.Latest(ctx)
	if !schemasEqual(snap.Schema(), evolvedSchema) {
		t.Fatalf("schema after rebase %s", snap.Schema())
	}
	sameNotes(t, notesOf(t, snap), map[string]string{"a": "<null>", "b": "<null>"})

	// The other way round: an AddColumns prepared on a stale version rebases
	// over an upsert; the upsert's rows read the new column as null.
	c, _ := Open(ctx, st, "t", Options{Clock: fakeclock.NoSleep(nil)}) // cache: version 4
	if _, err := a.Upsert(ctx, noteBatch(noteRow{row{"c", "3", 3}, strp("see")})); err != nil {
		t.Fatal(err)
	}
	extra := arrow.Field{Name: "n", Type: arrow.PrimitiveTypes.Int64, Nullable: true}
	res, err = c.AddColumns(ctx, extra)
	if err != nil || res.Version != 6 || res.Attempts != 2 {
		t.Fatalf("rebased add columns: %+v, %v", res, err)
	}
	snap, _ = a.Latest(ctx)
	if snap.Schema().NumFields() != 5 || snap.CountRows() != 3 {
		t.Fatalf("v6: schema %s, %d rows", snap.Schema(), snap.CountRows())
	}
	err = snap.Scan(ctx, ScanOptions{Columns: []string{"name", "note", "n"}}, func(rec arrow.RecordBatch) error {
		for i := range int(rec.NumRows()) {
			if rec.Column(2).IsValid(i) {
				t.Fatalf("row %s: n is not null", rec.Column(0).(*array.String).Value(i))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// Two additions of one name: the one that commits second is refused.
	d, _ := Open(ctx, st, "t", Options{Clock: fakeclock.NoSleep(nil)})
	dup := arrow.Field{Name: "x", Type: arrow.BinaryTypes.String, Nullable: true}
	if _, err := a.AddColumns(ctx, dup); err != nil {
		t.Fatal(err)
	}
	if _, err := d.AddColumns(ctx, dup); !errors.Is(err, ErrInvalidSchema) {
		t.Fatalf("second add of x: %v, want ErrInvalidSchema", err)
	}
	if m, _ := a.Refresh(ctx); m.Version != 7 {
		t.Fatalf("latest %d, want 7", m.Version)
	}
}

// TestDataFilePrefixChecked: a data file whose columns are not a prefix of
// the schema (another name, another type, more columns) is ErrCorruptObject.
func TestDataFilePrefixChecked(t *testing.T) {
	ctx := context.Background()
	st, _ := objstore.NewDisk(t.TempDir())
	tbl, _ := Create(ctx, st, "t", regSchema, "name", Options{Format: 2})
	tbl.Append(ctx, regBatch(row{"a", "1", 1}))
	f := tbl.Cached().Fragments[0]
	for name, s := range map[string]*arrow.Schema{
		"renamed": arrow.NewSchema([]arrow.Field{{Name: "name", Type: arrow.BinaryTypes.String}, {Name: "url", Type: arrow.BinaryTypes.String}}, nil),
		"retyped": arrow.NewSchema([]arrow.Field{{Name: "name", Type: arrow.BinaryTypes.String}, {Name: "uri", Type: arrow.PrimitiveTypes.Int64}}, nil),
		"wider":   arrow.NewSchema(append(evolvedSchema.Fields(), arrow.Field{Name: "zz", Type: arrow.BinaryTypes.String, Nullable: true}), nil),
	} {
		b := array.NewRecordBuilder(memory.DefaultAllocator, s)
		for i, fl := range s.Fields() {
			switch fl.Type.ID() {
			case arrow.STRING:
				b.Field(i).(*array.StringBuilder).Append("a")
			case arrow.INT64:
				b.Field(i).(*array.Int64Builder).Append(1)
			case arrow.TIMESTAMP:
				b.Field(i).(*array.TimestampBuilder).Append(1)
			}
		}
		rec := b.NewRecordBatch()
		body, err := encodeParquet(rec)
		rec.Release()
		b.Release()
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Put(ctx, tbl.key(f.File.DataKey()), body); err != nil {
			t.Fatal(err)
		}
		snap, _ := tbl.Latest(ctx)
		if err := snap.Scan(ctx, ScanOptions{}, func(arrow.RecordBatch) error { return nil }); !errors.Is(err, ErrCorruptObject) {
			t.Fatalf("%s: %v, want ErrCorruptObject", name, err)
		}
	}
}

// TestCrashAtEveryRequestAddColumns: AddColumns failing at any request is
// either committed whole or not at all, and a retry converges.
func TestCrashAtEveryRequestAddColumns(t *testing.T) {
	ctx := context.Background()
	for _, after := range []bool{false, true} {
		for n := int64(1); ; n++ {
			st, _ := objstore.NewDisk(t.TempDir())
			f := objstore.NewFaulty(st)
			tbl, err := Create(ctx, f, "t", regSchema, "name", Options{Clock: fakeclock.NoSleep(nil)})
			if err != nil {
				t.Fatal(err)
			}
			tbl.Append(ctx, regBatch(row{"a", "1", 1}))
			f.Reset()
			fault := objstore.FailNth(n, objstore.ErrInjected)
			if after {
				f.SetAfter(fault)
			} else {
				f.SetBefore(fault)
			}
			_, opErr := tbl.AddColumns(ctx, noteField)
			sent := f.Requests()
			f.SetBefore(nil)
			f.SetAfter(nil)
			fresh, err := Open(ctx, st, "t", Options{})
			if err != nil {
				t.Fatal(err)
			}
			m := fresh.Cached()
			if opErr != nil && m.Version != 2 {
				t.Fatalf("n=%d after=%v: failed (%v) but version %d committed", n, after, opErr, m.Version)
			}
			if opErr != nil {
				if _, err := fresh.AddColumns(ctx, noteField); err != nil {
					t.Fatalf("n=%d: retry: %v", n, err)
				}
			}
			snap, _ := fresh.Latest(ctx)
			if snap.Version() != 3 || !schemasEqual(snap.Schema(), evolvedSchema) {
				t.Fatalf("n=%d after=%v: v%d schema %s", n, after, snap.Version(), snap.Schema())
			}
			sameNotes(t, notesOf(t, snap), map[string]string{"a": "<null>"})
			if sent < n {
				break
			}
		}
	}
}
