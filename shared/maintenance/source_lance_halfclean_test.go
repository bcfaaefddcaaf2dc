package maintenance_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/formats"
	"github.com/tablekeep/tablekeep/shared/internal/fakeclock"
	"github.com/tablekeep/tablekeep/shared/lance"
	"github.com/tablekeep/tablekeep/shared/lance/lancetest"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/table"
)

// planLancePrune makes a LanceDB dataset of versions versions under base
// (wh/ds.lance/) and prunes it once on disk at now (2 h ahead: every
// version past its grace): the floor raised and the ranges of at most
// rangeVersions versions planned, their messages returned, not cleaned.
func planLancePrune(t *testing.T, base string, versions int, rangeVersions uint64) (maintenance.TableRef, maintenance.Policy, time.Time, maintenance.PrunePlan, [][]byte) {
	t.Helper()
	ctx := context.Background()
	lancetest.Create(t, filepath.Join(base, "wh"), "ds", versions, "")
	p := maintenance.Policy{Grace: time.Hour, KeepLast: 2, RangeVersions: rangeVersions, DeleteBatch: 3, MaxKeysPerRun: 100000}
	ref := maintenance.TableRef{Name: "ds", Root: "wh/ds.lance/", Policy: p, Format: formats.Lance}
	now := time.Now().Add(2 * time.Hour)
	disk, err := objstore.NewDisk(base)
	if err != nil {
		t.Fatal(err)
	}
	src, err := formats.Open(ctx, disk, ref)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := maintenance.PlanSourcePrune(ctx, src, ref.Name, p, now)
	if err != nil {
		t.Fatal(err)
	}
	rec := &bodies{}
	if err := maintenance.ApplySourcePrune(ctx, src, &plan, rec); err != nil {
		t.Fatal(err)
	}
	return ref, p, now, plan, rec.take()
}

// halfCleanFixture is a LanceDB dataset pruned once: the floor raised and
// the ranges planned at now, their messages returned (not cleaned).
func halfCleanFixture(t *testing.T) (objstore.Store, maintenance.TableRef, maintenance.Policy, time.Time, [][]byte) {
	t.Helper()
	base := t.TempDir()
	ref, p, now, plan, bs := planLancePrune(t, base, 16, 4)
	if len(bs) < 2 {
		t.Fatalf("want at least 2 ranges: %v", plan.Ranges)
	}
	disk, err := objstore.NewDisk(base)
	if err != nil {
		t.Fatal(err)
	}
	return disk, ref, p, now, bs
}

// TestLanceHalfCleanedRangeResentByNextPass: a Lance range's cleanup cut
// off after its manifests (every data-file DELETE fails, the message then
// lost) leaves no listed version without its files, and the very next
// pass, 1 ns later on the fake clock and so long before ReplanAfter (6 h)
// re-plans the range it sent, sends the range again (PrunePlan.Resumed);
// cleaning it leaves no half-cleaned range. Before the fix the files went
// first, the versions stayed listed without them, and no pass sent the
// range again until ReplanAfter had passed.
func TestLanceHalfCleanedRangeResentByNextPass(t *testing.T) {
	ctx := context.Background()
	disk, ref, p, now, bs := halfCleanFixture(t)
	cat := &memCatalog{refs: []maintenance.TableRef{ref}}
	faulty := objstore.NewFaulty(disk)
	// Every DELETE of files (not manifests, not the sidecar) fails.
	faulty.SetBefore(func(_ int64, op objstore.Op) error {
		if op.Kind == objstore.KindDelete && slices.ContainsFunc(op.Keys, func(k string) bool {
			return !strings.HasPrefix(k, ref.Root+lance.VersionsDir) && !strings.HasPrefix(k, ref.Root+lance.SidecarDir)
		}) {
			return objstore.ErrInjected
		}
		return nil
	})
	rec := &bodies{}
	c := &maintenance.Cleaner{Store: faulty, Tables: cat, Requeue: rec, Logger: discard, Sources: formats.Open,
		OpenOpts: table.Options{Clock: fakeclock.New(now)}} // the age rule: at the planner's time
	if _, err := c.Clean(ctx, bs[0]); err == nil {
		t.Fatal("the cut-off cleanup succeeded")
	}
	msg, _ := maintenance.DecodeRangeMessage(bs[0])
	src, err := formats.Open(ctx, disk, ref)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := maintenance.PlanSourcePrune(ctx, src, ref.Name, p, now.Add(time.Nanosecond))
	if err != nil {
		t.Fatal(err)
	}
	// Not yet due by ReplanAfter: only the half-cleaned range is sent.
	if plan.Resumed != 1 || plan.Replanned != 0 || len(plan.Ranges) != 1 || plan.Ranges[0].From != msg.From || plan.Ranges[0].To != msg.To {
		t.Fatalf("pass at +1ns: resumed %d, replanned %d, ranges %v; want [%d, %d] sent again", plan.Resumed, plan.Replanned, plan.Ranges, msg.From, msg.To)
	}
	if err := maintenance.ApplySourcePrune(ctx, src, &plan, rec); err != nil {
		t.Fatal(err)
	}
	c = &maintenance.Cleaner{Store: disk, Tables: cat, Requeue: rec, Logger: discard, Sources: formats.Open,
		OpenOpts: table.Options{Clock: fakeclock.New(now)}} // the age rule: at the planner's time
	cleanAll(t, c, rec, rec.take())
	src, _ = formats.Open(ctx, disk, ref)
	if err := src.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	if h := src.(maintenance.ListedBelowFloor).HalfCleaned(); len(h) != 0 {
		t.Fatalf("half-cleaned ranges left after the resent range: %v", h)
	}
}

