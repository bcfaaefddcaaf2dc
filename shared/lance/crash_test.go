package lance_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/internal/fakeclock"
	"github.com/tablekeep/tablekeep/shared/lance"
	"github.com/tablekeep/tablekeep/shared/lance/lancetest"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/queue"
	"github.com/tablekeep/tablekeep/shared/table"
)

// prunePass is one maintenance pass over a Lance dataset through the
// pipeline: plan and apply (as under the table's lock), then drain. It
// returns the first error; the queue redelivers failed messages.
func prunePass(ctx context.Context, store objstore.Store, root string, p maintenance.Policy, now time.Time) error {
	src := lance.NewSource(store, root)
	plan, err := maintenance.PlanSourcePrune(ctx, src, "t", p, now)
	if err != nil {
		return err
	}
	q := queue.NewEmbedded(queue.EmbeddedOptions{MaxReceives: 5})
	if err := maintenance.ApplySourcePrune(ctx, src, &plan, maintenance.QueueEnqueuer{Q: q}); err != nil {
		return err
	}
	c := &maintenance.Cleaner{
		Store:    store,
		Tables:   resolver{maintenance.TableRef{Name: "t", Root: root, Policy: p, Format: "lance"}},
		Requeue:  maintenance.QueueEnqueuer{Q: q},
		Sources:  openLance,
		OpenOpts: table.Options{Clock: fakeclock.New(now)},
	}
	st, err := maintenance.DrainLocal(ctx, q, c, nil)
	if err == nil && (st.Failed > 0 || st.DeadLettered > 0) {
		err = fmt.Errorf("drain: %+v", st)
	}
	return err
}

// checkIntact reads every manifest listed under _versions/ (below the
// floor too: LanceDB lists and opens every one) with the Go reader and
// checks that each file it references exists: what LanceDB needs to open
// it ("no version a reader can list is left unreadable"). It returns every
// stored version.
func checkIntact(t testing.TB, store objstore.Store, root, label string) []uint64 {
	t.Helper()
	ctx := context.Background()
	ds := lance.Open(store, root)
	vs, err := ds.ListVersions(ctx)
	if err != nil {
		t.Fatalf("%s: %v", label, err)
	}
	var out []uint64
	for _, vf := range vs {
		out = append(out, vf.Version)
		m, err := ds.ReadManifest(ctx, vf)
		if err != nil {
			t.Fatalf("%s: %v", label, err)
		}
		for _, k := range m.Keys() {
			if k[len(k)-1] == '/' {
				p, err := store.List(ctx, objstore.ListOptions{Prefix: ds.Root() + k, MaxKeys: 1})
				if err != nil || len(p.Objects) == 0 {
					t.Fatalf("%s: listed version %d references index %s, which is gone (%v)", label, vf.Version, k, err)
				}
				continue
			}
			if _, err := store.Head(ctx, ds.Root()+k); err != nil {
				t.Fatalf("%s: listed version %d references %s: %v", label, vf.Version, k, err)
			}
		}
	}
	return out
}

// faultMode injects a fault before a request is sent or after it was
// applied.
type faultMode struct {
	name string
	set  func(f *objstore.Faulty, fn objstore.FaultFunc)
}

// faultModes are the crash suites' two modes: before and after.
func faultModes() []faultMode {
	return []faultMode{{"before", (*objstore.Faulty).SetBefore}, {"after", (*objstore.Faulty).SetAfter}}
}

// TestCrashAtEveryRequestOfLancePrune fails the Nth object-store request of
// a whole prune pass over a LanceDB dataset (manifest diffing, floor,
// enqueue, prune state, cleaners), for every N, before the request is sent
// and, separately, after it was applied; then reruns the pass without
// faults. After every crash point every stored version still has all its
// files, and after the rerun the dataset is exactly what a pass without
// faults leaves. LanceDB itself opens every retained version and reads its
// rows at every 20th crash point and at the last one. For each pinned
// LanceDB release.
func TestCrashAtEveryRequestOfLancePrune(t *testing.T) {
	lancetest.ForEach(t, func(t *testing.T, r lancetest.Release) { crashEveryPruneRequest(t, releaseDB(r)) })
}

