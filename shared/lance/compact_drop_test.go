package lance_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/tablekeep/tablekeep/shared/internal/testkit"
	"github.com/tablekeep/tablekeep/shared/lance"
	"github.com/tablekeep/tablekeep/shared/objstore"
)

// deletesDataset has LanceDB write 10 indexed rows, then adds of per rows
// each, then delete half of every added fragment's rows (ids >= 10 with
// id % 4 in {1, 2}) in two commits.
func deletesDataset(t testing.TB, adds, per int, version string) (dir string, store objstore.Store) {
	t.Helper()
	return lanceDB().deletes(t, adds, per, version)
}

// newFragment is the latest version's fragment of that id.
func newFragment(t testing.TB, ds *lance.Dataset, id uint64) lance.Fragment {
	t.Helper()
	m := latestManifest(t, ds)
	for _, f := range m.Fragments {
		if f.ID == id {
			return f
		}
	}
	t.Fatalf("no fragment %d in version %d", id, m.Version)
	return lance.Fragment{}
}

// TestCompactDropsDeletedRows: with DropDeletedAt > 0 a group is written
// without its deleted rows (every column's pages filtered), whatever its
// deleted share, as Lance's rewrite writes only live rows: the new
// fragment's physical rows are the live rows, it has no deletion file, and
// LanceDB reads every version exactly, its index queries agreeing with its
// scan. At 0 the rows and the deletion vector are carried.
func TestCompactDropsDeletedRows(t *testing.T) {
	for _, v := range []string{"2.1", "2.2", "2.0"} {
		t.Run(v, func(t *testing.T) {
			base, _ := deletesDataset(t, 12, 4, v)
			for _, tc := range []struct {
				at   float64
				drop bool
			}{{0.3, true}, {0.5, true}, {0.6, true}, {0, false}} {
				dir := t.TempDir()
				copyDir(t, base, dir)
				before := dumpDataset(t, dir)
				vb := verifyDataset(t, dir)
				ds := lance.Open(testkit.DiskStoreAt(t, dir), "t.lance")
				rep, err := ds.Compact(context.Background(), lance.CompactOptions{TargetRows: 10000, DropDeletedAt: tc.at})
				if err != nil {
					t.Fatal(err)
				}
				if rep.Committed != 1 || rep.Version != vb.Version+1 {
					t.Fatalf("at %g: %+v", tc.at, rep)
				}
				g := rep.Groups[0]
				if g.Rows != 48 || g.Deleted != 24 || g.DropRefused != "" {
					t.Fatalf("at %g: group %+v", tc.at, g)
				}
				f := newFragment(t, ds, g.NewID)
				if tc.drop {
					if g.DroppedRows != 24 || f.PhysicalRows != 24 || f.Deletion != nil {
						t.Fatalf("at %g: dropped %d, new fragment %+v, want 24 physical rows and no deletion file", tc.at, g.DroppedRows, f)
					}
				} else if g.DroppedRows != 0 || f.PhysicalRows != 48 || f.Deletion == nil || f.Deletion.NumDeleted != 24 {
					t.Fatalf("at %g: dropped %d, new fragment %+v %+v, want the rows carried", tc.at, g.DroppedRows, f, f.Deletion)
				}
				checkCompacted(t, before, dumpDataset(t, dir), rep.Version)
				if va := verifyDataset(t, dir); va.Rows != vb.Rows {
					t.Fatalf("at %g: LanceDB reads %d rows, %d before", tc.at, va.Rows, vb.Rows)
				}
			}
		})
	}
}

