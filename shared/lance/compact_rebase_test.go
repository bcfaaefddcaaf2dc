package lance_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/tablekeep/tablekeep/shared/lance"
	"github.com/tablekeep/tablekeep/shared/objstore"
)

// TestCompactRebase: LanceDB commits one operation after the compaction
// planned and wrote its files, right before its conditional put. An append
// commutes (the Rewrite lands on top of it, the new row kept); a delete or
// an upsert (mergeInsert: an Update) of rows in the group is remapped onto
// the new fragment (Lance itself would fail the compaction): the Rewrite
// lands on top, the deleted row stays deleted, the upserted row is there
// once; a restore or an overwrite drops every group (nothing committed),
// and so does
// LanceDB's own optimize() compacting the same fragments first (its
// Rewrite wins; nothing breaks).
func TestCompactRebase(t *testing.T) {
	ctx := context.Background()
	base, _ := mixedDataset(t, 12)
	before := dumpDataset(t, base)
	latest := before.Versions[len(before.Versions)-1]
	rows := before.Rows[strconv.FormatUint(latest, 10)]
	var ids []int64
	for _, r := range rows {
		if r.ID >= 10 { // written by one-row commits: in the group
			ids = append(ids, r.ID)
		}
	}
	victim, upserted := ids[0], ids[len(ids)-1]
	for _, tc := range []struct {
		op, arg    string
		committed  int
		wantIDs    func(ids []int64) bool
		secondPass bool
	}{
		{"add", "777", 1, func(ids []int64) bool { return slices.Contains(ids, 777) }, false},
		{"delete", strconv.FormatInt(victim, 10), 1, func(ids []int64) bool { return !slices.Contains(ids, victim) }, false},
		{"upsert", strconv.FormatInt(upserted, 10), 1, func(ids []int64) bool { return slices.Contains(ids, upserted) }, false},
		{"restore", strconv.FormatUint(latest-3, 10), 0, nil, false},
		// An Overwrite (the table replaced by one row) is not clobbered:
		// nothing is committed, the latest is LanceDB's one row.
		{"overwrite", "888", 0, func(ids []int64) bool { return slices.Equal(ids, []int64{888}) }, false},
		// LanceDB's own optimize() compacts the same fragments first (and
		// re-indexes: more than one version): tablekeep's group is dropped.
		{"optimize", "", 0, nil, false},
	} {
		t.Run(tc.op, func(t *testing.T) {
			dir := t.TempDir()
			copyDir(t, base, dir)
			disk, _ := objstore.NewDisk(dir)
			faulty := objstore.NewFaulty(disk)
			var once sync.Once
			faulty.SetBefore(func(_ int64, op objstore.Op) error {
				if op.Kind == objstore.KindPut && strings.Contains(op.Key, lance.VersionsDir) {
					once.Do(func() { node(t, nil, "op", dir, "t", tc.op, tc.arg) })
				}
				return nil
			})
			rep, err := lance.Open(faulty, "t.lance").Compact(ctx, lance.CompactOptions{TargetRows: 10000})
			if err != nil && !errors.Is(err, lance.ErrConflict) {
				t.Fatal(err)
			}
			t.Logf("%s: %+v", tc.op, rep.Groups)
			if rep.Committed != tc.committed || (tc.committed == 0 && rep.Version != 0) {
				t.Fatalf("committed %d groups (version %d), want %d", rep.Committed, rep.Version, tc.committed)
			}
			if tc.committed > 0 && rep.Version != latest+2 {
				t.Fatalf("committed version %d, want %d (on top of LanceDB's)", rep.Version, latest+2)
			}
			if (tc.op == "delete" || tc.op == "upsert") && !rep.Groups[0].Remapped {
				t.Fatalf("the %s's deletions were not remapped: %+v", tc.op, rep.Groups[0])
			}
			if tc.committed == 0 && !strings.HasPrefix(rep.Groups[0].Outcome, "conflict") {
				t.Fatalf("outcome %q", rep.Groups[0].Outcome)
			}
			after := dumpDataset(t, dir)
			// Every version before LanceDB's commit reads as before.
			for _, v := range before.Versions {
				k := strconv.FormatUint(v, 10)
				if !slices.Equal(after.Rows[k], before.Rows[k]) {
					t.Fatalf("version %d changed", v)
				}
			}
			theirs := after.Rows[strconv.FormatUint(latest+1, 10)]
			if tc.op == "optimize" {
				theirs = before.Rows[strconv.FormatUint(latest, 10)]
			}
			last := after.Rows[strconv.FormatUint(after.Versions[len(after.Versions)-1], 10)]
			if !slices.Equal(last, theirs) {
				t.Fatalf("the latest reads %v, LanceDB's commit %v", last, theirs)
			}
			if tc.wantIDs != nil {
				var ids []int64
				for _, r := range last {
					ids = append(ids, r.ID)
				}
				if !tc.wantIDs(ids) {
					t.Fatalf("latest ids %v", ids)
				}
			}
			if tc.committed > 0 {
				verifyDataset(t, dir)
			}
			if tc.secondPass {
				rep, err := lance.Open(disk, "t.lance").Compact(ctx, lance.CompactOptions{TargetRows: 10000})
				if err != nil || rep.Committed != 1 {
					t.Fatalf("next pass: %+v %v", rep, err)
				}
				again := dumpDataset(t, dir)
				if got := again.Rows[strconv.FormatUint(rep.Version, 10)]; !slices.Equal(got, theirs) {
					t.Fatalf("after the next pass the latest reads %v, want %v", got, theirs)
				}
				verifyDataset(t, dir)
			}
		})
	}
}
