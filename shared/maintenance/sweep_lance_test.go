package maintenance_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/formats"
	"github.com/tablekeep/tablekeep/shared/internal/fakeclock"
	"github.com/tablekeep/tablekeep/shared/lance"
	"github.com/tablekeep/tablekeep/shared/lance/lancetest"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/queue"
	"github.com/tablekeep/tablekeep/shared/table"
)

// lanceSweepFixture is a LanceDB dataset (churn, deletions, a re-built
// btree index, two tags) whose files are all 30 days old, with its floor
// raised above most versions but no range drained (so versions below the
// floor still reference their files), and orphans added: old ones (past
// the sweep's cut-off of 7 days: Lance's unverified threshold, above the
// policy's 1 h grace) and young ones.
type lanceSweepFixture struct {
	dir, wh string // dir holds wh/ds.lance
	before  lancetest.Dumped
	old     []string // full keys the sweep must delete
	young   []string // orphans it must keep (too young)
	foreign []string // names it must never touch, however old
	// lanceOnly: old objects Lance's own cleanup deletes and the sweep
	// does not (docs/lance.md): a _versions/.tmp leftover, the old object
	// of an index directory that also holds a young one, and a blob
	// sidecar (data/{key}/*.blob) whose data file no manifest references.
	lanceOnly []string
	ref       maintenance.TableRef
}

const sweepRoot = "wh/ds.lance/"

func newLanceSweepFixture(t *testing.T) *lanceSweepFixture {
	t.Helper()
	ctx := context.Background()
	f := &lanceSweepFixture{dir: t.TempDir()}
	f.wh = filepath.Join(f.dir, "wh")
	lancetest.Create(t, f.wh, "ds", 14, "")
	f.before = lancetest.Dump(t, f.wh, "ds")
	p := maintenance.Policy{Grace: time.Hour, KeepLast: 3, RangeVersions: 4}
	f.ref = maintenance.TableRef{Name: "ds", Root: sweepRoot, Policy: p, Format: formats.Lance}
	store, err := objstore.NewDisk(f.dir)
	if err != nil {
		t.Fatal(err)
	}
	// The floor rises (the ranges are enqueued on a queue nobody drains).
	src := lance.NewSource(store, sweepRoot)
	plan, err := maintenance.PlanSourcePrune(ctx, src, "ds", p, time.Now().Add(2*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	q := queue.NewEmbedded(queue.EmbeddedOptions{})
	if err := maintenance.ApplySourcePrune(ctx, src, &plan, maintenance.QueueEnqueuer{Q: q}); err != nil || plan.Floor < 5 {
		t.Fatalf("apply: floor %d: %v", plan.Floor, err)
	}
	now := time.Now()
	ds := filepath.Join(f.wh, "ds.lance")
	// Everything LanceDB and the planner wrote is 30 days old.
	err = filepath.WalkDir(ds, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		return os.Chtimes(p, now.Add(-30*24*time.Hour), now.Add(-30*24*time.Hour))
	})
	if err != nil {
		t.Fatal(err)
	}
	// Orphans copied from real files of each kind.
	first := func(sub, suffix string) []byte {
		es, err := os.ReadDir(filepath.Join(ds, sub))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			if !e.IsDir() && strings.HasSuffix(e.Name(), suffix) {
				b, err := os.ReadFile(filepath.Join(ds, sub, e.Name()))
				if err != nil {
					t.Fatal(err)
				}
				return b
			}
		}
		t.Fatalf("no %s file under %s", suffix, sub)
		return nil
	}
	data, del, txn := first("data", ".lance"), first("_deletions", ".arrow"), first("_transactions", ".txn")
	add := func(rel string, b []byte, age time.Duration, into *[]string) {
		p := filepath.Join(ds, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, now.Add(-age), now.Add(-age)); err != nil {
			t.Fatal(err)
		}
		if into != nil {
			*into = append(*into, sweepRoot+rel)
		}
	}
	const day = 24 * time.Hour
	oldIdx, mixedIdx, youngIdx := "11111111-2222-4333-8444-555555555555", "21111111-2222-4333-8444-555555555555", "31111111-2222-4333-8444-555555555555"
	add("data/0a0a0a0a-old-orphan.lance", data, 8*day, &f.old)
	add("data/0b0b0b0b-young-orphan.lance", data, 3*day, &f.young)
	add("data/0c0c0c0c-fresh-orphan.lance", data, 0, &f.young)
	add("_deletions/999-3-4242.arrow", del, 9*day, &f.old)
	add("_deletions/998-3-4243.arrow", del, 6*day, &f.young)
	add("_indices/"+oldIdx+"/page_data.lance", data, 10*day, &f.old)
	add("_indices/"+oldIdx+"/page_lookup.lance", data, 8*day, &f.old)
	add("_indices/"+mixedIdx+"/page_data.lance", data, 10*day, &f.lanceOnly)
	add("_indices/"+mixedIdx+"/page_lookup.lance", data, time.Hour, &f.young)
	add("_indices/"+youngIdx+"/page_data.lance", data, 2*day, &f.young)
	add("_transactions/3-0a0a0a0a-orphan.txn", txn, 8*day, &f.old)
	add("_transactions/4-0b0b0b0b-orphan.txn", txn, 5*time.Minute, &f.young)
	add("_versions/.tmp_orphan.manifest", data, 10*day, &f.lanceOnly)
	add("data/notes.txt", []byte("not Lance's"), 30*day, &f.foreign)
	add("data/0d0d0d0d/00000001.blob", data, 30*day, &f.lanceOnly) // a blob sidecar of an unreferenced data file
	add("_refs/notes.json", []byte("{}"), 30*day, &f.foreign)
	add("elsewhere/0e0e0e0e.lance", data, 30*day, &f.foreign)
	slices.Sort(f.old)
	return f
}

