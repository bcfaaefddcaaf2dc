package lance_test

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/tablekeep/tablekeep/shared/lance"
	"github.com/tablekeep/tablekeep/shared/objstore"
)

// vverified is what the fixture's vverify reports of the latest version.
type vverified struct {
	Rows      int      `json:"rows"`
	Bad       []any    `json:"bad"`
	NBad      int      `json:"nbad"`
	Fragments int      `json:"fragments"`
	Indices   []string `json:"indices"`
	Indexed   int      `json:"indexed"`
	Unindexed int      `json:"unindexed"`
	Version   uint64   `json:"version"`
}

func vverifyDataset(t testing.TB, dir string) vverified {
	t.Helper()
	var v vverified
	nodeEnv(t, []string{"LANCE_INCLUDE_VECTOR_CENTROIDS=false"}, &v, "vverify", dir, "t", "5")
	if v.NBad > 0 {
		t.Fatalf("LanceDB's vector search disagrees with a brute force over its scan for %d rows: %v", v.NBad, v.Bad)
	}
	return v
}

// TestCompactVectorIndex: LanceDB builds 300 rows with a
// FixedSizeList<Float32>[8] column and an IVF_PQ index on it, then 20
// one-row adds. tablekeep's compaction leaves the indexed fragment alone
// (the index's fragment bitmap still names it) and folds the 20 unindexed
// one-row fragments into one; LanceDB then still lists the index, counts
// the same indexed and unindexed rows, and every row's vector search (all
// partitions, exact re-rank) returns that row first and the same top 5 ids
// as a brute force over the full scan. Should the splicer ever refuse the
// vector column, the group's refusal is typed and the dataset unchanged.
func TestCompactVectorIndex(t *testing.T) {
	dir := t.TempDir()
	node(t, nil, "vector", dir, "t", "300", "20")
	store, err := objstore.NewDisk(dir)
	if err != nil {
		t.Fatal(err)
	}
	vb := vverifyDataset(t, dir)
	if len(vb.Indices) != 1 || !strings.Contains(vb.Indices[0], "IvfPq") || vb.Indexed != 300 || vb.Unindexed != 20 || vb.Fragments != 21 {
		t.Fatalf("fixture: %+v", vb)
	}
	ctx := context.Background()
	ds := lance.Open(store, "t.lance")
	rep, err := ds.Compact(ctx, lance.CompactOptions{TargetRows: 10000})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("report: %+v", rep)
	for _, g := range rep.Groups {
		t.Logf("group %v: %d pages in, %d out, unmerged %v", g.Fragments, g.PagesIn, g.Pages, g.Unmerged)
	}
	va := vverifyDataset(t, dir)
	if rep.Refused > 0 { // the documented fallback: typed refusal, nothing changed
		// Compact reports a refusal only for a typed error (lancefile's
		// ErrUnsupported, ErrMismatch, ErrCorrupt); anything else fails it.
		if rep.Version != 0 || va.Version != vb.Version || va.Fragments != vb.Fragments {
			t.Fatalf("refused, yet the dataset changed: %+v -> %+v", vb, va)
		}
		t.Fatalf("the splicer refused the vector column: %+v (docs/lance.md says it folds it)", rep.Groups)
	}
	if rep.Committed != 1 || rep.Version != vb.Version+1 || rep.Skipped["covered by an index"] != 1 {
		t.Fatalf("committed %d groups at version %d (want 1 at %d), skipped %v", rep.Committed, rep.Version, vb.Version+1, rep.Skipped)
	}
	if va.Version != rep.Version || va.Fragments != 2 || va.Fragments != rep.FragmentsAfter || va.Rows != 320 {
		t.Fatalf("after: %+v (report: %d fragments)", va, rep.FragmentsAfter)
	}
	if !slices.Equal(va.Indices, vb.Indices) || va.Indexed != 300 || va.Unindexed != 20 {
		t.Fatalf("index after the compaction: %+v, before %+v", va, vb)
	}
	// LanceDB's own optimize (which extends the index over the new
	// fragment) still runs, and the searches still agree.
	node(t, nil, "compact", dir, "t")
	if v := vverifyDataset(t, dir); v.Rows != 320 || v.Unindexed != 0 {
		t.Fatalf("after LanceDB's optimize: %+v", v)
	}
}

