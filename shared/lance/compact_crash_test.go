package lance_test

import (
	"context"
	"fmt"
	"slices"
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
// pinned LanceDB release: 0.31 reads the dataset at every 2nd crash
// point, 0.39 at every 4th (the requests are the same; the Go reader
// checks every version's files at the others), to keep make test within
// its budget.
func TestCrashAtEveryRequestOfLanceCompaction(t *testing.T) {
	lancetest.ForEach(t, func(t *testing.T, r lancetest.Release) {
		db, every := releaseDB(r), int64(2)
		if r != lancetest.Default {
			every = 4
		}
		mixed, _ := db.mixed(t, 10, "")
		crashEveryRequest(t, db, every, mixed, lance.CompactOptions{TargetRows: 10000})
		t.Run("drop", func(t *testing.T) {
			dels, _ := db.deletes(t, 6, 4, "")
			crashEveryRequest(t, db, every, dels, lance.CompactOptions{TargetRows: 10000, DropDeletedAt: 0.3})
		})
	})
}

// crashEveryRequest: LanceDB reads the dataset after the crash and after
// the rerun at every crash point n with n%every == 0; at the others the
// Go reader checks that the versions are those before, plus the
// compaction's, and that every file they reference is there.
func crashEveryRequest(t *testing.T, db ldb, every int64, base string, opts lance.CompactOptions) {
	ctx := context.Background()
	before := db.dump(t, base)
	latest := before.Versions[len(before.Versions)-1]
	for _, mode := range faultModes() {
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
				byLance := n%every == 0
				var added []uint64
				if byLance {
					mid := db.dump(t, dir)
					if len(mid.Versions) > len(before.Versions) {
						added = []uint64{latest + 1}
					}
					checkCompacted(t, before, mid, added...)
				} else {
					added = checkVersionsIntact(t, disk, before.Versions, label)
				}
				rep2, err := lance.Open(disk, "t.lance").Compact(ctx, opts)
				if err != nil {
					t.Fatalf("%s: rerun: %v", label, err)
				}
				if (rep2.Version != 0) == (len(added) > 0) {
					t.Fatalf("%s: rerun committed %d after the crashed run committed %v", label, rep2.Version, added)
				}
				if byLance {
					checkCompacted(t, before, db.dump(t, dir), latest+1)
				} else if got := checkVersionsIntact(t, disk, before.Versions, label+", rerun"); !slices.Equal(got, []uint64{latest + 1}) {
					t.Fatalf("%s: versions added %v after the rerun, want [%d]", label, got, latest+1)
				}
			}
			if total < 10 {
				t.Fatalf("only %d requests in a compaction", total)
			}
			t.Logf("%s: failed each of the %d requests of a compaction", mode.name, total)
		})
	}
}

// checkVersionsIntact: the dataset lists the versions before and maybe
// more after them (returned), and every file each references is there
// (checkIntact: what LanceDB needs to open them).
func checkVersionsIntact(t testing.TB, store objstore.Store, before []uint64, label string) []uint64 {
	t.Helper()
	vs := checkIntact(t, store, "t.lance/", label)
	if len(vs) < len(before) || !slices.Equal(vs[:len(before)], before) {
		t.Fatalf("%s: versions %v, want %v and the compaction's", label, vs, before)
	}
	return vs[len(before):]
}
