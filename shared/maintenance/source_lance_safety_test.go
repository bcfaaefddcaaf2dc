package maintenance_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
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

// lancePlanned is a LanceDB dataset (24 rounds of the seed's churn) whose
// prune was planned and applied: the floor raised, the ranges' messages
// taken (not cleaned).
type lancePlanned struct {
	dir    string // the store's directory
	wh     string // LanceDB's database directory
	ref    maintenance.TableRef
	cat    *memCatalog
	bodies [][]byte
	floor  uint64
	before lancetest.Dumped
	opts   table.Options // the cleaners': the planner's clock (the age rule)
}

func planLance(t *testing.T) *lancePlanned {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	wh := filepath.Join(dir, "wh")
	lancetest.Create(t, wh, "ds", 24, "")
	p := maintenance.Policy{Grace: time.Hour, KeepLast: 2, RangeVersions: 1000, MaxKeysPerRun: 100000}
	ref := maintenance.TableRef{Name: "ds", Root: "wh/ds.lance/", Policy: p, Format: formats.Lance}
	disk, err := objstore.NewDisk(dir)
	if err != nil {
		t.Fatal(err)
	}
	src, err := formats.Open(ctx, disk, ref)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().Add(2 * time.Hour)
	plan, err := maintenance.PlanSourcePrune(ctx, src, ref.Name, p, now)
	if err != nil {
		t.Fatal(err)
	}
	rec := &bodies{}
	if err := maintenance.ApplySourcePrune(ctx, src, &plan, rec); err != nil {
		t.Fatal(err)
	}
	bs := rec.take()
	if len(bs) == 0 {
		t.Fatalf("nothing to clean: %+v", plan)
	}
	return &lancePlanned{dir: dir, wh: wh, ref: ref, cat: &memCatalog{refs: []maintenance.TableRef{ref}}, bodies: bs,
		floor: plan.Floor, before: lancetest.Dump(t, wh, "ds"), opts: table.Options{Clock: fakeclock.New(now)}}
}

func (lp *lancePlanned) store(t *testing.T) objstore.Store {
	t.Helper()
	disk, err := objstore.NewDisk(lp.dir)
	if err != nil {
		t.Fatal(err)
	}
	return disk
}

// TestLanceRestoreWhileRangeQueued (issue 19 item 1): the floor is raised
// and a range below it enqueued; LanceDB then restores a version inside
// the range (checkout(v).restore(), a new latest version referencing v's
// files again), or a branch appears; the cleaner drains the range. Before
// the fix it deleted the restored version's files (LanceDB could not read
// its own latest version). Now the cleaner refuses the range, retryably,
// and deletes nothing: the restore (or a version written after it) is
// newer than the sidecar's head and references the range's files
// (lance.ErrChangedSinceDiff), a branch is lance.ErrUnsupported, and the
// latest-version guard would refuse the restore alone too.
func TestLanceRestoreWhileRangeQueued(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		after func(t *testing.T, lp *lancePlanned, v uint64)
		want  error
	}{
		{"restore", func(t *testing.T, lp *lancePlanned, v uint64) { lancetest.Restore(t, lp.wh, "ds", v) }, lance.ErrChangedSinceDiff},
		{"restore then write", func(t *testing.T, lp *lancePlanned, v uint64) {
			lancetest.Restore(t, lp.wh, "ds", v)
			lancetest.Write(t, lp.wh, "ds")
		}, lance.ErrChangedSinceDiff},
		{"branch", func(t *testing.T, lp *lancePlanned, _ uint64) {
			d := filepath.Join(lp.wh, "ds.lance", "_refs", "branches")
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(d, "dev.json"), []byte(`{"parent_version": 3}`), 0o644); err != nil {
				t.Fatal(err)
			}
		}, lance.ErrUnsupported},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lp := planLance(t)
			msg, err := maintenance.DecodeRangeMessage(lp.bodies[0])
			if err != nil {
				t.Fatal(err)
			}
			// The newest version of the range: its fragments and deletion
			// files, written after the last tag, are removed by the final
			// compaction (the record of To+1), so the range deletes them.
			v := msg.To
			tc.after(t, lp, v)
			st := lp.store(t)
			files := listing(t, st, "wh/")
			c := &maintenance.Cleaner{Store: st, Tables: lp.cat, Requeue: &bodies{}, Logger: discard, Sources: formats.Open, OpenOpts: lp.opts}
			var errs []error
			for _, b := range lp.bodies {
				_, err := c.Clean(ctx, b)
				errs = append(errs, err)
			}
			// LanceDB reads every version it lists first (the unfixed
			// cleaner: it fails on the restored version's deleted files).
			after := lancetest.Dump(t, lp.wh, "ds")
			if err := sameListing(files, listing(t, st, "wh/")); err != nil {
				t.Fatalf("deleted: %v", err)
			}
			for i, err := range errs {
				if !errors.Is(err, tc.want) {
					t.Fatalf("clean %s after the %s: %v, want %v", lp.bodies[i], tc.name, err, tc.want)
				}
				if errors.Is(err, queue.ErrPermanent) {
					t.Fatalf("refusal %v is permanent, want retryable", err)
				}
			}
			if tc.name == "restore" {
				latest := after.Versions[len(after.Versions)-1]
				got, want := after.Rows[strconv.FormatUint(latest, 10)], lp.before.Rows[strconv.FormatUint(v, 10)]
				if len(got) == 0 || len(got) != len(want) {
					t.Fatalf("the restored version %d reads %d rows, version %d read %d", latest, len(got), v, len(want))
				}
			}
		})
	}
}

