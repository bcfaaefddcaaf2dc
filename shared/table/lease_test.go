package table

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/internal/fakeclock"
	"github.com/tablekeep/tablekeep/shared/internal/testkit"
	"github.com/tablekeep/tablekeep/shared/objstore"
)

func leaseTable(t *testing.T) (*Table, *fakeclock.Clock, objstore.Store) {
	return leaseTableOn(t, testkit.DiskStore(t))
}

func leaseTableOn(t *testing.T, inner objstore.Store) (*Table, *fakeclock.Clock, objstore.Store) {
	t.Helper()
	ctx := context.Background()
	clk := fakeclock.New(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	st := fakeclock.NewStore(inner, clk)
	tbl := must(Create(ctx, st, "t", regSchema, "name", Options{Clock: fakeclock.NoSleep(clk)}))
	must(tbl.Append(ctx, regBatch(row{"a", "1", 1}))) // v2
	return tbl, clk, st
}

// TestLeaseNameRoundTrip: names are fixed width, sort by version, and
// parse back; every malformed form is refused with ErrInvalidLease.
func TestLeaseNameRoundTrip(t *testing.T) {
	exp := time.Date(2030, 1, 1, 0, 0, 0, 123e6, time.UTC)
	n := LeaseName(42, exp, "0123456789abcdef")
	if n != "00000000000000000042-00000001893456000123-0123456789abcdef" {
		t.Fatalf("name %q", n)
	}
	l, err := ParseLeaseName(n)
	if err != nil || l.Version != 42 || !l.Expires.Equal(exp) || l.ID != "0123456789abcdef" {
		t.Fatalf("parse %q: %+v %v", n, l, err)
	}
	if a, b := LeaseName(9, exp, "ffffffffffffffff"), LeaseName(10, exp, "0000000000000000"); a >= b {
		t.Fatalf("names do not sort by version: %q >= %q", a, b)
	}
	max := fmt.Sprintf("%020d-%020d-%s", uint64(math.MaxUint64), int64(math.MaxInt64), "ffffffffffffffff")
	if l, err := ParseLeaseName(max); err != nil || l.Version != math.MaxUint64 {
		t.Fatalf("limits: %+v %v", l, err)
	}
	for _, bad := range []string{
		"", "x", n + "0", n[:len(n)-1],
		strings.Replace(n, "-", "_", 1),
		"00000000000000000000-00000001893456000123-0123456789abcdef", // version 0
		"99999999999999999999-00000001893456000123-0123456789abcdef", // > MaxUint64
		"00000000000000000042-99999999999999999999-0123456789abcdef", // > MaxInt64 ms
		"00000000000000000042-0000000189345600012x-0123456789abcdef",
		"+0000000000000000042-00000001893456000123-0123456789abcdef",
		"00000000000000000042-00000001893456000123-0123456789ABCDEF", // upper-case id
		"00000000000000000042-00000001893456000123-0123456789abcdeg",
		"00000000000000000042-00000001893456000123-../../../../data",
	} {
		if _, err := ParseLeaseName(bad); !errors.Is(err, ErrInvalidLease) {
			t.Errorf("ParseLeaseName(%q) = %v, want ErrInvalidLease", bad, err)
		}
	}
}

// TestLeaseLifecycle: a lease pins its version while live; a renewal
// writes the new name before the old one goes; release deletes it; the
// rule ignores a lease only past expiry + MaxClockSkew (both sides). On
// disk and on S3 (versitygw).
func TestLeaseLifecycle(t *testing.T) {
	storeKinds(t, func(t *testing.T, newStore func(t *testing.T) objstore.Store) { leaseLifecycle(t, newStore(t)) })
}

func leaseLifecycle(t *testing.T, inner objstore.Store) {
	ctx := context.Background()
	tbl, clk, _ := leaseTableOn(t, inner)
	l, err := tbl.Lease(ctx, 2, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	set := must(tbl.Leases(ctx))
	pin, ok := set.Pin(clk.Now(), 0)
	if !ok || pin.Version != 2 || pin.ID != l.ID() {
		t.Fatalf("pin %+v %v", pin, ok)
	}
	exp := l.Expires()
	if !pin.Live(exp.Add(MaxClockSkew)) || pin.Live(exp.Add(MaxClockSkew+time.Millisecond)) {
		t.Fatalf("live at expiry+skew / +1ms: %v %v", pin.Live(exp.Add(MaxClockSkew)), pin.Live(exp.Add(MaxClockSkew+time.Millisecond)))
	}
	clk.Advance(10 * time.Minute)
	if err := l.RenewDue(ctx, time.Hour); err != nil {
		t.Fatal(err)
	}
	if got := l.Expires(); !got.Equal(exp) {
		t.Fatalf("renewed after a sixth of the ttl: %v", got)
	}
	clk.Advance(11 * time.Minute)
	if err := l.RenewDue(ctx, time.Hour); err != nil {
		t.Fatal(err)
	}
	set = must(tbl.Leases(ctx))
	if len(set.Names) != 2 || len(set.Live(clk.Now())) != 1 {
		t.Fatalf("after a renewal: %d names, %d live", len(set.Names), len(set.Live(clk.Now())))
	}
	if p, _ := set.Pin(clk.Now(), 0); !p.Expires.Equal(clk.Now().Add(time.Hour)) {
		t.Fatalf("pin takes the latest expiry of the id: %v", p.Expires)
	}
	for range 3 {
		clk.Advance(30 * time.Minute)
		if err := l.Renew(ctx, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(must(tbl.Leases(ctx)).Names); n != 2 {
		t.Fatalf("%d names after renewals, want 2 (current and previous)", n)
	}
	// Another process finds it by id and releases it.
	f, err := tbl.LeaseDir().Find(ctx, l.ID())
	if err != nil || f.Version() != 2 {
		t.Fatalf("find: %v", err)
	}
	if err := f.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if set := must(tbl.Leases(ctx)); len(set.Names) != 0 {
		t.Fatalf("after release: %+v", set.Names)
	}
	if _, err := tbl.LeaseDir().Find(ctx, l.ID()); !errors.Is(err, ErrLeaseNotFound) {
		t.Fatalf("find released: %v", err)
	}
}

// TestLeaseBadInput: a ttl over the maximum, a version in the future, a
// pruned version, one too old to lease safely, one lease too many: each a
// clear error, and nothing is left behind.
func TestLeaseBadInput(t *testing.T) {
	ctx := context.Background()
	tbl, clk, st := leaseTable(t)
	for _, ttl := range []time.Duration{0, -time.Second, MaxLeaseTTL + time.Millisecond} {
		if _, err := tbl.Lease(ctx, 2, ttl); !errors.Is(err, ErrInvalidLease) {
			t.Errorf("ttl %s: %v, want ErrInvalidLease", ttl, err)
		}
	}
	if _, err := tbl.Lease(ctx, 2, MaxLeaseTTL); err != nil {
		t.Errorf("ttl = MaxLeaseTTL refused: %v", err)
	}
	if _, err := tbl.Lease(ctx, 3, time.Hour); !errors.Is(err, ErrInvalidLease) || !strings.Contains(err.Error(), "future") {
		t.Errorf("future version: %v", err)
	}
	if _, err := tbl.Lease(ctx, math.MaxUint64, time.Hour); !errors.Is(err, ErrInvalidLease) {
		t.Errorf("version MaxUint64: %v", err)
	}
	if _, err := tbl.LeaseDir().Find(ctx, "../x"); !errors.Is(err, ErrInvalidLease) {
		t.Errorf("bad id: %v", err)
	}
	must(tbl.Append(ctx, regBatch(row{"b", "1", 1}))) // v3
	// v1 was superseded at T0: past the lease window after WriterGrace - SafetyMargin.
	clk.Advance(LeaseWindow(tbl.WriterGrace()))
	if l, err := tbl.Lease(ctx, 2, time.Hour); err != nil {
		t.Fatalf("v2 at the edge of the window: %v", err)
	} else {
		_ = l.Release(ctx)
	}
	clk.Advance(time.Millisecond)
	if _, err := tbl.Lease(ctx, 2, time.Hour); !errors.Is(err, ErrLeaseWindow) {
		t.Errorf("v2 past the window: %v, want ErrLeaseWindow", err)
	}
	if _, err := tbl.Lease(ctx, 3, time.Hour); err != nil {
		t.Errorf("the latest is always leasable: %v", err)
	}
	if err := tbl.SetFloor(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.Lease(ctx, 2, time.Hour); !errors.Is(err, ErrVersionPruned) {
		t.Errorf("below the floor: %v, want ErrVersionPruned", err)
	}
	// Too many: MaxLeases live leases (written directly), then one more.
	dir := tbl.LeaseDir().Dir
	// The v3 lease is live; the MaxLeaseTTL one, on v2, is below the
	// floor: it pins nothing and does not count (issue 29 item 6).
	for i := range MaxLeases - 1 {
		if err := st.Put(ctx, dir+LeaseName(3, clk.Now().Add(time.Hour), fmt.Sprintf("%016x", i+1)), nil); err != nil {
			t.Fatal(err)
		}
	}
	before := must(tbl.Leases(ctx))
	if _, err := tbl.Lease(ctx, 3, time.Hour); !errors.Is(err, ErrTooManyLeases) {
		t.Errorf("lease %d: %v, want ErrTooManyLeases", MaxLeases+1, err)
	}
	if after := must(tbl.Leases(ctx)); len(after.Names) != len(before.Names) {
		t.Errorf("a refused lease left a name: %d -> %d", len(before.Names), len(after.Names))
	}
}

// TestForgedLeaseBounded: names claiming an expiry far beyond MaxLeaseTTL
// expire MaxLeaseTTL + MaxClockSkew after they were written; malformed
// names pin nothing and are stale after the same bound.
func TestForgedLeaseBounded(t *testing.T) {
	ctx := context.Background()
	tbl, clk, st := leaseTable(t)
	dir := tbl.LeaseDir().Dir
	t0 := clk.Now()
	forged := dir + fmt.Sprintf("%020d-%020d-%s", 2, int64(math.MaxInt64), "00000000000000aa")
	must0(t, st.Put(ctx, forged, []byte("not json")))
	must0(t, st.Put(ctx, dir+"garbage", []byte("{")))
	must0(t, st.Put(ctx, dir+"00000000000000000002-00000000000000000001-zz", nil))
	set := must(tbl.Leases(ctx))
	if len(set.Names) != 1 || len(set.Malformed) != 2 {
		t.Fatalf("names %d malformed %d", len(set.Names), len(set.Malformed))
	}
	bound := t0.Add(MaxLeaseTTL + 2*MaxClockSkew)
	if _, ok := set.Pin(bound, 0); !ok {
		t.Fatal("forged lease not honoured within its bound")
	}
	if _, ok := set.Pin(bound.Add(time.Millisecond), 0); ok {
		t.Fatal("forged lease pins past MaxLeaseTTL + 2 x MaxClockSkew after it was written")
	}
	if n := len(set.Stale(t0.Add(MaxLeaseTTL+MaxClockSkew), 0)); n != 0 {
		t.Fatalf("%d stale at the bound", n)
	}
	if n := len(set.Stale(bound.Add(time.Millisecond), 0)); n != 3 {
		t.Fatalf("%d stale past the bound, want 3", n)
	}
}

func must0(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestSnapshotHoldRenewsInBackground: Hold takes a lease on the snapshot's
// version and KeepAlive renews it in real time; stop releases it.
func TestSnapshotHoldRenewsInBackground(t *testing.T) {
	ctx := context.Background()
	tbl := must(Create(ctx, testkit.DiskStore(t), "t", regSchema, "name", Options{Clock: fakeclock.NoSleep(nil)}))
	must(tbl.Append(ctx, regBatch(row{"a", "1", 1})))
	snap := tbl.Snapshot()
	const ttl = 600 * time.Millisecond
	l, stop, err := snap.Hold(ctx, ttl)
	if err != nil {
		t.Fatal(err)
	}
	first := l.Expires()
	time.Sleep(2 * ttl)
	if !l.Expires().After(first) {
		t.Fatalf("not renewed: expires %v, first %v", l.Expires(), first)
	}
	if pin, ok := must(tbl.Leases(ctx)).Pin(time.Now(), 0); !ok || pin.ID != l.ID() || pin.Version != snap.Version() {
		t.Fatalf("pin after %s: %+v %v", 2*ttl, pin, ok)
	}
	if err := stop(ctx); err != nil {
		t.Fatal(err)
	}
	if set := must(tbl.Leases(ctx)); len(set.Names) != 0 {
		t.Fatalf("after stop: %+v", set.Names)
	}
}

// TestSlowRenewalIsCheckedAsNew: a renewal whose new name lands more than
// MaxCommitDuration after it started cannot rely on the old name having
// covered the gap (a planner may have seen neither live): its name is
// withdrawn and it is checked as a new lease, refused once the floor
// passed the version.
func TestSlowRenewalIsCheckedAsNew(t *testing.T) {
	ctx := context.Background()
	clk := fakeclock.New(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	f := objstore.NewFaulty(fakeclock.NewStore(testkit.DiskStore(t), clk))
	tbl := must(Create(ctx, f, "t", regSchema, "name", Options{Clock: fakeclock.NoSleep(clk)}))
	must(tbl.Append(ctx, regBatch(row{"a", "1", 1}))) // v2
	l, err := tbl.Lease(ctx, 2, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	must(tbl.Append(ctx, regBatch(row{"b", "1", 1}))) // v3
	must0(t, tbl.SetFloor(ctx, 3))
	clk.Advance(time.Minute)
	slow := true
	f.SetBefore(func(_ int64, op objstore.Op) error {
		if slow && op.Kind == objstore.KindPut && strings.Contains(op.Key, LeasesPrefix) {
			slow = false
			clk.Advance(MaxCommitDuration + time.Millisecond)
		}
		return nil
	})
	if err := l.Renew(ctx, time.Hour); !errors.Is(err, ErrVersionPruned) {
		t.Fatalf("slow renewal after the floor passed: %v, want ErrVersionPruned", err)
	}
	set := must(tbl.Leases(ctx))
	if len(set.Names) != 1 || set.Names[0].Expires.After(l.Expires()) {
		t.Fatalf("names after a refused slow renewal: %+v (want only the old one)", set.Names)
	}
}

// TestRefusedLeaseLeavesNothingLive (issue 29 item 6): an acquire finds,
// after writing its name, that the floor passed its version, and its
// withdrawal (DELETE) fails. The withdrawal is retried (a first failure
// leaves no name); when every DELETE fails, the name that stays cannot be
// renewed by id: Find, then Renew, is refused with ErrVersionPruned and
// writes nothing (before the fix the renewal wrote a new name a week
// long).
func TestRefusedLeaseLeavesNothingLive(t *testing.T) {
	for _, failures := range []int{1, 1 << 30} {
		t.Run(fmt.Sprint("delete failures ", failures), func(t *testing.T) {
			ctx := context.Background()
			clk := fakeclock.New(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
			inner := fakeclock.NewStore(testkit.DiskStore(t), clk)
			f := objstore.NewFaulty(inner)
			tbl := must(Create(ctx, f, "t", regSchema, "name", Options{Clock: fakeclock.NoSleep(clk)}))
			must(tbl.Append(ctx, regBatch(row{"a", "1", 1}))) // v2
			must(tbl.Append(ctx, regBatch(row{"b", "1", 1}))) // v3
			raised, failed := false, 0
			f.SetBefore(func(_ int64, op objstore.Op) error {
				switch {
				case op.Kind == objstore.KindPut && strings.Contains(op.Key, LeasesPrefix) && !raised:
					// A planner raises the floor past 2 between the check and the PUT.
					raised = true
					must0(t, Handle(inner, "t", Options{Clock: fakeclock.NoSleep(clk)}).SetFloor(ctx, 3))
				case op.Kind == objstore.KindDelete && strings.Contains(op.Key+strings.Join(op.Keys, ","), LeasesPrefix) && failed < failures:
					failed++
					return errors.New("injected: delete failed")
				}
				return nil
			})
			if _, err := tbl.Lease(ctx, 2, time.Hour); !errors.Is(err, ErrVersionPruned) {
				t.Fatalf("acquire below the floor: %v, want ErrVersionPruned", err)
			}
			set := must(tbl.Leases(ctx))
			if failures == 1 {
				if len(set.Names) != 0 {
					t.Fatalf("withdrawal failed once: %+v left", set.Names)
				}
				return
			}
			if len(set.Names) != 1 {
				t.Fatalf("names after the refused acquire: %+v", set.Names)
			}
			f.SetBefore(nil)
			id := set.Names[0].ID
			clk.Advance(time.Minute)
			l, err := tbl.LeaseDir().Find(ctx, id)
			if err == nil {
				err = l.Renew(ctx, MaxLeaseTTL)
			}
			if !errors.Is(err, ErrVersionPruned) {
				t.Fatalf("renewal by id below the floor: %v, want ErrVersionPruned", err)
			}
			if after := must(tbl.Leases(ctx)); len(after.Names) != 1 || after.Names[0].Key != set.Names[0].Key {
				t.Fatalf("a refused renewal wrote %+v", after.Names)
			}
		})
	}
}