// TestCompactDropRebase: LanceDB deletes rows of a group whose deleted rows
// were dropped, between the compaction's plan and its conditional put. Its
// deletion vectors name offsets of the old fragments (including the rows
// already dropped): they are remapped through the kept rows' new offsets,
// so the deleted rows stay deleted, every other row stays, and a row
// dropped already is not deleted again (nor is its new neighbour). The
// second case deletes every live row of a fragment (LanceDB removes the
// fragment whole).
func TestCompactDropRebase(t *testing.T) {
	ctx := context.Background()
	// Fragment k holds ids 10+4k .. 13+4k; 10+4k and 13+4k are deleted.
	base, _ := deletesDataset(t, 12, 4, "")
	before := dumpDataset(t, base)
	latest := before.Versions[len(before.Versions)-1]
	for _, tc := range []struct {
		pred string
		gone []int64
	}{
		{"16", []int64{16}},
		{"id = 19 OR id = 20", []int64{19, 20}},
		{"id = 11 OR id = 56", []int64{11, 56}},
	} {
		t.Run(tc.pred, func(t *testing.T) {
			dir := t.TempDir()
			copyDir(t, base, dir)
			disk, _ := objstore.NewDisk(dir)
			faulty := objstore.NewFaulty(disk)
			var once sync.Once
			faulty.SetBefore(func(_ int64, op objstore.Op) error {
				if op.Kind == objstore.KindPut && strings.Contains(op.Key, lance.VersionsDir) {
					once.Do(func() { node(t, nil, "op", dir, "t", "delete", tc.pred) })
				}
				return nil
			})
			rep, err := lance.Open(faulty, "t.lance").Compact(ctx, lance.CompactOptions{TargetRows: 10000, DropDeletedAt: 0.3})
			if err != nil {
				t.Fatal(err)
			}
			g := rep.Groups[0]
			if rep.Committed != 1 || rep.Version != latest+2 || !g.Remapped || g.DroppedRows != 24 {
				t.Fatalf("%+v", rep)
			}
			after := dumpDataset(t, dir)
			for _, v := range before.Versions {
				k := strconv.FormatUint(v, 10)
				if !slices.Equal(after.Rows[k], before.Rows[k]) {
					t.Fatalf("version %d changed", v)
				}
			}
			theirs := after.Rows[strconv.FormatUint(latest+1, 10)]
			last := after.Rows[strconv.FormatUint(rep.Version, 10)]
			if !slices.Equal(last, theirs) {
				t.Fatalf("the latest reads %v, LanceDB's delete %v", last, theirs)
			}
			want := 0
			for _, r := range before.Rows[strconv.FormatUint(latest, 10)] {
				if !slices.Contains(tc.gone, r.ID) {
					want++
				}
			}
			for _, r := range last {
				if slices.Contains(tc.gone, r.ID) {
					t.Fatalf("deleted row %d is back", r.ID)
				}
			}
			if len(last) != want {
				t.Fatalf("the latest holds %d rows, want %d", len(last), want)
			}
			f := newFragment(t, lance.Open(disk, "t.lance"), g.NewID)
			if f.PhysicalRows != 24 || f.Deletion == nil || f.Deletion.NumDeleted != uint64(len(tc.gone)) {
				t.Fatalf("new fragment %+v %+v: want 24 rows, %d deleted", f, f.Deletion, len(tc.gone))
			}
			verifyDataset(t, dir)
		})
	}
}

// TestCompactDropFallback: a group past the threshold with a page lanceenc
// cannot filter (a bulk add's bit-packed or FSST page) keeps its rows and
// carries the remapped deletion vector, as without the threshold, and says
// why; LanceDB reads every version exactly.
func TestCompactDropFallback(t *testing.T) {
	dir, store := deletesDataset(t, 2, 4000, "")
	before := dumpDataset(t, dir)
	vb := verifyDataset(t, dir)
	ds := lance.Open(store, "t.lance")
	rep, err := ds.Compact(context.Background(), lance.CompactOptions{TargetRows: 10000, DropDeletedAt: 0.3})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Committed != 1 {
		t.Fatalf("%+v", rep)
	}
	g := rep.Groups[0]
	t.Logf("group: %+v", g)
	f := newFragment(t, ds, g.NewID)
	if g.DroppedRows != 0 || !strings.Contains(g.DropRefused, "cannot be dropped") || f.PhysicalRows != 8000 || f.Deletion == nil || f.Deletion.NumDeleted != 4000 {
		t.Fatalf("group %+v, new fragment %+v %+v: want the rows and the deletion vector carried", g, f, f.Deletion)
	}
	checkCompacted(t, before, dumpDataset(t, dir), rep.Version)
	if va := verifyDataset(t, dir); va.Rows != vb.Rows {
		t.Fatalf("LanceDB reads %d rows, %d before", va.Rows, vb.Rows)
	}
}
