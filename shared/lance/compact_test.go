package lance_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/internal/testkit"
	"github.com/tablekeep/tablekeep/shared/lance"
	"github.com/tablekeep/tablekeep/shared/lance/lancetest"
	"github.com/tablekeep/tablekeep/shared/lock"
	"github.com/tablekeep/tablekeep/shared/objstore"
)

// verified is what the fixture's verify reports of the latest version.
type verified struct {
	Rows      int      `json:"rows"`
	Bad       []any    `json:"bad"`
	Fragments int      `json:"fragments"`
	Indices   []string `json:"indices"`
	Version   uint64   `json:"version"`
}

func verifyDataset(t testing.TB, dir string) verified {
	t.Helper()
	return lanceDB().verify(t, dir)
}

// mixedDataset is the default release's ldb.mixed in its default version.
func mixedDataset(t testing.TB, rounds int) (dir string, store objstore.Store) {
	t.Helper()
	return lanceDB().mixed(t, rounds, "")
}

// mixedDatasetVersion is the default release's ldb.mixed.
func mixedDatasetVersion(t testing.TB, rounds int, version string) (dir string, store objstore.Store) {
	t.Helper()
	return lanceDB().mixed(t, rounds, version)
}

// checkCompacted: LanceDB lists the versions before plus the compaction's,
// reads each of the old ones exactly as before, and the new one as the
// latest before it.
func checkCompacted(t testing.TB, before, after dumped, added ...uint64) {
	t.Helper()
	want := append(slices.Clone(before.Versions), added...)
	if !slices.Equal(after.Versions, want) {
		t.Fatalf("LanceDB lists versions %v, want %v", after.Versions, want)
	}
	for _, v := range after.Versions {
		k := strconv.FormatUint(v, 10)
		ref := k
		if slices.Contains(added, v) {
			ref = strconv.FormatUint(before.Versions[len(before.Versions)-1], 10)
		}
		if !slices.Equal(after.Rows[k], before.Rows[ref]) {
			t.Fatalf("version %d reads %v, want %v", v, after.Rows[k], before.Rows[ref])
		}
	}
}

// TestCompactLanceDBDataset: Go folds the one-row fragments LanceDB wrote
// (their deletion vectors remapped, indexed fragments left alone) in one
// Rewrite, for each pinned LanceDB release and in each file version it
// writes (0.31: 2.1 its default, 2.2, 2.0 older tables'; 0.39: 2.2 its
// default, 2.1); LanceDB then reads every version exactly, its index
// queries agree with its scan, its own optimize() runs and it accepts
// writes. 2.1-v1 is a 2.1 dataset with plain manifest names.
func TestCompactLanceDBDataset(t *testing.T) {
	versions := map[lancetest.Release][]string{
		lancetest.Release031: {"2.1", "2.2", "2.0", "2.1-v1"},
		lancetest.Release039: {"default", "2.1"},
	}
	lancetest.ForEach(t, func(t *testing.T, r lancetest.Release) {
		for _, v := range versions[r] {
			t.Run(v, func(t *testing.T) { compactLanceDBDataset(t, releaseDB(r), strings.TrimPrefix(v, "default")) })
		}
	})
}

func compactLanceDBDataset(t *testing.T, db ldb, version string) {
	dir, store := db.mixed(t, 24, version)
	before := db.dump(t, dir)
	vb := db.verify(t, dir)
	ctx := context.Background()
	ds := lance.Open(store, "t.lance")
	rep, err := ds.Compact(ctx, lance.CompactOptions{TargetRows: 10000})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("report: %+v", rep)
	if rep.Committed != 1 || rep.Version != vb.Version+1 {
		t.Fatalf("committed %d groups at version %d, want 1 at %d", rep.Committed, rep.Version, vb.Version+1)
	}
	after := db.dump(t, dir)
	checkCompacted(t, before, after, rep.Version)
	va := db.verify(t, dir)
	if va.Fragments >= vb.Fragments || va.Fragments != rep.FragmentsAfter {
		t.Fatalf("LanceDB counts %d fragments (%d before, the report %d)", va.Fragments, vb.Fragments, rep.FragmentsAfter)
	}
	checkDataFileNames(t, dir)
	// Nothing more to fold: a second pass commits nothing.
	rep2, err := ds.Compact(ctx, lance.CompactOptions{TargetRows: 10000})
	if err != nil || rep2.Version != 0 {
		t.Fatalf("second pass: %+v, %v", rep2, err)
	}
	// LanceDB's own optimize still runs, and writes still go in.
	var opt struct {
		Latest uint64 `json:"latest"`
	}
	db.node(t, &opt, "compact", dir, "t")
	db.verify(t, dir)
	if w := db.write(t, dir); w <= opt.Latest {
		t.Fatalf("write after optimize at version %d (optimize at %d)", w, opt.Latest)
	}
	db.verify(t, dir)
}