// TestLanceRecreatedDatasetNotPruned (issue 19 item 2): a maintained
// dataset's Lance prefixes are removed by other means than LanceDB's
// dropTable, _tablekeep/ left behind, and LanceDB creates the table again
// (versions restart at 1). Before the fix a plain maintenance deleted
// every manifest of the new dataset, its latest included. Now the planner
// refuses (lance.ErrOtherHistory, with how to reset), the old history's
// queued messages delete nothing, and once _tablekeep/ is deleted as the
// error says, maintenance plans the new dataset again.
func TestLanceRecreatedDatasetNotPruned(t *testing.T) {
	// Fewer versions than the old floor; more than the old head (the head's
	// version then has another manifest timestamp).
	for _, commits := range []int{2, 30} {
		t.Run(strconv.Itoa(commits), func(t *testing.T) { testLanceRecreated(t, commits) })
	}
}

func testLanceRecreated(t *testing.T, commits int) {
	ctx := context.Background()
	lp := planLance(t)
	st := lp.store(t)
	{
		// The old history's cleaning done, but its first message kept.
		c := &maintenance.Cleaner{Store: st, Tables: lp.cat, Requeue: &bodies{}, Logger: discard, Sources: formats.Open, OpenOpts: lp.opts}
		for _, b := range lp.bodies {
			if _, err := c.Clean(ctx, b); err != nil {
				t.Fatal(err)
			}
		}
	}
	ds := filepath.Join(lp.wh, "ds.lance")
	c := lp.recreate(t, commits)
	if (commits == 2) != (c.Latest < lp.floor) || (commits == 30 && c.Latest <= lp.floor+1) {
		t.Fatalf("the new dataset has %d versions, the old floor is %d", c.Latest, lp.floor)
	}
	before := lancetest.Dump(t, lp.wh, "ds")
	files := listing(t, st, "wh/")

	src, err := formats.Open(ctx, st, lp.ref)
	if err != nil {
		t.Fatal(err)
	}
	p := lp.ref.Policy
	plan, perr := maintenance.PlanSourcePrune(ctx, src, lp.ref.Name, p, time.Now().Add(2*time.Hour))
	if perr == nil {
		// The unfixed planner: apply and drain, as a plain maintain does.
		rec := &bodies{}
		if err := maintenance.ApplySourcePrune(ctx, src, &plan, rec); err != nil {
			t.Fatal(err)
		}
		cl := &maintenance.Cleaner{Store: st, Tables: lp.cat, Requeue: rec, Logger: discard, Sources: formats.Open, OpenOpts: lp.opts}
		for _, b := range rec.take() {
			_, _ = cl.Clean(ctx, b)
		}
	}
	// An old message redelivered.
	cl := &maintenance.Cleaner{Store: st, Tables: lp.cat, Requeue: &bodies{}, Logger: discard, Sources: formats.Open, OpenOpts: lp.opts}
	res, cerr := cl.Clean(ctx, lp.bodies[0])
	if err := sameListing(files, listing(t, st, "wh/")); err != nil {
		t.Fatalf("maintenance of the re-created dataset deleted (plan error %v): %v", perr, err)
	}
	if !errors.Is(perr, lance.ErrOtherHistory) || !strings.Contains(perr.Error(), "_tablekeep/") {
		t.Fatalf("plan: %v, want lance.ErrOtherHistory naming the prefix to delete", perr)
	}
	if cerr == nil || res.DataKeys+res.ManifestKeys != 0 {
		t.Fatalf("old message: %+v %v, want a refusal", res, cerr)
	}
	t.Logf("plan: %v\nold message: %v", perr, cerr)
	lancetest.CheckRetained(t, before, lancetest.Dump(t, lp.wh, "ds"), func(uint64) bool { return true })

	// The reset the error names.
	if err := os.RemoveAll(filepath.Join(ds, "_tablekeep")); err != nil {
		t.Fatal(err)
	}
	src, _ = formats.Open(ctx, st, lp.ref)
	if _, err := maintenance.PlanSourcePrune(ctx, src, lp.ref.Name, p, time.Now().Add(2*time.Hour)); err != nil {
		t.Fatalf("plan after the reset: %v", err)
	}
}