func crashEveryPruneRequest(t *testing.T, db ldb) {
	ctx := context.Background()
	base := t.TempDir()
	c := db.create(t, base, 14, "")
	before := db.dump(t, base)
	keep := c.Versions[len(c.Versions)-6].Version
	var cutoffMs int64
	for i, v := range c.Versions {
		if v.Version == keep {
			cutoffMs = (c.Versions[i-1].TS + v.TS + 1) / 2
		}
	}
	// ReplanAfter is short so that the rerun, 2 ms later, re-sends the
	// ranges whose messages the crash lost (the queue is the pass's own):
	// in production the next pass after ReplanAfter does.
	p := maintenance.Policy{Grace: time.Hour, KeepLast: 1, RangeVersions: 3, MaxKeysPerRun: 5, DeleteBatch: 4, ReplanAfter: time.Millisecond}
	now := time.UnixMilli(cutoffMs).Add(lance.NewSource(nil, "").Grace(p.Grace))

	// The reference: a pass without faults.
	refDir := t.TempDir()
	copyDir(t, base, refDir)
	refStore, _ := objstore.NewDisk(refDir)
	if err := prunePass(ctx, refStore, "t.lance/", p, now); err != nil {
		t.Fatal(err)
	}
	want := lanceFiles(t, filepath.Join(refDir, "t.lance"))
	wantVersions := checkIntact(t, refStore, "t.lance/", "reference")
	if len(wantVersions) >= len(c.Versions) {
		t.Fatalf("reference pass pruned nothing: %v", wantVersions)
	}

	for _, mode := range faultModes() {
		t.Run(mode.name, func(t *testing.T) {
			total := 0
			for n := int64(1); ; n++ {
				dir := t.TempDir()
				copyDir(t, base, dir)
				disk, _ := objstore.NewDisk(dir)
				faulty := objstore.NewFaulty(disk)
				mode.set(faulty, objstore.FailNth(n, nil))
				ferr := prunePass(ctx, faulty, "t.lance/", p, now)
				reached := faulty.Requests() >= n
				faulty.Reset()
				label := fmt.Sprintf("%s fault at request %d (err %v)", mode.name, n, ferr)
				checkIntact(t, disk, "t.lance/", label+", before the rerun")
				if !reached {
					total = int(n - 1)
					break
				}
				if err := prunePass(ctx, disk, "t.lance/", p, now.Add(2*time.Millisecond)); err != nil {
					t.Fatalf("%s: rerun: %v", label, err)
				}
				vs := checkIntact(t, disk, "t.lance/", label)
				if !slices.Equal(vs, wantVersions) {
					t.Fatalf("%s: versions %v after the rerun, want %v", label, vs, wantVersions)
				}
				got := lanceFiles(t, filepath.Join(dir, "t.lance"))
				if d1, d2 := minus(got, want), minus(want, got); len(d1)+len(d2) > 0 {
					t.Fatalf("%s: files left that a clean pass deletes %v; deleted that it keeps %v", label, d1, d2)
				}
				if n%20 == 0 {
					checkRowsInLanceDB(t, db, dir, before, label)
				}
			}
			if total < 50 {
				t.Fatalf("only %d requests in a prune pass", total)
			}
			t.Logf("%s: failed each of the %d requests of a prune pass", mode.name, total)
		})
	}
	checkRowsInLanceDB(t, db, refDir, before, "reference")
}

// checkRowsInLanceDB has LanceDB open every stored version of the dataset
// and compares its rows with what it read before the prune.
func checkRowsInLanceDB(t testing.TB, db ldb, dir string, before dumped, label string) {
	t.Helper()
	after := db.dump(t, dir)
	for _, v := range after.Versions {
		k := strconv.FormatUint(v, 10)
		if !slices.Equal(after.Rows[k], before.Rows[k]) {
			t.Fatalf("%s: LanceDB reads %d rows at version %d, %d before the prune", label, len(after.Rows[k]), v, len(before.Rows[k]))
		}
	}
}
