package maintenance_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/formats"
	"github.com/tablekeep/tablekeep/shared/lance"
	"github.com/tablekeep/tablekeep/shared/lance/lancetest"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
)

// halfCleanFixture is a LanceDB dataset pruned once: the floor raised and
// the ranges planned at now, their messages returned (not cleaned).
func halfCleanFixture(t *testing.T) (objstore.Store, maintenance.TableRef, maintenance.Policy, time.Time, [][]byte) {
	t.Helper()
	ctx := context.Background()
	base := t.TempDir()
	lancetest.Create(t, filepath.Join(base, "wh"), "ds", 16, "")
	p := maintenance.Policy{Grace: time.Hour, KeepLast: 2, RangeVersions: 4, DeleteBatch: 3, MaxKeysPerRun: 100000}
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
	bs := rec.take()
	if len(bs) < 2 {
		t.Fatalf("want at least 2 ranges: %v", plan.Ranges)
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
	c := &maintenance.Cleaner{Store: faulty, Tables: cat, Requeue: rec, Logger: discard, Sources: formats.Open}
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
	c = &maintenance.Cleaner{Store: disk, Tables: cat, Requeue: rec, Logger: discard, Sources: formats.Open}
	cleanAll(t, c, rec, rec.take())
	src, _ = formats.Open(ctx, disk, ref)
	if err := src.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	if h := src.(maintenance.ListedBelowFloor).HalfCleaned(); len(h) != 0 {
		t.Fatalf("half-cleaned ranges left after the resent range: %v", h)
	}
}
