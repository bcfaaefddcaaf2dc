package embedded

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/table"
)

type skewClock struct{ off time.Duration }

func (c *skewClock) Now() time.Time                                   { return time.Now().Add(c.off) }
func (c *skewClock) Sleep(ctx context.Context, d time.Duration) error { return nil }

func TestLocalMaintenanceEndToEnd(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	clk := &skewClock{}
	w, err := Open(ctx, dir, clk, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	schema := arrow.NewSchema([]arrow.Field{{Name: "name", Type: arrow.BinaryTypes.String}, {Name: "uri", Type: arrow.BinaryTypes.String}}, nil)
	tb, err := table.Create(ctx, w.Store, "tables/reg", schema, "name", table.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Catalog.Register(ctx, "reg", "tables/reg", maintenance.Policy{}); err != nil {
		t.Fatal(err)
	}
	model := map[string]string{}
	for i := 0; i < 300; i++ {
		name := fmt.Sprint("k", i%50)
		if i%5 == 4 {
			tb.Delete(ctx, name)
			delete(model, name)
			continue
		}
		b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		b.Field(0).(*array.StringBuilder).Append(name)
		b.Field(1).(*array.StringBuilder).Append(fmt.Sprint("u", i))
		if _, err := tb.Upsert(ctx, b.NewRecordBatch()); err != nil {
			t.Fatal(err)
		}
		model[name] = fmt.Sprint("u", i)
	}
	st, _ := tb.Stats(ctx)
	t.Logf("before %+v", st)
	clk.off = 2 * time.Hour
	rep, err := w.Maintain(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range rep.Run.Tables {
		t.Logf("%s skipped=%q compacted=%+v prune floor=%d ranges=%d note=%s", tr.Table, tr.Skipped, tr.Compacted.Committed, tr.Prune.Floor, len(tr.Prune.Ranges), tr.StatsNote)
	}
	t.Logf("drain %+v sweeps %+v", rep.Drain, rep.Sweeps)
	st, _ = tb.Stats(ctx)
	t.Logf("after %+v", st)
	snap, _ := tb.Latest(ctx)
	got := map[string]string{}
	snap.Scan(ctx, table.ScanOptions{}, func(r arrow.RecordBatch) error {
		for i := 0; i < int(r.NumRows()); i++ {
			got[r.Column(0).(*array.String).Value(i)] = r.Column(1).(*array.String).Value(i)
		}
		return nil
	})
	if fmt.Sprint(got) != fmt.Sprint(model) {
		t.Fatalf("rows differ: %d vs %d", len(got), len(model))
	}
}