func (f *lanceSweepFixture) store(t testing.TB) objstore.Store {
	st, err := objstore.NewDisk(f.dir)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// copyTree copies dir to a new temporary directory, keeping the files'
// modification times (the sweep's and Lance's cut-offs read them).
func copyTree(t testing.TB, dir string) string {
	t.Helper()
	dst := t.TempDir()
	copyDir(t, dir, dst)
	return dst
}

// gone lists the keys of a that b lacks.
func gone(a, b map[string]int64) []string {
	var out []string
	for k := range a {
		if _, ok := b[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// checkLanceReads has LanceDB check out every version and compares the rows.
func checkLanceReads(t testing.TB, wh string, before lancetest.Dumped, label string) {
	t.Helper()
	after := lancetest.Dump(t, wh, "ds")
	if !slices.Equal(after.Versions, before.Versions) {
		t.Fatalf("%s: LanceDB lists versions %v, %v before", label, after.Versions, before.Versions)
	}
	for _, v := range after.Versions {
		k := strconv.FormatUint(v, 10)
		if !slices.Equal(after.Rows[k], before.Rows[k]) {
			t.Fatalf("%s: version %d reads %d rows, %d before", label, v, len(after.Rows[k]), len(before.Rows[k]))
		}
	}
	if len(after.Tags) != len(before.Tags) {
		t.Fatalf("%s: tags %v, %v before", label, after.Tags, before.Tags)
	}
}

// TestSweepLanceDataset: the orphan sweep on a LanceDB dataset deletes
// exactly the unreferenced files older than max(grace + margin, 7 days)
// (a data file, a deletion file, an index directory, a transaction file),
// keeps the young ones, every file any stored manifest references (those
// of versions below the floor not yet cleaned, tagged ones, old index
// uuids) and every name outside Lance's files; its dry run lists exactly
// what the real run deletes; LanceDB then reads every version as before; a
// rerun deletes nothing. MaxDeletes bounds the units deleted.
func TestSweepLanceDataset(t *testing.T) {
	ctx := context.Background()
	f := newLanceSweepFixture(t)
	store := f.store(t)
	before := listing(t, store, "wh/")
	o := maintenance.SweepOptions{Now: time.Now(), Sources: formats.Open, DryRun: true}

	dry, err := maintenance.SweepTable(ctx, store, f.ref, o)
	if err != nil || dry.Skipped != "" {
		t.Fatalf("dry run: %+v %v", dry, err)
	}
	if !slices.Equal(dry.Planned, f.old) {
		t.Fatalf("dry run plans %v, want %v", dry.Planned, f.old)
	}
	if err := sameListing(before, listing(t, store, "wh/")); err != nil {
		t.Fatalf("the dry run changed the store: %v", err)
	}
	if dry.Manifests != len(f.before.Versions) || dry.Young != 6 || dry.Foreign != 2 || dry.Referenced == 0 {
		t.Fatalf("dry run %+v (LanceDB lists %d versions)", dry, len(f.before.Versions))
	}

	// MaxDeletes 1: one object (a data file, the first unit listed), on a copy.
	bounded := copyTree(t, f.dir)
	bst, _ := objstore.NewDisk(bounded)
	ob := o
	ob.DryRun, ob.MaxDeletes = false, 1
	br, err := maintenance.SweepTable(ctx, bst, f.ref, ob)
	if g := gone(before, listing(t, bst, "wh/")); err != nil || br.Deleted != 1 || len(g) != 1 || !slices.Contains(f.old, g[0]) {
		t.Fatalf("MaxDeletes 1: %+v %v", br, err)
	}

	o.DryRun = false
	res, err := maintenance.SweepTable(ctx, store, f.ref, o)
	if err != nil || res.Deleted != len(f.old) {
		t.Fatalf("sweep: %+v %v", res, err)
	}
	after := listing(t, store, "wh/")
	if got := gone(before, after); !slices.Equal(got, f.old) {
		t.Fatalf("the sweep deleted %v, want %v (the dry run's plan)", got, f.old)
	}
	if len(gone(after, before)) != 0 {
		t.Fatalf("the sweep wrote %v", gone(after, before))
	}
	checkLanceReads(t, f.wh, f.before, "after the sweep")
	again, err := maintenance.SweepTable(ctx, store, f.ref, o)
	if err != nil || again.Deleted != 0 || len(again.Planned) != 0 {
		t.Fatalf("rerun: %+v %v", again, err)
	}
}

// TestSweepLanceMatchesLanceCleanup: on a copy of the same dataset,
// LanceDB's own cleanup (optimize with a cut-off at the epoch: no version
// removed, only unreferenced files at least 7 days old) deletes the same
// orphans as the sweep, plus the three documented differences, where the
// sweep keeps more: a _versions/.tmp leftover (the sweep never touches
// _versions/), the old object of an index directory that also holds a
// young one (the sweep judges a directory by its newest object; Lance file
// by file), and a blob sidecar (the reader does not know blob files).
func TestSweepLanceMatchesLanceCleanup(t *testing.T) {
	ctx := context.Background()
	f := newLanceSweepFixture(t)
	cp := copyTree(t, f.dir)
	cst, _ := objstore.NewDisk(cp)
	before := listing(t, cst, "wh/")
	var out map[string]any
	lancetest.Node(t, nil, &out, "compact", filepath.Join(cp, "wh"), "ds")
	lanceGone := gone(before, listing(t, cst, "wh/"))

	store := f.store(t)
	res, err := maintenance.SweepTable(ctx, store, f.ref, maintenance.SweepOptions{Now: time.Now(), Sources: formats.Open})
	if err != nil {
		t.Fatal(err)
	}
	tkGone := gone(before, listing(t, store, "wh/"))
	want := slices.Sorted(slices.Values(append(slices.Clone(f.old), f.lanceOnly...)))
	if !slices.Equal(lanceGone, want) {
		t.Fatalf("LanceDB's cleanup deleted %v\nwant the sweep's %v plus %v", lanceGone, f.old, f.lanceOnly)
	}
	if !slices.Equal(tkGone, f.old) || res.Deleted != len(f.old) {
		t.Fatalf("the sweep deleted %v, want %v", tkGone, f.old)
	}
}

// TestSweepLanceRefusals: a dataset the reader refuses (a branch), or a
// stored manifest that does not decode, stops the sweep before anything is
// deleted, with ErrSweepRefused; the underlying lance error is kept.
func TestSweepLanceRefusals(t *testing.T) {
	ctx := context.Background()
	f := newLanceSweepFixture(t)
	o := maintenance.SweepOptions{Now: time.Now(), Sources: formats.Open}
	for _, tc := range []struct {
		name   string
		break_ func(ds string) error
		want   error
	}{
		{"branch", func(ds string) error {
			if err := os.MkdirAll(filepath.Join(ds, "_refs", "branches"), 0o755); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(ds, "_refs", "branches", "dev.json"), []byte(`{}`), 0o644)
		}, lance.ErrUnsupported},
		{"damaged manifest", func(ds string) error {
			es, err := os.ReadDir(filepath.Join(ds, "_versions"))
			if err != nil {
				return err
			}
			// The oldest version (inverted names: the last one listed).
			var names []string
			for _, e := range es {
				if strings.HasSuffix(e.Name(), ".manifest") && !strings.HasPrefix(e.Name(), ".") {
					names = append(names, e.Name())
				}
			}
			slices.Sort(names)
			return os.WriteFile(filepath.Join(ds, "_versions", names[len(names)-1]), []byte("not a manifest"), 0o644)
		}, lance.ErrCorrupt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cp := copyTree(t, f.dir)
			if err := tc.break_(filepath.Join(cp, "wh", "ds.lance")); err != nil {
				t.Fatal(err)
			}
			st, _ := objstore.NewDisk(cp)
			before := listing(t, st, "wh/")
			res, err := maintenance.SweepTable(ctx, st, f.ref, o)
			if !errors.Is(err, maintenance.ErrSweepRefused) || !errors.Is(err, tc.want) || res.Deleted != 0 {
				t.Fatalf("%+v %v, want ErrSweepRefused and %v", res, err, tc.want)
			}
			if err := sameListing(before, listing(t, st, "wh/")); err != nil {
				t.Fatalf("deleted: %v", err)
			}
		})
	}
}

// TestCrashAtEveryRequestOfLanceSweep fails each request of a sweep of a
// LanceDB dataset, before it is sent and after it was applied: every
// stored version keeps every file it references (the sweep only deletes
// files none references), and a rerun deletes exactly the old orphans
// left. LanceDB reads every version as before at the end.
func TestCrashAtEveryRequestOfLanceSweep(t *testing.T) {
	ctx := context.Background()
	f := newLanceSweepFixture(t)
	o := maintenance.SweepOptions{Now: time.Now(), Sources: formats.Open}
	pol := f.ref.Policy
	pol.DeleteBatch = 2 // several DeleteObjects requests
	ref := f.ref
	ref.Policy = pol
	var last string
	for _, mode := range []struct {
		name string
		set  func(f *objstore.Faulty, fn objstore.FaultFunc)
	}{{"before", (*objstore.Faulty).SetBefore}, {"after", (*objstore.Faulty).SetAfter}} {
		total := 0
		for n := int64(1); ; n++ {
			cp := copyTree(t, f.dir)
			disk, _ := objstore.NewDisk(cp)
			before := listing(t, disk, "wh/")
			faulty := objstore.NewFaulty(disk)
			mode.set(faulty, objstore.FailNth(n, nil))
			_, ferr := maintenance.SweepTable(ctx, faulty, ref, o)
			reached := faulty.Requests() >= n
			label := fmt.Sprintf("%s fault at request %d (err %v)", mode.name, n, ferr)
			if deleted := gone(before, listing(t, disk, "wh/")); len(minusKeys(deleted, f.old)) > 0 {
				t.Fatalf("%s: deleted %v, not old orphans", label, minusKeys(deleted, f.old))
			}
			if !reached {
				total = int(n - 1)
				break
			}
			if ferr == nil {
				t.Fatalf("%s: no error", label)
			}
			if _, err := maintenance.SweepTable(ctx, disk, ref, o); err != nil {
				t.Fatalf("%s: rerun: %v", label, err)
			}
			if got := gone(before, listing(t, disk, "wh/")); !slices.Equal(got, f.old) {
				t.Fatalf("%s: after the rerun %v are gone, want %v", label, got, f.old)
			}
			last = cp
		}
		if total < 10 {
			t.Fatalf("%s: only %d requests in a sweep", mode.name, total)
		}
		t.Logf("%s: failed each of the %d requests of a sweep", mode.name, total)
	}
	checkLanceReads(t, filepath.Join(last, "wh"), f.before, "after the last crash point and its rerun")
}

func minusKeys(a, b []string) []string {
	var out []string
	for _, k := range a {
		if !slices.Contains(b, k) {
			out = append(out, k)
		}
	}
	return out
}

// TestSweepLanceCutoffOnFakeClock: a slow writer's files on a LanceDB
// dataset, on a fake clock over simulated days: uploaded at t0 (an index
// build's second object an hour later), never committed. With the policy's
// grace P, the cut-off is G = max(P + SafetyMargin, 7 days): at exactly
// t0 + G the files are kept (the rule is now - mod > G), a nanosecond later
// the data and transaction files go, and the index directory only once its
// newest object is past G. Every file a stored manifest references is kept
// however old, and LanceDB reads every version at the end.
func TestSweepLanceCutoffOnFakeClock(t *testing.T) {
	ctx := context.Background()
	base := t.TempDir()
	wh := filepath.Join(base, "wh")
	lancetest.Create(t, wh, "ds", 10, "")
	before := lancetest.Dump(t, wh, "ds")
	for _, grace := range []time.Duration{time.Hour, 10 * 24 * time.Hour} {
		t.Run(grace.String(), func(t *testing.T) {
			dir := copyTree(t, base)
			disk, _ := objstore.NewDisk(dir)
			t0 := time.Now().Add(time.Minute)
			clock := fakeclock.New(t0)
			store := fakeclock.NewStore(disk, clock)
			ref := maintenance.TableRef{Name: "ds", Root: sweepRoot, Policy: maintenance.Policy{Grace: grace}, Format: formats.Lance}
			idx := sweepRoot + "_indices/41111111-2222-4333-8444-555555555555/"
			put := func(key string) {
				if err := store.Put(ctx, key, []byte("slow writer")); err != nil {
					t.Fatal(err)
				}
			}
			put(sweepRoot + "data/0a0a0a0a-slow.lance")
			put(sweepRoot + "_transactions/9-0a0a0a0a-slow.txn")
			put(idx + "part_0.lance")
			clock.Advance(time.Hour)
			put(idx + "part_1.lance")
			g := max(grace+table.SafetyMargin, lance.UnverifiedAge)
			files := listing(t, store, "wh/")
			sweep := func(at time.Time) []string {
				t.Helper()
				clock.Advance(at.Sub(clock.Now()))
				if _, err := maintenance.SweepTable(ctx, store, ref, maintenance.SweepOptions{Now: clock.Now(), Sources: formats.Open}); err != nil {
					t.Fatal(err)
				}
				return gone(files, listing(t, store, "wh/"))
			}
			if got := sweep(t0.Add(g)); len(got) != 0 {
				t.Fatalf("at t0 + %v exactly, deleted %v", g, got)
			}
			want := []string{sweepRoot + "_transactions/9-0a0a0a0a-slow.txn", sweepRoot + "data/0a0a0a0a-slow.lance"}
			if got := sweep(t0.Add(g + 1)); !slices.Equal(got, want) {
				t.Fatalf("at t0 + %v + 1ns, deleted %v, want %v", g, got, want)
			}
			if got := sweep(t0.Add(time.Hour + g)); len(got) != 2 {
				t.Fatalf("at t0 + 1h + %v exactly, deleted %v", g, got)
			}
			want = append(want, idx+"part_0.lance", idx+"part_1.lance")
			slices.Sort(want)
			if got := sweep(t0.Add(time.Hour + g + 1)); !slices.Equal(got, want) {
				t.Fatalf("past the index's newest object, deleted %v, want %v", got, want)
			}
			checkLanceReads(t, filepath.Join(dir, "wh"), before, "after the sweeps")
		})
	}
}