// kindCounting counts requests by kind and key class.
type kindCounting struct {
	objstore.Store
	mu sync.Mutex
	n  map[string]int
}

func (s *kindCounting) add(kind, key string) {
	class := "other"
	for _, c := range []string{"_versions/", "_refs/branches/", "_tablekeep/head.json", "_tablekeep/changes/"} {
		if strings.Contains(key, c) {
			class = c
		}
	}
	s.mu.Lock()
	s.n[kind+" "+class]++
	s.mu.Unlock()
}
func (s *kindCounting) Get(ctx context.Context, k string) ([]byte, error) {
	s.add("GET", k)
	return s.Store.Get(ctx, k)
}
func (s *kindCounting) List(ctx context.Context, o objstore.ListOptions) (objstore.ListPage, error) {
	s.add("LIST", o.Prefix)
	return s.Store.List(ctx, o)
}

// TestLanceCleanerGuardRequests pins what the check before deleting costs
// a Lance cleaner message (issue 19 items 0 and 1): the guard's LIST with
// max-keys 1 on _versions/ and GET of the latest manifest; the range check's
// LIST of _refs/branches/, GET of the sidecar's head, LIST of _versions/ and
// GET of the head version's manifest; the naming-scheme LIST of a cleaner
// that did not run Prepare (there before): 3 LIST and 2 GET on _versions/,
// 1 LIST of branches, 1 GET of the head; with k versions written since the
// head, k GETs more.
func TestLanceCleanerGuardRequests(t *testing.T) {
	ctx := context.Background()
	for _, written := range []int{0, 1} {
		lp := planLance(t)
		for range written {
			lancetest.Write(t, lp.wh, "ds")
		}
		// LanceDB's write is an upsert and a delete: two versions.
		k := 2 * written
		st := &kindCounting{Store: lp.store(t), n: map[string]int{}}
		c := &maintenance.Cleaner{Store: st, Tables: lp.cat, Requeue: &bodies{}, Logger: discard, Sources: formats.Open, OpenOpts: lp.opts}
		if _, err := c.Clean(ctx, lp.bodies[0]); err != nil {
			t.Fatal(err)
		}
		want := map[string]int{"LIST _versions/": 3, "GET _versions/": 2 + k, "LIST _refs/branches/": 1, "GET _tablekeep/head.json": 1}
		for key, n := range want {
			if st.n[key] != n {
				t.Errorf("%d versions written since the head: %s = %d, want %d (all: %v)", k, key, st.n[key], n, st.n)
			}
		}
	}
}

// TestLanceCleanerManyTempManifests (issue 19 item 8): a dataset with more
// than 1,000 writers' temporary files under _versions/ (".tmp_*", which
// sort before every manifest name). A cleaner that did not run Prepare
// learns the naming scheme from a listing; before the fix that listing
// held only temporary files and every range failed (lance.ErrNotADataset).
func TestLanceCleanerManyTempManifests(t *testing.T) {
	ctx := context.Background()
	lp := planLance(t)
	st := lp.store(t)
	for i := range 1001 {
		key := lp.ref.Root + "_versions/.tmp_" + strconv.Itoa(40+i) + ".manifest_9c100374-3298-4537-afc6-f5ee7913666d"
		if err := st.Put(ctx, key, []byte("partial")); err != nil {
			t.Fatal(err)
		}
	}
	c := &maintenance.Cleaner{Store: st, Tables: lp.cat, Requeue: &bodies{}, Logger: discard, Sources: formats.Open, OpenOpts: lp.opts}
	for _, b := range lp.bodies {
		res, err := c.Clean(ctx, b)
		if err != nil || res.VersionsDeleted == 0 {
			t.Fatalf("clean %s: %+v %v", b, res, err)
		}
	}
	lancetest.CheckRetained(t, lp.before, lancetest.Dump(t, lp.wh, "ds"), lancetest.AtOrAbove(lp.floor, lp.before.Tags))
}