// TestCompactConvergesOnKeptDeletions is issue 30 point 1: LanceDB writes
// two fragments of 100 rows with a FixedSizeList<Float32>[8] column (no
// index) and deletes every tenth row. lanceenc cannot filter the vector
// column, so the first compaction folds the two fragments into one and
// keeps the deleted rows (its deleted share, 10%, is past a threshold of
// 5%), saying why. The second finds that fragment alone past the threshold
// and its rows still unfilterable: its output would equal its input, so it
// commits nothing (no new version, no new data file) and reports the reason.
// LanceDB reads the same rows throughout.
func TestCompactConvergesOnKeptDeletions(t *testing.T) {
	dir := t.TempDir()
	node(t, nil, "vecdel", dir, "t", "100", "2")
	store, err := objstore.NewDisk(dir)
	if err != nil {
		t.Fatal(err)
	}
	vb := vverifyDataset(t, dir)
	if vb.Rows != 180 || vb.Fragments != 2 {
		t.Fatalf("fixture: %+v", vb)
	}
	ctx := context.Background()
	ds := lance.Open(store, "t.lance")
	opts := lance.CompactOptions{TargetRows: 10000, DropDeletedAt: 0.05}
	rep, err := ds.Compact(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Committed != 1 || rep.Version != vb.Version+1 || rep.FragmentsAfter != 1 {
		t.Fatalf("first pass: %+v", rep)
	}
	if g := rep.Groups[0]; g.DroppedRows != 0 || !strings.Contains(g.DropRefused, "cannot be dropped") || !strings.Contains(g.String(), "deleted rows kept: ") {
		t.Fatalf("first pass: group %s", g)
	}
	files := func() int {
		n := 0
		es, err := os.ReadDir(filepath.Join(dir, "t.lance", "data"))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			if strings.HasSuffix(e.Name(), ".lance") {
				n++
			}
		}
		return n
	}
	nfiles := files()
	// The second pass's requests, pinned: the branches LIST, the latest
	// manifest's LIST and GET, the fragment's data and deletion file GETs;
	// no PUT.
	faulty := objstore.NewFaulty(store)
	var mu sync.Mutex
	ops := map[objstore.Kind]int{}
	faulty.SetBefore(func(_ int64, op objstore.Op) error {
		mu.Lock()
		defer mu.Unlock()
		ops[op.Kind]++
		return nil
	})
	rep2, err := lance.Open(faulty, "t.lance").Compact(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("second pass: %+v, requests %v", rep2, ops)
	// Before the fix: 3 GETs, 3 LISTs (the rebase's probe) and 4 PUTs (data
	// file, deletion file, transaction file, manifest).
	if !maps.Equal(ops, map[objstore.Kind]int{objstore.KindGet: 3, objstore.KindList: 2}) {
		t.Errorf("second pass requests %v, want 3 GETs (manifest, data file, deletion file) and 2 LISTs (branches, latest manifest)", ops)
	}
	if rep2.Committed != 0 || rep2.Version != 0 || rep2.Unchanged != 1 || len(rep2.Groups) != 1 {
		t.Fatalf("second pass committed %d groups at version %d (unchanged %d): %v", rep2.Committed, rep2.Version, rep2.Unchanged, rep2.Groups)
	}
	if g := rep2.Groups[0]; !strings.Contains(g.String(), "deleted rows kept: ") || g.Outcome != lance.OutcomeUnchanged {
		t.Fatalf("second pass: group %s", g)
	}
	if n := files(); n != nfiles || rep2.BytesWritten != 0 {
		t.Fatalf("second pass wrote %d bytes, data files %d -> %d", rep2.BytesWritten, nfiles, n)
	}
	if va := vverifyDataset(t, dir); va.Version != rep.Version || va.Rows != 180 || va.Fragments != 1 {
		t.Fatalf("after: %+v", va)
	}
}
