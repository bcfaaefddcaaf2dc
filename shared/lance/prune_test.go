package lance_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/internal/fakeclock"
	"github.com/tablekeep/tablekeep/shared/lance"
	"github.com/tablekeep/tablekeep/shared/lance/lancetest"
	"github.com/tablekeep/tablekeep/shared/lock"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/queue"
	"github.com/tablekeep/tablekeep/shared/table"
)

// resolver answers for one registered Lance dataset.
type resolver struct{ ref maintenance.TableRef }

func (r resolver) Resolve(_ context.Context, name string) (maintenance.TableRef, error) {
	if name != r.ref.Name {
		return maintenance.TableRef{}, maintenance.ErrUnknownTable
	}
	return r.ref, nil
}

func openLance(_ context.Context, store objstore.Store, ref maintenance.TableRef) (maintenance.Source, error) {
	return lance.NewSource(store, ref.Root), nil
}

// lanceFiles lists every file of the dataset LanceDB manages (what its
// cleanup may delete): data, deletions, indices, transactions, manifests.
func lanceFiles(t testing.TB, dsDir string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	err := filepath.WalkDir(dsDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dsDir, p)
		rel = filepath.ToSlash(rel)
		for _, pre := range []string{lance.DataDir, lance.DeletionsDir, lance.IndicesDir, lance.TransactionsDir, lance.VersionsDir} {
			if strings.HasPrefix(rel, pre) {
				out[rel] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func minus(a, b map[string]bool) []string {
	var out []string
	for k := range a {
		if !b[k] {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// copyDir copies a dataset directory, keeping the modification times:
// LanceDB's cleanup only considers files older than the earliest retained
// manifest.
func copyDir(t testing.TB, src, dst string) {
	t.Helper()
	if err := lancetest.CopyTree(src, dst); err != nil {
		t.Fatal(err)
	}
}

// pruneLance runs tablekeep's pipeline on the dataset: plan and apply under
// (what would be) the table's lock, then drain the queue with the cleaner.
func pruneLance(t testing.TB, store objstore.Store, root string, p maintenance.Policy, now time.Time) (maintenance.PrunePlan, queue.DrainStats) {
	t.Helper()
	ctx := context.Background()
	src := lance.NewSource(store, root)
	q := queue.NewEmbedded(queue.EmbeddedOptions{})
	clock := fakeclock.New(now)
	ref := maintenance.TableRef{Name: "t", Root: root, Policy: p, Format: "lance"}
	r := &maintenance.Runner{Locker: lock.NewInProcess(clock), Clock: clock, Queue: maintenance.QueueEnqueuer{Q: q}, Owner: "test"}
	plan, err := r.PruneSource(ctx, ref, src)
	if err != nil {
		t.Fatal(err)
	}
	if plan.Token == 0 {
		t.Fatal("prune applied without a lease token")
	}
	c := &maintenance.Cleaner{
		Store:   store,
		Tables:  resolver{maintenance.TableRef{Name: "t", Root: root, Policy: p, Format: "lance"}},
		Requeue: maintenance.QueueEnqueuer{Q: q},
		Sources: openLance,
		// The cleaner runs once every file, as the store dated it (on S3:
		// when the test uploaded it, after the versions' own times), is
		// past the age rule (the file grace).
		OpenOpts: table.Options{Clock: fakeclock.New(time.Now().Add(src.Grace(p.Grace) + time.Second))},
	}
	st, err := maintenance.DrainLocal(ctx, q, c, nil)
	if err != nil || st.Failed > 0 || st.DeadLettered > 0 {
		t.Fatalf("drain: %+v %v", st, err)
	}
	return plan, st
}

// TestPruneLanceDBDataset is the verification against Lance itself: LanceDB
// creates a dataset with the seed's churn (delete+add, mergeInsert), a
// scalar index re-built by optimize, tags and deletions; tablekeep prunes it
// through its pipeline with a cut-off between two versions; LanceDB then
// opens EVERY retained version and reads exactly the rows it had before,
// tagged versions included, and the latest still accepts writes. The files
// tablekeep deleted are exactly those LanceDB's own optimize({cleanupOlderThan})
// deletes on a copy of the dataset with the same cut-off. For each pinned
// LanceDB release.
func TestPruneLanceDBDataset(t *testing.T) {
	lancetest.ForEach(t, func(t *testing.T, r lancetest.Release) {
		for _, scheme := range []string{"v2", "v1"} {
			t.Run(scheme, func(t *testing.T) { testPruneLanceDB(t, releaseDB(r), scheme) })
		}
	})
}

func testPruneLanceDB(t *testing.T, db ldb, scheme string) {
	ctx := context.Background()
	dir := t.TempDir()
	c := db.create(t, dir, 30, scheme)
	before := db.dump(t, dir)
	if len(before.Versions) != len(c.Versions) {
		t.Fatalf("LanceDB lists %d versions after create, %d before dump", len(c.Versions), len(before.Versions))
	}
	// Copies for the comparison with LanceDB's own cleanup: LanceDB's
	// optimize refuses to clean while a tagged version is older than the
	// cut-off (error_if_tagged_old_versions, which its JS API does not
	// expose), so the tags are dropped from both copies.
	tkCopy, lanceCopy := t.TempDir(), t.TempDir()
	copyDir(t, dir, tkCopy)
	copyDir(t, dir, lanceCopy)
	for _, d := range []string{tkCopy, lanceCopy} {
		if err := os.RemoveAll(filepath.Join(d, "t.lance", "_refs")); err != nil {
			t.Fatal(err)
		}
	}
	dsDir := filepath.Join(dir, "t.lance")
	filesBefore := lanceFiles(t, dsDir)

	// The cut-off: between the timestamps of versions keep-1 and keep.
	keep := c.Versions[len(c.Versions)-8].Version
	var cutoffMs int64
	for i, v := range c.Versions {
		if v.Version == keep {
			cutoffMs = (c.Versions[i-1].TS + v.TS + 1) / 2
		}
	}
	var taggedBelow []uint64
	for _, v := range c.Tags {
		if v < keep {
			taggedBelow = append(taggedBelow, v)
		}
	}
	if len(taggedBelow) == 0 {
		t.Fatalf("fixture: no tag below the cut-off (tags %v, keep %d)", c.Tags, keep)
	}

	store, err := objstore.NewDisk(dir)
	if err != nil {
		t.Fatal(err)
	}
	p := maintenance.Policy{Grace: time.Hour, KeepLast: 1, RangeVersions: 4}
	src := lance.NewSource(store, "t.lance")
	now := time.UnixMilli(cutoffMs).Add(src.Grace(p.Grace))
	plan, st := pruneLance(t, store, "t.lance/", p, now)
	if plan.Floor != keep {
		t.Fatalf("floor %d, want %d (the first version at or after the cut-off)", plan.Floor, keep)
	}
	if len(plan.Ranges) < 2 || st.Succeeded < len(plan.Ranges) {
		t.Fatalf("want several ranges drained: plan %d ranges, drain %+v", len(plan.Ranges), st)
	}

	// Every retained version opens in LanceDB with exactly its rows.
	after := db.dump(t, dir)
	lancetest.CheckRetained(t, before, after, func(v uint64) bool { return v >= keep || slices.Contains(taggedBelow, v) })
	if len(after.Tags) != len(c.Tags) {
		t.Fatalf("tags after %v, before %v", after.Tags, c.Tags)
	}
	deletedByTablekeep := minus(filesBefore, lanceFiles(t, dsDir))
	if len(deletedByTablekeep) == 0 {
		t.Fatal("tablekeep deleted nothing")
	}

	// LanceDB's own cleanup of a copy, tablekeep's of another, same cut-off.
	tkStore, err := objstore.NewDisk(tkCopy)
	if err != nil {
		t.Fatal(err)
	}
	tkPlan, _ := pruneLance(t, tkStore, "t.lance/", p, now)
	deletedByTablekeep = minus(filesBefore, lanceFiles(t, filepath.Join(tkCopy, "t.lance")))
	var opt struct {
		Prune struct {
			OldVersionsRemoved int `json:"oldVersionsRemoved"`
		} `json:"prune"`
	}
	db.node(t, &opt, "optimize", lanceCopy, "t", strconv.FormatInt(cutoffMs, 10))
	copyDs := filepath.Join(lanceCopy, "t.lance")
	deletedByLance := minus(filesBefore, lanceFiles(t, copyDs))
	if !slices.Equal(deletedByTablekeep, deletedByLance) {
		t.Errorf("deleted sets differ:\n only tablekeep: %v\n only LanceDB:   %v",
			minus(set(deletedByTablekeep), set(deletedByLance)), minus(set(deletedByLance), set(deletedByTablekeep)))
	}
	if opt.Prune.OldVersionsRemoved != tkPlan.Prunable {
		t.Errorf("LanceDB removed %d versions, tablekeep %d", opt.Prune.OldVersionsRemoved, tkPlan.Prunable)
	}
	t.Logf("%s: %d versions, floor %d, %d ranges; tablekeep and LanceDB each deleted %d files", scheme, len(c.Versions), keep, len(plan.Ranges), len(deletedByLance))

	// The latest version still accepts writes, and the new version reads.
	var w struct {
		Latest uint64 `json:"latest"`
	}
	db.node(t, &w, "write", dir, "t")
	if w.Latest <= c.Latest {
		t.Fatalf("write after prune: latest %d, was %d", w.Latest, c.Latest)
	}
	final := db.dump(t, dir)
	if final.Versions[len(final.Versions)-1] != w.Latest {
		t.Fatalf("versions after write: %v", final.Versions)
	}

	// A second pass finds nothing more to do and reads no manifest twice:
	// only the versions written since are diffed.
	src2 := lance.NewSource(store, "t.lance")
	plan2, err := maintenance.PlanSourcePrune(ctx, src2, "t", p, now)
	if err != nil {
		t.Fatal(err)
	}
	if want := int(w.Latest - c.Latest); src2.ManifestsRead != want {
		t.Fatalf("second pass read %d manifests, want %d (the new versions only)", src2.ManifestsRead, want)
	}
	if len(plan2.Ranges) != 0 {
		t.Fatalf("second pass enqueues %v", plan2.Ranges)
	}
}

func set(keys []string) map[string]bool {
	out := map[string]bool{}
	for _, k := range keys {
		out[k] = true
	}
	return out
}
