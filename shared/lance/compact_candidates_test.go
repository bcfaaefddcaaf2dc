package lance_test

import (
	"context"
	"slices"
	"testing"

	"github.com/tablekeep/tablekeep/shared/internal/testkit"
	"github.com/tablekeep/tablekeep/shared/lance"
)

// TestCompactFragmentCandidates is Lance's per-fragment candidacy
// (optimize.rs plan_compaction): a fragment is rewritten when its physical
// rows are below TargetRows (with its neighbours) or when its deleted share
// is strictly above DropDeletedAt (alone if need be), and a rewritten
// fragment's deleted rows are dropped. LanceDB's fixture "bigdel" writes
// fragments 0-3 of 100 rows each (TargetRows 100: none is small) with 11,
// 90, 10 and 0 rows deleted, then fragments 4 and 5 of one row: at 0.1,
// fragments 0 and 1 are rewritten (together: their 99 live rows fit
// TargetRows) without their deleted rows, fragment 2 (exactly 0.1) and 3
// are left, 4 and 5 fold. LanceDB then reads
// every version exactly, no deleted row is back, its optimize() runs (the
// manifest lists fragments by id, as Lance's commit sorts them: the new
// fragment of 0 and 1 comes after 2 and 3) and it accepts writes.
func TestCompactFragmentCandidates(t *testing.T) {
	dir := t.TempDir()
	node(t, nil, "bigdel", dir, "t")
	before := dumpDataset(t, dir)
	vb := verifyDataset(t, dir)
	ctx := context.Background()
	ds := lance.Open(testkit.DiskStoreAt(t, dir), "t.lance")
	opts := lance.CompactOptions{TargetRows: 100, DropDeletedAt: 0.1}
	plan, err := ds.Compact(ctx, lance.CompactOptions{TargetRows: 100, DropDeletedAt: 0.1, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	var got [][]uint64
	for _, g := range plan.Groups {
		got = append(got, g.Fragments)
	}
	if want := [][]uint64{{0, 1}, {4, 5}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("groups %v, want %v (fragments 0 and 1 past the threshold, 2 at it and 3 left, 4 and 5 folded)", got, want)
	}
	rep, err := ds.Compact(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("report: %+v", rep)
	if rep.Committed != 2 || rep.Version != vb.Version+1 || rep.FragmentsAfter != 4 {
		t.Fatalf("committed %d groups at version %d (%d fragments), want 2 at %d (4 fragments)", rep.Committed, rep.Version, rep.FragmentsAfter, vb.Version+1)
	}
	for i, want := range []struct{ rows, dropped uint64 }{{99, 101}, {2, 0}} {
		g := rep.Groups[i]
		f := newFragment(t, ds, g.NewID)
		if g.DroppedRows != want.dropped || g.DropRefused != "" || f.PhysicalRows != want.rows || f.Deletion != nil {
			t.Fatalf("group %v: dropped %d (%q), new fragment %d rows, deletion %+v; want %d rows, %d dropped, no deletion file",
				g.Fragments, g.DroppedRows, g.DropRefused, f.PhysicalRows, f.Deletion, want.rows, want.dropped)
		}
	}
	// Listed by id, as Lance lists them (its optimize() fails otherwise).
	m := latestManifest(t, ds)
	if !slices.IsSortedFunc(m.Fragments, func(a, b lance.Fragment) int { return int(a.ID) - int(b.ID) }) {
		t.Fatalf("fragments out of id order: %+v", m.Fragments)
	}
	if f := newFragment(t, ds, 2); f.Deletion == nil || f.Deletion.NumDeleted != 10 {
		t.Fatalf("fragment 2 (at the threshold) changed: %+v", f)
	}
	after := dumpDataset(t, dir)
	checkCompacted(t, before, after, rep.Version)
	deleted := func(id int64) bool { return id < 11 || (id >= 100 && id < 190) || (id >= 200 && id < 210) }
	latest := after.Rows[itoaU(rep.Version)]
	for _, r := range latest {
		if deleted(r.ID) {
			t.Fatalf("deleted row %d is back", r.ID)
		}
	}
	if va := verifyDataset(t, dir); va.Rows != vb.Rows || va.Rows != len(latest) || va.Rows != 400-111+2 {
		t.Fatalf("LanceDB reads %d rows (%d before, the dump %d), want %d", va.Rows, vb.Rows, len(latest), 400-111+2)
	}
	// A second pass: nothing left past the threshold or small enough.
	if rep2, err := ds.Compact(ctx, opts); err != nil || rep2.Version != 0 {
		t.Fatalf("second pass: %+v, %v", rep2, err)
	}
	var opt struct {
		Latest uint64 `json:"latest"`
	}
	node(t, &opt, "compact", dir, "t")
	verifyDataset(t, dir)
	if w := lancetestWrite(t, dir); w <= opt.Latest {
		t.Fatalf("write after optimize at version %d (optimize at %d)", w, opt.Latest)
	}
	verifyDataset(t, dir)
}
