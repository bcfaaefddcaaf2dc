package maintenance_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/internal/fakeclock"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/queue"
	"github.com/tablekeep/tablekeep/shared/table"
)

// Tests of the floor trust rule (issue 29 item 4; docs/format.md 2.4,
// "Which floor is trusted"; docs/reliability.md): a floor is trusted for
// deletion only when its marker is stamped with the stamp its version's
// manifest is listed with.

// unstampedMarker is an earlier release's marker name for floor f.
func unstampedMarker(root string, f uint64) string {
	return fmt.Sprintf("%s_refs/floor/%020d", root, uint64(math.MaxUint64)-f)
}

// TestRecreatedTableKeepsNewHistory (issue 29 item 4): a table removed by
// other means and created again at its root, under an old floor of 25 no
// rule can tell from this history's: an older release's
// _refs/floor.json ("legacy": no marker time to compare), or an older
// release's unstamped marker written 3 s before the new history's
// manifest 25 ("within-skew": inside MaxClockSkew, so the marker-age rule
// accepts it). The new history's 30 versions are all inside their grace
// window. Before the fix the planner took floor 25 and the cleaner deleted
// versions 1-24, then the plan's fresh marker hid the evidence; a range of
// the old history still queued deleted versions 1-3 too. Now the old floor
// is not trusted (floor 0: the plan recomputes from the versions' own
// times and keeps every version), the plan writes a stamped marker, the
// old range waits (ErrFloorUnproven), and once the versions leave their
// grace window pruning proceeds from the stamped marker.
func TestRecreatedTableKeepsNewHistory(t *testing.T) {
	for _, tc := range []string{"legacy", "within-skew"} {
		t.Run(tc, func(t *testing.T) { testRecreatedKeeps(t, tc) })
	}
}

func testRecreatedKeeps(t *testing.T, kind string) {
	ctx := context.Background()
	p := testPolicy() // keep-last 3, grace 1 h
	e := newEnv(t, filepath.Join(t.TempDir(), "s"), p, queue.EmbeddedOptions{})
	fst := fakeclock.NewStore(e.disk, e.clock) // objects dated by the fake clock, as a store dates them
	clean := &maintenance.Cleaner{Store: fst, Tables: e.cat, Requeue: maintenance.QueueEnqueuer{Q: e.q}, Logger: discard, OpenOpts: e.clean.OpenOpts}
	root := e.ref.Root
	tb, err := table.Create(ctx, fst, root, kvSchema, "name", e.opts())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		e.clock.Advance(time.Minute)
		upsert(t, tb, "k", strconv.Itoa(i))
	}
	// The old history is removed, all but its floor (written below).
	var old []string
	for k := range listing(t, e.disk, root) {
		old = append(old, k)
	}
	if err := fst.Delete(ctx, old); err != nil {
		t.Fatal(err)
	}
	if kind == "legacy" {
		if err := fst.Put(ctx, root+"_refs/floor.json", []byte(`{"floor":25}`)); err != nil {
			t.Fatal(err)
		}
		e.clock.Advance(time.Hour)
	}
	if tb, err = table.Create(ctx, fst, root, kvSchema, "name", e.opts()); err != nil {
		t.Fatal(err)
	}
	for i := range 29 { // versions 2-30
		step := time.Minute
		if kind == "within-skew" {
			step = 100 * time.Millisecond
		}
		if i == 23 && kind == "within-skew" {
			// The old release's marker, 3 s before version 25's manifest.
			if err := fst.Put(ctx, unstampedMarker(root, 25), []byte(`{"floor":25}`)); err != nil {
				t.Fatal(err)
			}
			step = 3 * time.Second
		}
		e.clock.Advance(step)
		upsert(t, tb, "n"+strconv.Itoa(i), "v")
	}
	want := latestRows(t, tb)
	e.clock.Advance(10 * time.Minute) // every version inside its grace window
	before := listing(t, e.disk, root)

	plan := prunePass(t, e, tb, clean, p)
	// A range of the old history, still queued.
	old1 := maintenance.RangeMessage{V: 1, Table: tblName, Root: root, From: 1, To: 3}
	_, cerr := clean.Clean(ctx, old1.Encode())
	if err := keptAll(before, listing(t, e.disk, root), root); err != nil {
		t.Fatalf("the new history lost versions (plan floor %d from %d, old range: %v): %v", plan.Floor, plan.OldFloor, cerr, err)
	}
	if plan.OldFloor != 0 || plan.Unproven != 25 || plan.Floor != 1 || plan.Prunable != 0 {
		t.Fatalf("plan: floor %d from %d, unproven %d, %d prunable; want 1 from 0, unproven 25, none", plan.Floor, plan.OldFloor, plan.Unproven, plan.Prunable)
	}
	if !errors.Is(cerr, maintenance.ErrFloorUnproven) || errors.Is(cerr, queue.ErrPermanent) {
		t.Fatalf("old range: %v, want ErrFloorUnproven (retried)", cerr)
	}
	t.Logf("old range: %v", cerr)
	if err := diffRows(latestRows(t, e.open(t)), want); err != nil {
		t.Fatal(err)
	}

	// Later passes: the stamped marker is trusted and pruning proceeds.
	e.clock.Advance(3 * time.Hour)
	if plan = prunePass(t, e, tb, clean, p); plan.OldFloor != 1 || plan.Floor != 28 {
		t.Fatalf("second plan: floor %d from %d, want 28 from 1 (the stamped marker)", plan.Floor, plan.OldFloor)
	}
	vs, err := tb.Versions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 3 || vs[0].Version != 28 {
		t.Fatalf("after the second pass %d versions from %d, want 28-30", len(vs), vs[0].Version)
	}
	if err := diffRows(latestRows(t, e.open(t)), want); err != nil {
		t.Fatal(err)
	}
}