// TestStatusReportsDamagedLanceVersions: a listed version below the floor
// whose data file is gone (what a cleanup of an earlier release, cut off
// after a range's files and before its manifests, left) makes Status
// report it (Health.Damaged, DamageComplete), at a pinned cost: with 3
// versions below the floor, 4 GETs (the floor's manifest and theirs) and
// one HEAD per file they reference that the floor's version does not. A
// dataset with no version below the floor costs nothing more. Before the
// fix status said nothing of it.
func TestStatusReportsDamagedLanceVersions(t *testing.T) {
	ctx := context.Background()
	disk, ref, _, now, _ := halfCleanFixture(t)
	src, err := formats.Open(ctx, disk, ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := src.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	floor, err := src.Floor(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ds := lance.Open(disk, ref.Root)
	vs, err := ds.ListVersions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	refsOf := func(v uint64) map[string]bool {
		for _, vf := range vs {
			if vf.Version == v {
				m, err := ds.ReadManifest(ctx, vf)
				if err != nil {
					t.Fatal(err)
				}
				out := map[string]bool{}
				for _, k := range m.Keys() {
					out[k] = true
				}
				return out
			}
		}
		t.Fatalf("version %d not stored", v)
		return nil
	}
	kept := refsOf(floor)
	// Remove one file of the lowest stored version that the floor's
	// version does not reference.
	var gone string
	for k := range refsOf(vs[0].Version) {
		if !kept[k] && strings.HasPrefix(k, lance.DataDir) {
			gone = k
			break
		}
	}
	if gone == "" {
		t.Fatal("no file of version 1 to remove")
	}
	if err := disk.Delete(ctx, []string{ref.Root + gone}); err != nil {
		t.Fatal(err)
	}
	// Of the lowest 8 versions below the floor (the check's bound).
	var want []uint64
	checked := 0
	for _, vf := range vs {
		if vf.Version < floor && checked < 8 {
			checked++
			if refsOf(vf.Version)[gone] {
				want = append(want, vf.Version)
			}
		}
	}
	h, _, _, err := maintenance.Status(ctx, disk, ref, formats.Open, now)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(h.Damaged, want) || h.DamageComplete != (floor-vs[0].Version <= 8) {
		t.Fatalf("damaged %v (complete %v), want %v; reason %q", h.Damaged, h.DamageComplete, want, h.DamageReason())
	}
	t.Logf("floor %d: %s", floor, h.DamageReason())

	// The cost of the check alone, after Prepare.
	cnt := objstore.NewCounting(disk)
	lsrc := lance.NewSource(cnt, ref.Root)
	if err := lsrc.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	var below []uint64
	lookups := map[string]bool{}
	for _, vf := range vs {
		if vf.Version < floor {
			below = append(below, vf.Version)
			if len(below) <= 8 {
				for k := range refsOf(vf.Version) {
					if !kept[k] {
						lookups[k] = true
					}
				}
			}
		}
	}
	before := cnt.Counts()
	if _, _, err := lsrc.ListedUnreadable(ctx, below, floor); err != nil {
		t.Fatal(err)
	}
	got := cnt.Counts().Sub(before)
	if n := min(len(below), 8); got.Get != int64(n+1) || got.Head+got.List != int64(min(len(lookups), 64)) {
		t.Fatalf("the check made %+v, want %d GETs and %d HEAD or LIST", got, n+1, min(len(lookups), 64))
	}
	before = cnt.Counts()
	if _, _, err := lsrc.ListedUnreadable(ctx, nil, floor); err != nil {
		t.Fatal(err)
	}
	if got := cnt.Counts().Sub(before); got.Total() != 0 {
		t.Fatalf("nothing below the floor: the check made %+v", got)
	}
}
