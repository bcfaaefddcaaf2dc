package embedded

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tablekeep/tablekeep/shared/internal/fakeclock"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/table"
)

// TestOneFailingTableDoesNotStopOthers: table "a" is broken (its floor
// object is corrupt), so its maintenance and sweep fail; table "b" is
// still compacted, pruned and swept, and the error is reported for "a".
func TestOneFailingTableDoesNotStopOthers(t *testing.T) {
	ctx := context.Background()
	clk := fakeclock.New(time.Now())
	w, err := Open(ctx, t.TempDir(), clk, nil, func(s objstore.Store) objstore.Store { return fakeclock.NewStore(s, clk) })
	if err != nil {
		t.Fatal(err)
	}
	schema := arrow.NewSchema([]arrow.Field{{Name: "name", Type: arrow.BinaryTypes.String}, {Name: "v", Type: arrow.BinaryTypes.String}}, nil)
	for _, name := range []string{"a", "b"} {
		tb, err := table.Create(ctx, w.Store, "tables/"+name, schema, "name", table.Options{Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
			b.Field(0).(*array.StringBuilder).Append("k")
			b.Field(1).(*array.StringBuilder).Append(string(rune('0' + i)))
			rec := b.NewRecordBatch()
			if _, err := tb.Upsert(ctx, rec); err != nil {
				t.Fatal(err)
			}
			rec.Release()
			b.Release()
		}
		if err := w.Catalog.Register(ctx, name, "tables/"+name, maintenance.Policy{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Store.Put(ctx, "tables/a/_refs/floor.json", []byte("{not json")); err != nil {
		t.Fatal(err)
	}
	orphan := "tables/b/" + table.DataPrefix + "00000000000000ff.parquet"
	if err := w.Store.Put(ctx, orphan, []byte("x")); err != nil {
		t.Fatal(err)
	}
	clk.Advance(3 * time.Hour)
	rep, err := w.Maintain(ctx, Options{})
	if !errors.Is(err, ErrTablesFailed) {
		t.Fatalf("maintain: %v, want ErrTablesFailed", err)
	}
	t.Logf("maintain: %v", err)
	if _, ok := rep.Errors["a"]; !ok || len(rep.Errors) != 1 {
		t.Fatalf("errors by table: %v", rep.Errors)
	}
	if sb, ok := rep.Sweeps["b"]; !ok || sb.Deleted == 0 {
		t.Fatalf("table b not swept: %+v", rep.Sweeps)
	}
	if _, err := w.Store.Head(ctx, orphan); !errors.Is(err, objstore.ErrNotExist) {
		t.Fatalf("b's orphan kept: %v", err)
	}
	for _, tr := range rep.Run.Tables {
		if tr.Table == "b" && tr.Prune.Floor == 0 {
			t.Fatalf("table b not pruned: %+v", tr.Prune)
		}
	}
}
