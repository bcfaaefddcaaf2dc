package maintenance_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/table"
)

// prunesEveryPass runs n hourly passes with three writes each
// (hourlyPasses) and checks that every pass raises the floor: the
// versions stored stay bounded (KeepLast + the grace window's).
func prunesEveryPass(t *testing.T, e *env, tb *table.Table, n int, label string) {
	t.Helper()
	prev, _ := tb.Floor(context.Background())
	hourlyPasses(t, e, tb, n, 3, func(pass int, floor uint64) {
		if floor <= prev {
			t.Fatalf("%s, pass %d: floor %d -> %d: pruning stopped", label, pass, prev, floor)
		}
		if vs := storedVersions(t, tb); len(vs) > 12 {
			t.Fatalf("%s, pass %d: %d versions stored", label, pass, len(vs))
		}
		prev = floor
	})
}

// TestLeaseBelowFloorPinsNothing (issue 29 item 6): a live, well-formed
// lease name on a version already below the floor (a buggy writer of
// _leases/, a failed withdrawal) pins nothing: 24 hourly passes each raise
// the floor (before the fix the floor stayed where it was for the name's
// 7 days, versions piling up), the first of them deletes the name, and a
// renewal by its id is refused (ErrVersionPruned).
func TestLeaseBelowFloorPinsNothing(t *testing.T) {
	ctx := context.Background()
	e, ts := newTimedEnv(t, testPolicy())
	tb := e.create(t)
	for i := range 6 {
		upsert(t, tb, fmt.Sprint("k", i), "0")
	}
	e.clock.Advance(2 * time.Hour)
	if rep := leasePass(t, e, tb); rep.Prune.Floor <= 2 {
		t.Fatalf("first pass: floor %d", rep.Prune.Floor)
	}
	const id = "00000000000000b1"
	key := tb.LeaseDir().Dir + table.LeaseName(1, e.clock.Now().Add(table.MaxLeaseTTL), id)
	if err := ts.Put(ctx, key, []byte("{}")); err != nil {
		t.Fatal(err)
	}
	prunesEveryPass(t, e, tb, 24, "below the floor")
	if set, err := tb.Leases(ctx); err != nil || len(set.Names) != 0 {
		t.Fatalf("the name below the floor was not deleted: %+v %v", set.Names, err)
	}
	// Written again (the buggy writer): renewing it by id is refused.
	if err := ts.Put(ctx, key, []byte("{}")); err != nil {
		t.Fatal(err)
	}
	l, err := tb.LeaseDir().Find(ctx, id)
	if err == nil {
		err = l.Renew(ctx, table.MaxLeaseTTL)
	}
	if !errors.Is(err, table.ErrVersionPruned) {
		t.Fatalf("renewal by id below the floor: %v, want ErrVersionPruned", err)
	}
}

// TestUnparseableLeaseNamesPinNothing (issue 29 item 6): 4,001 fresh
// malformed names under _leases/ pin nothing and do not count towards the
// listing's bound: a day of hourly passes each raises the floor (before
// the fix every pass failed with ErrTooManyLeases). Once older than
// MaxLeaseTTL + MaxClockSkew they are deleted by the raising passes, at
// most 1,000 a pass (one DeleteObjects): five passes.
func TestUnparseableLeaseNamesPinNothing(t *testing.T) {
	ctx := context.Background()
	e, ts := newTimedEnv(t, testPolicy())
	tb := e.create(t)
	dir := tb.LeaseDir().Dir
	const n = 4*table.MaxLeases + 1
	for i := range n {
		if err := ts.Put(ctx, fmt.Sprintf("%sjunk-%05d", dir, i), nil); err != nil {
			t.Fatal(err)
		}
	}
	prunesEveryPass(t, e, tb, 24, "junk names")
	if set, err := tb.Leases(ctx); err != nil || len(set.Malformed) != n {
		t.Fatalf("after a day: %d malformed names (want %d, all fresh), %v", len(set.Malformed), n, err)
	}
	e.clock.Advance(table.MaxLeaseTTL + table.MaxClockSkew)
	prunesEveryPass(t, e, tb, 5, "old junk names")
	if set, err := tb.Leases(ctx); err != nil || len(set.Malformed) != 0 {
		t.Fatalf("after five passes past the bound: %d malformed names left, %v", len(set.Malformed), err)
	}
}