// TestLanceRecordsOfRemovedVersionsDropped (issue 19 item 7): LanceDB's
// own cleanup (optimize with a cut-off) removes old versions that
// tablekeep had diffed; their change records in _tablekeep/changes/ are
// read by no range (a range reads record r only while version r-1 is
// stored). Before the fix they stayed for ever; now the next Prepare
// deletes them (bounded, idempotent), and keeps every record a range of
// the stored versions reads.
func TestLanceRecordsOfRemovedVersionsDropped(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	wh := filepath.Join(dir, "wh")
	c := lancetest.Create(t, wh, "ds", 24, "")
	// LanceDB's optimize refuses to clean while a tag is older than the
	// cut-off: no tags.
	if err := os.RemoveAll(filepath.Join(wh, "ds.lance", "_refs")); err != nil {
		t.Fatal(err)
	}
	st, err := objstore.NewDisk(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := lance.NewSource(st, "wh/ds.lance").Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	cut := c.Versions[len(c.Versions)-8]
	var out map[string]any
	lancetest.Node(t, nil, &out, "optimize", wh, "ds", strconv.FormatInt(cut.TS-1, 10))

	records := func() map[uint64]bool {
		got := map[uint64]bool{}
		for k := range listing(t, st, "wh/ds.lance/_tablekeep/changes/") {
			name := strings.TrimSuffix(filepath.Base(k), ".json")
			v, err := strconv.ParseUint(name, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			got[v] = true
		}
		return got
	}
	before := records()
	src := lance.NewSource(st, "wh/ds.lance")
	if err := src.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	vs, err := src.Versions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stored := map[uint64]bool{}
	for _, v := range vs {
		stored[v.Version] = true
	}
	if stored[1] || len(vs) == len(c.Versions) {
		t.Fatalf("LanceDB's cleanup removed nothing: %d versions", len(vs))
	}
	after := records()
	for r := range before {
		read := (r == 1 && stored[1]) || (r > 1 && stored[r-1])
		if read != after[r] {
			t.Errorf("record %d: kept %v, but version %d stored %v", r, after[r], r-1, stored[r-1])
		}
	}
	gone := 0
	for r := range before {
		if !after[r] {
			gone++
		}
	}
	if src.RecordsDropped != gone || gone == 0 {
		t.Fatalf("dropped %d records, %d of %d gone", src.RecordsDropped, gone, len(before))
	}
	// Idempotent: a second Prepare drops nothing more. Its cost of the
	// checks of issue 19: one GET of _versions/ (the head version's
	// manifest: nothing new to diff), one LIST of the records per run of
	// removed versions (one here: LanceDB removed the oldest), no DELETE.
	runs, next := 0, uint64(1)
	for _, v := range vs {
		if v.Version > next {
			runs++
		}
		next = v.Version + 1
	}
	ks := &kindCounting{Store: st, n: map[string]int{}}
	src = lance.NewSource(ks, "wh/ds.lance")
	if err := src.Prepare(ctx); err != nil || src.RecordsDropped != 0 {
		t.Fatalf("second Prepare: dropped %d, %v", src.RecordsDropped, err)
	}
	if ks.n["GET _versions/"] != 1 || ks.n["LIST _tablekeep/changes/"] != runs || runs != 1 {
		t.Fatalf("second Prepare: %v, want 1 GET of _versions/ and %d LIST of the records (runs of removed versions)", ks.n, runs)
	}
}

// TestLanceFloorMarkersDropped (issue 19 item 7): the table format's rule
// for floor markers, applied to _tablekeep/floor/: a raise deletes the
// markers below the highest one older than 10 minutes (plus the clock
// skew), so one marker per raise no longer stays for ever, and the floor
// read never goes down.
func TestLanceFloorMarkersDropped(t *testing.T) {
	ctx := context.Background()
	lp := planLance(t)
	// Markers dated by the fake clock; the plan's marker is older than all.
	clock := fakeclock.New(time.Now())
	st := fakeclock.NewStore(lp.store(t), clock)
	src := lance.NewSource(st, lp.ref.Root)
	src.Clock = clock
	markers := func() int { return len(listing(t, st, lp.ref.Root+"_tablekeep/floor/")) }
	f := lp.floor
	for i, step := range []struct {
		advance time.Duration
		want    int
	}{
		{0, 2},                // the plan's marker (settled? written a moment ago) and this one
		{11 * time.Minute, 2}, // both older settled: the lowest goes, the new one stays
		{11 * time.Minute, 1}, // the floor unchanged: the one below the settled one goes
	} {
		clock.Advance(step.advance)
		if i < 2 {
			f++
		}
		if err := src.SetFloor(ctx, f); err != nil {
			t.Fatal(err)
		}
		if got := markers(); got != step.want {
			t.Fatalf("step %d: %d floor markers, want %d", i, got, step.want)
		}
		if got, err := src.Floor(ctx); err != nil || got != f {
			t.Fatalf("step %d: floor %d %v, want %d", i, got, err, f)
		}
	}
}
