package lance_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/internal/fakeclock"
	"github.com/tablekeep/tablekeep/shared/lance"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/queue"
	"github.com/tablekeep/tablekeep/shared/table"
)

// killFrom fails request n and every request after it: the process was
// killed at request n (nothing it would have sent later is sent).
func killFrom(n int64) objstore.FaultFunc {
	return func(i int64, op objstore.Op) error {
		if i >= n {
			return fmt.Errorf("%w: killed at request %d, this is request %d (%s %s)", objstore.ErrInjected, n, i, op.Kind, op.Key)
		}
		return nil
	}
}

// orphans returns the data and deletion files and index directories no
// listed version references.
func orphans(t testing.TB, store objstore.Store, root string) []string {
	t.Helper()
	ctx := context.Background()
	ds := lance.Open(store, root)
	vs, err := ds.ListVersions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	refs := map[string]bool{}
	for _, vf := range vs {
		m, err := ds.ReadManifest(ctx, vf)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range m.Keys() {
			refs[k] = true
		}
	}
	var out []string
	for _, dir := range []string{lance.DataDir, lance.DeletionsDir, lance.IndicesDir} {
		err := objstore.ListAll(ctx, store, root+dir, "", func(o objstore.ObjectInfo) error {
			rel := strings.TrimPrefix(o.Key, root)
			if dir == lance.IndicesDir {
				uuid, _, _ := strings.Cut(strings.TrimPrefix(rel, dir), "/")
				rel = dir + uuid + "/"
			}
			if !refs[rel] && !slices.Contains(out, rel) {
				out = append(out, rel)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestKillAtEveryRequestOfLanceCleanup plans and applies one prune of a
// LanceDB dataset (several ranges, with continuations: RangeVersions 3,
// MaxKeysPerRun 5), then kills the cleaners' drain at its Nth object-store
// request, for every N, before the request is sent and, separately, after
// it was applied (every later request fails). After every kill, every
// version listed under _versions/ (below the floor too: LanceDB lists them
// all) still has every file its manifest references; LanceDB itself opens
// and reads every listed version at every 10th kill. Then the next pass,
// at once, with the messages lost (well within ReplanAfter's 6 h),
// finishes every range whose cleanup started: no orphan file is left; and
// once the ranges whose messages were lost before they started are sent
// again (ReplanAfter later) the dataset is exactly what a pass without
// faults leaves.
func TestKillAtEveryRequestOfLanceCleanup(t *testing.T) {
	ctx := context.Background()
	base := t.TempDir()
	c := createDataset(t, base, 14, "")
	keep := c.Versions[len(c.Versions)-6].Version
	var cutoffMs int64
	for i, v := range c.Versions {
		if v.Version == keep {
			cutoffMs = (c.Versions[i-1].TS + v.TS + 1) / 2
		}
	}
	p := maintenance.Policy{Grace: time.Hour, KeepLast: 1, RangeVersions: 3, MaxKeysPerRun: 5, DeleteBatch: 4}
	now := time.UnixMilli(cutoffMs).Add(lance.NewSource(nil, "").Grace(p.Grace))

	refDir := t.TempDir()
	copyDir(t, base, refDir)
	refStore, _ := objstore.NewDisk(refDir)
	if err := prunePass(ctx, refStore, "t.lance/", p, now); err != nil {
		t.Fatal(err)
	}
	// The reference: a pass without faults, then the pass ReplanAfter later.
	later := now.Add(p.WithDefaults().ReplanAfter + time.Second)
	if err := prunePass(ctx, refStore, "t.lance/", p, later); err != nil {
		t.Fatal(err)
	}
	want := lanceFiles(t, filepath.Join(refDir, "t.lance"))
	wantVersions := checkIntact(t, refStore, "t.lance/", "reference")

	for _, mode := range faultModes() {
		t.Run(mode.name, func(t *testing.T) {
			total := 0
			for n := int64(1); ; n++ {
				dir := t.TempDir()
				copyDir(t, base, dir)
				disk, _ := objstore.NewDisk(dir)
				q := queue.NewEmbedded(queue.EmbeddedOptions{MaxReceives: 5})
				src := lance.NewSource(disk, "t.lance/")
				plan, err := maintenance.PlanSourcePrune(ctx, src, "t", p, now)
				if err != nil {
					t.Fatal(err)
				}
				if err := maintenance.ApplySourcePrune(ctx, src, &plan, maintenance.QueueEnqueuer{Q: q}); err != nil {
					t.Fatal(err)
				}
				faulty := objstore.NewFaulty(disk)
				mode.set(faulty, killFrom(n))
				cl := &maintenance.Cleaner{
					Store:   faulty,
					Tables:  resolver{maintenance.TableRef{Name: "t", Root: "t.lance/", Policy: p, Format: "lance"}},
					Requeue: maintenance.QueueEnqueuer{Q: q},
					Sources: openLance,
					// The age rule (issue 29 item 5): at the planner's time.
					OpenOpts: table.Options{Clock: fakeclock.New(now)},
				}
				_, _ = maintenance.DrainLocal(ctx, q, cl, nil)
				reached := faulty.Requests() >= n
				label := fmt.Sprintf("killed %s request %d", mode.name, n)
				checkIntact(t, disk, "t.lance/", label)
				if !reached {
					total = int(n - 1)
					break
				}
				if n%10 == 0 {
					dumpDataset(t, dir) // LanceDB checks out and reads every listed version
				}
				// The next pass, at once: the messages were lost with the
				// process. It finishes every range whose cleanup started:
				// no orphan file is left, nor a change record of a version
				// gone below the floor.
				if err := prunePass(ctx, disk, "t.lance/", p, now); err != nil {
					t.Fatalf("%s: next pass: %v", label, err)
				}
				checkIntact(t, disk, "t.lance/", label+", after the next pass")
				if o := orphans(t, disk, "t.lance/"); len(o) > 0 {
					t.Fatalf("%s: after the next pass, files no listed version references: %v", label, o)
				}
				if src := lance.NewSource(disk, "t.lance/"); src.Prepare(ctx) != nil || len(src.HalfCleaned()) > 0 {
					t.Fatalf("%s: after the next pass, half-cleaned ranges left: %v", label, src.HalfCleaned())
				}
				// A range whose message was lost before its cleanup started
				// is sent again ReplanAfter later: then the dataset is
				// exactly what passes without faults leave.
				if err := prunePass(ctx, disk, "t.lance/", p, later); err != nil {
					t.Fatalf("%s: pass after ReplanAfter: %v", label, err)
				}
				vs := checkIntact(t, disk, "t.lance/", label+", after ReplanAfter")
				if !slices.Equal(vs, wantVersions) {
					t.Fatalf("%s: versions %v after ReplanAfter, want %v", label, vs, wantVersions)
				}
				got := lanceFiles(t, filepath.Join(dir, "t.lance"))
				if d1, d2 := minus(got, want), minus(want, got); len(d1)+len(d2) > 0 {
					t.Fatalf("%s: files left that a clean pass deletes %v; deleted that it keeps %v", label, d1, d2)
				}
			}
			if total < 20 {
				t.Fatalf("only %d requests in the cleanup", total)
			}
			t.Logf("%s: killed at each of the %d requests of the cleanup", mode.name, total)
		})
	}
}
