package fleet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/objstore"
)

// Issue 33 point 4: the shard count follows the fleet, with hysteresis.
func TestFleetTargetShardsHysteresis(t *testing.T) {
	for _, tc := range []struct{ tables, cur, want int }{
		{0, 0, 1}, {5, 0, 1}, {512, 0, 1}, {513, 0, 16}, {8192, 0, 16}, {8193, 0, 256}, {100_000, 0, 256},
		{5, 256, 1}, {200, 256, 1}, {256, 256, 1}, {257, 256, 16}, {4096, 256, 16}, {4097, 256, 256}, {10_000, 256, 256},
		{512, 1, 1}, {513, 1, 16}, {300, 16, 16}, {257, 16, 16}, {256, 16, 1}, {9000, 16, 256}, {8192, 16, 16},
	} {
		if got := TargetShards(tc.tables, tc.cur); got != tc.want {
			t.Errorf("TargetShards(%d tables, %d shards) = %d, want %d", tc.tables, tc.cur, got, tc.want)
		}
	}
}

func marksOf(n int, now time.Time) map[string]Mark {
	out := map[string]Mark{}
	for i := range n {
		out[fmt.Sprintf("t%06d", i)] = typicalMark(i, now)
	}
	return out
}

// legacyIndex writes marks as an earlier release did: generation 0, 256
// shards.
func legacyIndex(t *testing.T, store objstore.Store, marks map[string]Mark, now time.Time) {
	t.Helper()
	by := map[int]map[string]Mark{}
	for n, m := range marks {
		sh := ShardOf(n, Shards)
		if by[sh] == nil {
			by[sh] = map[string]Mark{}
		}
		by[sh][n] = m
	}
	for sh, u := range by {
		if _, err := WriteShard(context.Background(), store, "wh/", Legacy256, sh, nil, u, nil, now); err != nil {
			t.Fatal(err)
		}
	}
}

