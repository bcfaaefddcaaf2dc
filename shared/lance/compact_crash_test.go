package lance_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/tablekeep/tablekeep/shared/lance"
	"github.com/tablekeep/tablekeep/shared/lance/lancetest"
	"github.com/tablekeep/tablekeep/shared/objstore"
)

// TestCrashAtEveryRequestOfLanceCompaction fails the Nth request of a
// compaction of a LanceDB dataset, for every N, before it is sent and,
// separately, after it was applied; then reruns the compaction without
// faults. At every crash point LanceDB reads every version exactly as
// before the compaction (the crashed run committed its version or
// nothing), and after the rerun exactly one compaction version exists.
// "drop": a group past DropDeletedAt, its deleted rows dropped. For each
// pinned LanceDB release.
func TestCrashAtEveryRequestOfLanceCompaction(t *testing.T) {
	lancetest.ForEach(t, func(t *testing.T, r lancetest.Release) {
		db := ldb{r}
		mixed, _ := db.mixed(t, 10, "")
		crashEveryRequest(t, db, mixed, lance.CompactOptions{TargetRows: 10000})
		t.Run("drop", func(t *testing.T) {
			dels, _ := db.deletes(t, 6, 4, "")
			crashEveryRequest(t, db, dels, lance.CompactOptions{TargetRows: 10000, DropDeletedAt: 0.3})
		})
	})
}

func crashEveryRequest(t *testing.T, db ldb, base string, opts lance.CompactOptions) {
	ctx := context.Background()
	before := db.dump(t, base)
	latest := before.Versions[len(before.Versions)-1]
	for _, mode := range []struct {
		name string
		set  func(f *objstore.Faulty, fn objstore.FaultFunc)
	}{{"before", (*objstore.Faulty).SetBefore}, {"after", (*objstore.Faulty).SetAfter}} {
		t.Run(mode.name, func(t *testing.T) {
			total := 0
			for n := int64(1); ; n++ {
				dir := t.TempDir()
				copyDir(t, base, dir)
				disk, _ := objstore.NewDisk(dir)
				faulty := objstore.NewFaulty(disk)
				mode.set(faulty, objstore.FailNth(n, nil))
				rep, ferr := lance.Open(faulty, "t.lance").Compact(ctx, opts)
				reached := faulty.Requests() >= n
				label := fmt.Sprintf("%s fault at request %d (err %v)", mode.name, n, ferr)
				if !reached {
					if ferr != nil || rep.Version != latest+1 || (opts.DropDeletedAt > 0 && rep.Groups[0].DroppedRows == 0) {
						t.Fatalf("%s: the run without a fault: %+v", label, rep)
					}
					total = int(n - 1)
					break
				}
				mid := db.dump(t, dir)
				var added []uint64
				if len(mid.Versions) > len(before.Versions) {
					added = []uint64{latest + 1}
				}
				checkCompacted(t, before, mid, added...)
				rep2, err := lance.Open(disk, "t.lance").Compact(ctx, opts)
				if err != nil {
					t.Fatalf("%s: rerun: %v", label, err)
				}
				if (rep2.Version != 0) == (len(added) > 0) {
					t.Fatalf("%s: rerun committed %d after the crashed run committed %v", label, rep2.Version, added)
				}
				checkCompacted(t, before, db.dump(t, dir), latest+1)
			}
			if total < 10 {
				t.Fatalf("only %d requests in a compaction", total)
			}
			t.Logf("%s: failed each of the %d requests of a compaction", mode.name, total)
		})
	}
}
