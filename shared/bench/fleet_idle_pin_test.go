package bench

import (
	"context"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/objstore"
)

// Issue 33 point 4, a small warehouse pays for its shards: one scheduled
// pass over settled idle tables, no notifications (the CLI and embedded
// default), every request of the pass counted (tables, _registry, _stats,
// the fleet index). The index has one shard up to 512 tables, 16 up to
// 8,192, 256 beyond (fleet.TargetShards). Before (256 fixed shards): 5
// tables 19 requests (3.8 a table), 200 tables 148 index GETs alone.
// Pinned, exactly:
//   - 5 tables (embedded, local disk): LIST 9 (7 tables with _registry and
//     _stats, the registry's read, the index), GET 2 (the registry's
//     manifest, the index's one shard): 2.2 a table;
//   - 200 tables: LIST 204, GET 3 (1.035 a table);
//   - 2,000 tables (in memory; 16 shards): 1 LIST per table, and on the
//     shared objects LIST 4 and GET 18 (the index's LIST and 16 GETs):
//     1.011 a table. At 10,000 (256 shards, as before) the same counts
//     with 256 index GETs: 1.026 a table (the bench's fleet section).
func TestFleetIdleRequestsBySize(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		n    int
		want objstore.Counts
	}{{5, objstore.Counts{List: 9, Get: 2}}, {200, objstore.Counts{List: 204, Get: 3}}} {
		e, err := embeddedIdle(ctx, t.TempDir(), tc.n)
		if err != nil {
			t.Fatal(err)
		}
		got := objstore.Counts{Get: int64(e.PerTable[0]*float64(tc.n) + 0.5), List: int64(e.PerTable[3]*float64(tc.n) + 0.5)}
		other := e.PerTable[1] + e.PerTable[2] + e.PerTable[4]
		if got != tc.want || other != 0 {
			t.Fatalf("%d idle tables: %v (HEAD/PUT/DELETE %.3f a table), want %v", tc.n, got, other, tc.want)
		}
		t.Logf("%d idle tables: %.3f requests a table a pass", tc.n, float64(got.Get+got.List)/float64(tc.n))
	}
	if testing.Short() {
		return
	}
	const n = 2000
	w, err := newFleetWorld(ctx, n, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		w.clock.Advance(15 * time.Minute)
		if _, err := w.pass(ctx); err != nil {
			t.Fatal(err)
		}
	}
	w.clock.Advance(15 * time.Minute)
	before := w.cs.counts()
	if _, err := w.pass(ctx); err != nil {
		t.Fatal(err)
	}
	after := w.cs.counts()
	idle := after[classIdle].Sub(before[classIdle])
	shared := after[classShared].Sub(before[classShared])
	if idle != (objstore.Counts{List: n}) {
		t.Fatalf("%d idle tables: %v, want 1 LIST each", n, idle)
	}
	// The catalog's reads (LIST 1, GET 2), _registry and _stats listed, and
	// the index: 1 LIST and a GET per shard (16 at 2,000 tables).
	if want := (objstore.Counts{List: 4, Get: 2 + 16}); shared != want {
		t.Fatalf("%d idle tables, shared objects: %v, want %v", n, shared, want)
	}
	t.Logf("%d idle tables: %.4f requests a table a pass", n, float64(idle.List+shared.List+shared.Get)/n)
}
