package embedded

import (
	"context"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/table"
)

// TestMaintainSweepsOnlyTablesInNeed: once settled, a pass sweeps only the
// tables it maintained (here the one written past its threshold); an idle
// table is not swept (the scan's one LIST is all it costs); Everything
// sweeps every table.
func TestMaintainSweepsOnlyTablesInNeed(t *testing.T) {
	ctx := context.Background()
	clk := &skewClock{}
	w, err := Open(ctx, t.TempDir(), clk, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	schema := arrow.NewSchema([]arrow.Field{{Name: "name", Type: arrow.BinaryTypes.String}}, nil)
	write := func(tb *table.Table, name string) {
		b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		b.Field(0).(*array.StringBuilder).Append(name)
		rec := b.NewRecordBatch()
		defer rec.Release()
		if _, err := tb.Upsert(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	tables := map[string]*table.Table{}
	for _, n := range []string{"busy", "idle"} {
		tb, err := table.Create(ctx, w.Store, "tables/"+n, schema, "name", table.Options{})
		if err != nil {
			t.Fatal(err)
		}
		write(tb, "a")
		if err := w.Catalog.Register(ctx, n, "tables/"+n, maintenance.Policy{}); err != nil {
			t.Fatal(err)
		}
		tables[n] = tb
	}
	clk.off = 2 * time.Hour
	for range 3 { // settle: maintained, marked, stats written
		if _, err := w.Maintain(ctx, Options{}); err != nil {
			t.Fatal(err)
		}
	}
	// busy changes past its compaction threshold; idle does not change.
	for i := range maintenance.DefaultPolicy().CompactMinFragments + 1 {
		write(tables["busy"], string(rune('b'+i)))
	}
	rep, err := w.Maintain(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := rep.Sweeps["busy"]; !ok {
		t.Errorf("the table in need was not swept: %v", rep.Sweeps)
	}
	if _, ok := rep.Sweeps["idle"]; ok {
		t.Errorf("an idle table was swept: %v", rep.Sweeps)
	}
	rep, err = w.Maintain(ctx, Options{Everything: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"busy", "idle", "_registry", "_stats"} {
		if _, ok := rep.Sweeps[n]; !ok {
			t.Errorf("Everything: %s not swept (%v)", n, rep.Sweeps)
		}
	}
}