// prunePass is one maintenance's prune of tb at now: plan, apply, drain
// (with clean, over the fake-clock store).
func prunePass(t *testing.T, e *env, tb *table.Table, clean *maintenance.Cleaner, p maintenance.Policy) maintenance.PrunePlan {
	t.Helper()
	ctx := context.Background()
	plan, err := maintenance.PlanPrune(ctx, tb, tblName, p, e.clock.Now())
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	if err := maintenance.ApplyPrune(ctx, tb, &plan, maintenance.QueueEnqueuer{Q: e.q}); err != nil {
		t.Fatal(err)
	}
	if _, err := maintenance.DrainLocal(ctx, e.q, clean, discard); err != nil {
		t.Fatal(err)
	}
	return plan
}

// keptAll reports the keys of before (the table's versions, records and
// files) missing from after; floor markers and maintenance state may come
// and go.
func keptAll(before, after map[string]int64, root string) error {
	var lost []string
	for k := range before {
		rel := strings.TrimPrefix(k, root)
		if strings.HasPrefix(rel, "_refs/floor") || strings.HasPrefix(rel, "_maintenance/") {
			continue
		}
		if _, ok := after[k]; !ok {
			lost = append(lost, rel)
		}
	}
	if len(lost) > 0 {
		sort.Strings(lost)
		return fmt.Errorf("%d keys deleted: %v", len(lost), lost[:min(len(lost), 4)])
	}
	return nil
}

// TestLegacyFloorUpgrade (issue 29 item 4, the upgrade path): a table of
// this history that an earlier release maintained, left with its
// _refs/floor.json and unstamped markers (floor 20, versions below it
// pruned). The first pass trusts neither: it recomputes the floor from
// the versions' own times, which this history's retention rules put at
// least as high, prunes below it and writes a stamped marker; readers
// never see the floor go down; the next raise, more than 10 min 5 s
// later, trusts the stamped marker and deletes the legacy object and the
// unstamped markers. Nothing retained is lost.
func TestLegacyFloorUpgrade(t *testing.T) {
	ctx := context.Background()
	p := testPolicy() // keep-last 3, grace 1 h
	e := newEnv(t, filepath.Join(t.TempDir(), "s"), p, queue.EmbeddedOptions{})
	fst := fakeclock.NewStore(e.disk, e.clock)
	clean := &maintenance.Cleaner{Store: fst, Tables: e.cat, Requeue: maintenance.QueueEnqueuer{Q: e.q}, Logger: discard, OpenOpts: e.clean.OpenOpts}
	root := e.ref.Root
	tb, err := table.Create(ctx, fst, root, kvSchema, "name", e.opts())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 29 {
		e.clock.Advance(time.Minute)
		upsert(t, tb, "k"+strconv.Itoa(i%5), strconv.Itoa(i))
	}
	// The earlier release's floor objects; versions 1-19 pruned by it.
	for k, b := range map[string]string{
		root + "_refs/floor.json": `{"floor":20}`,
		unstampedMarker(root, 18): `{"floor":18}`,
		unstampedMarker(root, 20): `{"floor":20}`,
	} {
		if err := fst.Put(ctx, k, []byte(b)); err != nil {
			t.Fatal(err)
		}
	}
	var gone []string
	for v := uint64(1); v < 20; v++ {
		gone = append(gone, root+fmt.Sprintf("_versions/%020d.manifest", uint64(math.MaxUint64)-v))
	}
	if err := fst.Delete(ctx, gone); err != nil {
		t.Fatal(err)
	}
	want := latestRows(t, tb)
	e.clock.Advance(2 * time.Hour) // versions 20-27 out of their grace window
	plan := prunePass(t, e, tb, clean, p)
	if plan.OldFloor != 0 || plan.Unproven != 20 || plan.Floor != 28 || plan.Prunable != 8 {
		t.Fatalf("first pass: floor %d from %d, unproven %d, %d prunable; want 28 from 0, unproven 20, 8 (versions 20-27)",
			plan.Floor, plan.OldFloor, plan.Unproven, plan.Prunable)
	}
	if f, err := tb.Floor(ctx); err != nil || f != 28 {
		t.Fatalf("readers' floor %d (%v), want 28", f, err)
	}
	// Two more commits; the next raise, 20 min later, trusts the stamped marker.
	for i := range 2 {
		e.clock.Advance(time.Minute)
		upsert(t, tb, "k"+strconv.Itoa(i), "late")
		want["k"+strconv.Itoa(i)] = "late"
	}
	e.clock.Advance(2 * time.Hour)
	plan = prunePass(t, e, tb, clean, p)
	if plan.OldFloor != 28 || plan.Unproven != 0 || plan.Floor != 30 {
		t.Fatalf("second pass: floor %d from %d, unproven %d; want 30 from 28, none", plan.Floor, plan.OldFloor, plan.Unproven)
	}
	left := listing(t, e.disk, root+"_refs/floor")
	for k := range left {
		if strings.HasSuffix(k, "floor.json") || !strings.Contains(strings.TrimPrefix(k, root+"_refs/floor/"), "-") {
			t.Fatalf("after the second raise %s is left (floor objects %v), want only stamped markers", k, left)
		}
	}
	vs, err := tb.Versions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 3 || vs[0].Version != 30 {
		t.Fatalf("%d versions from %d, want 30-32", len(vs), vs[0].Version)
	}
	if err := diffRows(latestRows(t, e.open(t)), want); err != nil {
		t.Fatal(err)
	}
}