// indexKeys is every key under wh/_fleet/index/.
func indexKeys(t *testing.T, store objstore.Store) []string {
	t.Helper()
	var out []string
	if err := objstore.ListAll(context.Background(), store, "wh/"+IndexDir, "", func(o objstore.ObjectInfo) error {
		out = append(out, o.Key)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// The upgrade from the fixed 256 shards of earlier releases: a warehouse
// of 5 tables keeps its marks, the scheduled pass's reshard moves them into
// one shard of generation 1 and deletes generation 0; a read is then one
// LIST and one GET.
func TestFleetReshardUpgradeFrom256(t *testing.T) {
	ctx := context.Background()
	disk, _ := objstore.NewDisk(t.TempDir())
	cnt := objstore.NewCounting(disk)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	marks := marksOf(5, now)
	legacyIndex(t, disk, marks, now)
	idx, err := Read(ctx, cnt, "wh/")
	if err != nil || idx.Layout != Legacy256 || len(idx.Tables) != 5 {
		t.Fatalf("earlier release's index: %+v, %d marks, %v", idx.Layout, len(idx.Tables), err)
	}
	before := cnt.Counts()
	if _, err := Reshard(ctx, cnt, "wh/", idx, nil, nil, TargetShards(5, idx.Layout.N), now); err != nil {
		t.Fatal(err)
	}
	// One PUT (the one shard) and the seal; one LIST and one DELETE of generation 0.
	if c := cnt.Counts().Sub(before); c != (objstore.Counts{Put: 2, List: 1, DeleteRequests: 1, DeleteKeys: 5}) {
		t.Fatalf("reshard 256 -> 1 of 5 tables: %v", c)
	}
	before = cnt.Counts()
	idx, err = Read(ctx, cnt, "wh/")
	if err != nil || idx.Layout != (Layout{Gen: 1, N: 1}) || len(idx.Tables) != 5 {
		t.Fatalf("after the reshard: %+v, %d marks, %v", idx.Layout, len(idx.Tables), err)
	}
	if c := cnt.Counts().Sub(before); c != (objstore.Counts{List: 1, Get: 1}) {
		t.Fatalf("read of 5 tables in one shard: %v, want LIST 1, GET 1", c)
	}
	keys := indexKeys(t, disk)
	want := []string{"wh/_fleet/index/g00000000000000000001-1/00/18446744073709551614.json", "wh/_fleet/index/g00000000000000000001-1/sealed.json"}
	if strings.Join(keys, " ") != strings.Join(want, " ") {
		t.Fatalf("keys after the reshard: %q, want %q", keys, want)
	}
}

// A reshard interrupted at any request (the request not sent, or sent and
// its answer lost) leaves a readable index holding every table's mark
// exactly once (the old layout's or the new one's, never a mix, never
// none), and the next reshard completes and leaves only the new layout.
func TestFleetReshardCrashAtEveryRequest(t *testing.T) {
	// The upgrade (256 shards of generation 0 -> 1, 40 tables) and a
	// growth (1 -> 16, 600 tables).
	t.Run("256to1", func(t *testing.T) { reshardCrashes(t, 40, true) })
	t.Run("1to16", func(t *testing.T) { reshardCrashes(t, 600, false) })
}

func reshardCrashes(t *testing.T, n int, fromLegacy bool) {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	marks := marksOf(n, now)
	seed := t.TempDir()
	{
		disk, _ := objstore.NewDisk(seed)
		if fromLegacy {
			legacyIndex(t, disk, marks, now)
		} else if _, err := Reshard(ctx, disk, "wh/", NewIndex(), marks, nil, 1, now); err != nil {
			t.Fatal(err)
		}
	}
	from, _ := Read(ctx, mustDisk(t, seed), "wh/")
	want := TargetShards(n, from.Layout.N)
	for _, after := range []bool{false, true} {
		for k := int64(1); ; k++ {
			dir := t.TempDir()
			if err := os.CopyFS(dir, os.DirFS(seed)); err != nil {
				t.Fatal(err)
			}
			disk, _ := objstore.NewDisk(dir)
			updated := typicalMark(7, now.Add(time.Hour))
			fs := objstore.NewFaulty(disk)
			base, err := Read(ctx, fs, "wh/")
			if err != nil {
				t.Fatal(err)
			}
			start := fs.Requests()
			var crashed atomic.Bool
			hook := func(i int64, op objstore.Op) error {
				if i-start >= k {
					crashed.Store(true)
					return objstore.ErrInjected
				}
				return nil
			}
			if after {
				fs.SetAfter(hook)
			} else {
				fs.SetBefore(hook)
			}
			_, rerr := Reshard(ctx, fs, "wh/", base, map[string]Mark{"t000007": updated}, nil, want, now)
			idx, err := Read(ctx, disk, "wh/")
			if err != nil || len(idx.Damaged) > 0 || len(idx.Tables) != n {
				t.Fatalf("after=%v, crash at request %d: %d marks, damaged %v, %v (reshard: %v)", after, k, len(idx.Tables), idx.Damaged, err, rerr)
			}
			resharded := idx.Layout != from.Layout
			for name, m := range idx.Tables {
				want := marks[name]
				if name == "t000007" && resharded {
					want = updated
				}
				if !m.Checked.Equal(want.Checked) || m.Root != want.Root {
					t.Fatalf("after=%v, crash at request %d: %s's mark %v, want %v (layout %+v)", after, k, name, m.Checked, want.Checked, idx.Layout)
				}
			}
			// Recovery: the next pass reshards (or finds it done) and cleans.
			if idx.Layout.N != TargetShards(n, idx.Layout.N) {
				if _, err := Reshard(ctx, disk, "wh/", idx, nil, nil, TargetShards(n, idx.Layout.N), now); err != nil {
					t.Fatalf("after=%v, crash at %d: recovery: %v", after, k, err)
				}
			} else if err := DeleteStale(ctx, disk, idx); err != nil {
				t.Fatal(err)
			}
			idx, err = Read(ctx, disk, "wh/")
			if err != nil || idx.Layout.N != want || len(idx.Tables) != n || len(idx.Stale()) != 0 {
				t.Fatalf("after=%v, crash at %d: recovered %+v, %d marks, stale %d, %v", after, k, idx.Layout, len(idx.Tables), len(idx.Stale()), err)
			}
			for _, key := range indexKeys(t, disk) {
				if !strings.HasPrefix(key, idx.Layout.Prefix("wh/")) {
					if l, _, _, _, ok := ParseIndexKey("wh/", key); ok && less(l, idx.Layout) {
						t.Fatalf("after=%v, crash at %d: %s left after recovery", after, k, key)
					}
				}
			}
			if !crashed.Load() {
				t.Logf("after=%v: a reshard of %d tables %d -> %d shards takes %d requests; interrupted at each", after, n, from.Layout.N, want, k-1)
				break
			}
		}
	}
}

// A reader that listed the old layout and finds it deleted by a reshard
// completed meanwhile reads again: every table once, from the new layout.
func TestFleetReadDuringReshard(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	disk, _ := objstore.NewDisk(t.TempDir())
	marks := marksOf(40, now)
	legacyIndex(t, disk, marks, now)
	base, err := Read(ctx, disk, "wh/")
	if err != nil {
		t.Fatal(err)
	}
	fs := objstore.NewFaulty(disk)
	var once atomic.Bool
	fs.SetBefore(func(_ int64, op objstore.Op) error {
		if op.Kind == objstore.KindGet && once.CompareAndSwap(false, true) {
			if _, err := Reshard(ctx, disk, "wh/", base, nil, nil, 1, now); err != nil {
				return err
			}
		}
		return nil
	})
	idx, err := Read(ctx, fs, "wh/")
	if err != nil || idx.Layout != (Layout{Gen: 1, N: 1}) || len(idx.Tables) != 40 {
		t.Fatalf("read across a reshard: %+v, %d marks, %v", idx.Layout, len(idx.Tables), err)
	}
	// A writer of the old layout whose shard was emptied records nothing
	// there (its tables are maintained again): no key of the old layout.
	sh := ShardOf("t000000", Shards)
	if _, err := WriteShard(ctx, disk, "wh/", Legacy256, sh, base.Shard(sh), map[string]Mark{}, nil, now); !errors.Is(err, errResharded) {
		t.Fatalf("write into a replaced layout: %v, want errResharded", err)
	}
}

func mustDisk(t *testing.T, dir string) objstore.Store {
	t.Helper()
	d, err := objstore.NewDisk(dir)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