// checkDataFileNames: every file under data/ (LanceDB's and tablekeep's)
// has Lance's binary-prefixed name, and the orphan sweep takes it as a
// data file a manifest may reference.
func checkDataFileNames(t testing.TB, dir string) {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(dir, "t.lance", "data"))
	if err != nil {
		t.Fatal(err)
	}
	src := lance.NewSource(nil, "t.lance")
	for _, e := range ents {
		if !lance.IsLanceDataFileName(e.Name()) || len(e.Name()) != 50+len(".lance") {
			t.Errorf("data/%s: not a binary-prefixed Lance data file name", e.Name())
		}
		if unit, ok := src.SweepUnit(lance.DataDir + e.Name()); !ok || unit != lance.DataDir+e.Name() {
			t.Errorf("data/%s: the sweep takes it as %q, %v", e.Name(), unit, ok)
		}
	}
}

func lancetestWrite(t testing.TB, dir string) uint64 {
	t.Helper()
	return lanceDB().write(t, dir)
}

// TestCompactFenced: a holder whose lease ends at any fence check of the
// run (before a group, or right before the conditional put) commits no
// version, and says why; a run whose fence holds commits.
func TestCompactFenced(t *testing.T) {
	base, _ := mixedDataset(t, 12)
	ctx := context.Background()
	for n := 1; ; n++ {
		dir := t.TempDir()
		copyDir(t, base, dir)
		calls := 0
		fence := func(context.Context) error {
			if calls++; calls == n {
				return lock.ErrLeaseExpired
			}
			return nil
		}
		ds := lance.Open(testkit.DiskStoreAt(t, dir), "t.lance")
		before, _ := ds.ListVersions(ctx)
		rep, err := ds.Compact(ctx, lance.CompactOptions{TargetRows: 10000, Fence: fence})
		if err != nil {
			t.Fatal(err)
		}
		after, _ := ds.ListVersions(ctx)
		if calls < n { // the fence held at every check
			if rep.Version == 0 || len(after) != len(before)+1 {
				t.Fatalf("fence held: %+v", rep)
			}
			if n < 3 {
				t.Fatalf("only %d fence checks", n-1)
			}
			return
		}
		if rep.Version != 0 || len(after) != len(before) || !strings.HasPrefix(rep.Stopped, "lease") {
			t.Fatalf("fence failed at check %d: committed %d (%d versions, %d before), stopped %q", n, rep.Version, len(after), len(before), rep.Stopped)
		}
	}
}

// TestCompactGroupBound: MaxGroupFragments cuts a run of small fragments
// into several groups, all committed in one Rewrite version that LanceDB
// reads exactly.
func TestCompactGroupBound(t *testing.T) {
	dir, store := mixedDataset(t, 24)
	before := dumpDataset(t, dir)
	rep, err := lance.Open(store, "t.lance").Compact(context.Background(), lance.CompactOptions{TargetRows: 10000, MaxGroupFragments: 4})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Committed != 4 || rep.FragmentsAfter != 5 {
		t.Fatalf("%d groups committed, %d fragments after: %v", rep.Committed, rep.FragmentsAfter, rep.Groups)
	}
	for _, g := range rep.Groups {
		if len(g.Fragments) > 4 {
			t.Fatalf("group of %d fragments", len(g.Fragments))
		}
	}
	checkCompacted(t, before, dumpDataset(t, dir), rep.Version)
	if v := verifyDataset(t, dir); v.Fragments != 5 {
		t.Fatalf("LanceDB counts %d fragments", v.Fragments)
	}
}

// TestCompactRefusesCorruptGroup: a corrupt data file refuses its own
// group (typed, nothing written for it) and the other groups commit.
func TestCompactRefusesCorruptGroup(t *testing.T) {
	dir, store := mixedDataset(t, 24)
	before := dumpDataset(t, dir)
	ctx := context.Background()
	ds := lance.Open(store, "t.lance")
	plan, err := ds.Compact(ctx, lance.CompactOptions{TargetRows: 10000, MaxGroupFragments: 4, DryRun: true})
	if err != nil || len(plan.Groups) < 2 {
		t.Fatalf("plan: %+v %v", plan, err)
	}
	// Truncate the first data file of the first group.
	vs, _ := ds.ListVersions(ctx)
	m, _ := ds.ReadManifest(ctx, vs[len(vs)-1])
	var victim string
	for _, f := range m.Fragments {
		if f.ID == plan.Groups[0].Fragments[0] {
			victim = filepath.Join(dir, "t.lance", "data", f.Files[0])
		}
	}
	b, err := os.ReadFile(victim)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(victim, b[:len(b)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	rep, err := ds.Compact(ctx, lance.CompactOptions{TargetRows: 10000, MaxGroupFragments: 4})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Refused != 1 || !strings.Contains(rep.Groups[0].Outcome, "corrupt") || rep.Committed != len(plan.Groups)-1 {
		t.Fatalf("report: %+v", rep)
	}
	// The refused group's fragments are still in the new latest version
	// (LanceDB cannot read the damaged file at any version, so the check is
	// the Go reader's).
	vs, _ = ds.ListVersions(ctx)
	m, err = ds.ReadManifest(ctx, vs[len(vs)-1])
	if err != nil || m.Version != rep.Version || len(before.Versions)+1 != len(vs) {
		t.Fatalf("latest %d (committed %d): %v", m.Version, rep.Version, err)
	}
	ids := map[uint64]bool{}
	for _, f := range m.Fragments {
		ids[f.ID] = true
	}
	for _, id := range plan.Groups[0].Fragments {
		if !ids[id] {
			t.Fatalf("fragment %d of the refused group is gone", id)
		}
	}
}

// TestCompactRunDurationBound: a run commits within MaxRunDuration of its
// first upload or not at all (docs/reliability.md: the sweep's bound then
// holds however often the lease was renewed). The clock passes the bound
// exactly at the manifest PUT's check: nothing is committed; 1 ns less and
// the same run commits.
func TestCompactRunDurationBound(t *testing.T) {
	base, _ := mixedDataset(t, 12)
	ctx := context.Background()
	const bound = time.Hour
	for _, over := range []bool{true, false} {
		dir := t.TempDir()
		copyDir(t, base, dir)
		t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
		now, fenceCalls := t0, 0
		// The fence is checked before each group and before the PUT: the
		// clock jumps at the last check, past (or exactly to) the bound.
		fence := func(context.Context) error {
			fenceCalls++
			return nil
		}
		clock := func() time.Time {
			if fenceCalls >= 2 { // the group was written; the commit is next
				if over {
					return t0.Add(bound + time.Nanosecond)
				}
				return t0.Add(bound)
			}
			return now
		}
		ds := lance.Open(testkit.DiskStoreAt(t, dir), "t.lance")
		before, _ := ds.ListVersions(ctx)
		rep, err := ds.Compact(ctx, lance.CompactOptions{TargetRows: 10000, Fence: fence, Clock: funcClock(clock), MaxRunDuration: bound, MaxGroups: 1})
		if err != nil {
			t.Fatal(err)
		}
		after, _ := ds.ListVersions(ctx)
		if over && (rep.Version != 0 || len(after) != len(before) || !strings.Contains(rep.Stopped, "run duration")) {
			t.Fatalf("past MaxRunDuration: committed %d (%d versions, %d before), stopped %q", rep.Version, len(after), len(before), rep.Stopped)
		}
		if !over && (rep.Version == 0 || len(after) != len(before)+1) {
			t.Fatalf("at MaxRunDuration: %+v", rep)
		}
	}
}

// funcClock is a clock.Clock reading f; it does not sleep.
type funcClock func() time.Time

func (f funcClock) Now() time.Time                                 { return f() }
func (funcClock) Sleep(ctx context.Context, _ time.Duration) error { return ctx.Err() }
