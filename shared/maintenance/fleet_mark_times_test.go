package maintenance_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	fleetidx "github.com/tablekeep/tablekeep/shared/fleet"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/table"
)

// TestFleetMarkTimesMatchFormat pins the mark's times to what
// docs/format.md 2.6 states (issue 19 item 9): replan_at is exactly the
// oldest tracked range's `at + ReplanAfter + 1 s`, prunable_at exactly
// `T(v+1) + R + 1 s` for the oldest retained version v in [floor, latest -
// KeepLast] (T the store time of the next stored manifest, R =
// RetentionGrace), floor the floor the pass set (not the one it read), and
// due the earliest of the rules.
func TestFleetMarkTimesMatchFormat(t *testing.T) {
	ctx := context.Background()
	p := maintenance.Policy{KeepLast: 3, Grace: time.Hour, TargetRows: 1000, ReplanAfter: 2 * time.Hour}.WithDefaults()
	f := newFleet(t, 1, p, nil)
	for i := range 5 { // v2..v6
		f.clock.Advance(time.Minute)
		f.write(t, "t000", i)
	}
	f.clock.Advance(3 * time.Hour)
	for i := 5; i < 10; i++ { // v7..v11
		f.clock.Advance(time.Minute)
		f.write(t, "t000", i)
	}
	tb := f.tables["t000"]
	oldFloor, err := tb.Floor(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f.pass(t)
	idx, err := fleetidx.Read(ctx, f.store, "wh/")
	if err != nil {
		t.Fatal(err)
	}
	m, ok := idx.Tables["t000"]
	if !ok {
		t.Fatal("no mark")
	}
	floor, err := tb.Floor(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if m.Floor != floor || floor <= oldFloor {
		t.Fatalf("mark floor %d; the pass read %d and set %d", m.Floor, oldFloor, floor)
	}
	// replan_at: the tracked ranges' send times, from the prune state.
	var at time.Time
	err = objstore.ListAll(ctx, f.store, "wh/t000/_maintenance/prune-state/", "", func(o objstore.ObjectInfo) error {
		b, err := f.store.Get(ctx, o.Key)
		if err != nil {
			return err
		}
		var st struct {
			Ranges []struct {
				At time.Time `json:"at"`
			} `json:"ranges"`
		}
		if err := json.Unmarshal(b, &st); err != nil {
			return err
		}
		at = time.Time{}
		for _, r := range st.Ranges {
			if at.IsZero() || r.At.Before(at) {
				at = r.At
			}
		}
		return nil
	})
	if err != nil || at.IsZero() {
		t.Fatalf("no tracked range (%v)", err)
	}
	if want := at.Add(p.ReplanAfter + time.Second); !m.ReplanAt.Equal(want) || m.Pending == 0 {
		t.Errorf("replan_at %v (pending %d), want at + ReplanAfter + 1 s = %v", m.ReplanAt, m.Pending, want)
	}
	// prunable_at.
	vs := storedVersions(t, tb)
	infos, err := tb.Versions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r := maintenance.RetentionGrace(tb, p)
	var want time.Time
	for i, v := range vs {
		if v >= m.Floor && v+uint64(p.KeepLast) <= m.Latest && i+1 < len(vs) {
			want = infos[i+1].Time.Add(r + time.Second)
			break
		}
	}
	if want.IsZero() || !m.PrunableAt.Equal(want) {
		t.Errorf("prunable_at %v, want T(v+1) + R + 1 s = %v (versions %v, floor %d, latest %d)", m.PrunableAt, want, vs, m.Floor, m.Latest)
	}
	if due := minT(m.ReplanAt, m.PrunableAt.Add(p.PruneMaxWait)); m.CompactFrags == 0 && !m.Due.Equal(due) {
		t.Errorf("due %v (%s), want min(replan_at, prunable_at + PruneMaxWait) = %v", m.Due, m.DueReason, due)
	}
}

func minT(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// TestFleetMarkPrunableAtUnderLease pins prunable_at under a live lease to
// docs/format.md 2.6 (issue 29 item 8): a version the lease holds (at or
// above the floor the pass set, below the floor it planned) is prunable at
// max(T(v') + R + 1 s, eff + LeaseEndStep), eff the pin's effective expiry
// (2.8) and LeaseEndStep = MaxClockSkew + 1 s = 6 s; every other retained
// version at T(v') + R + 1 s; prunable_at is the earliest.
func TestFleetMarkPrunableAtUnderLease(t *testing.T) {
	ctx := context.Background()
	p := maintenance.Policy{KeepLast: 3, Grace: time.Hour, TargetRows: 1000}.WithDefaults()
	f := newFleet(t, 1, p, nil)
	tb := f.tables["t000"]
	for i := range 5 { // v2..v6
		f.clock.Advance(time.Minute)
		f.write(t, "t000", i)
	}
	if _, err := tb.Lease(ctx, 3, 4*time.Hour); err != nil {
		t.Fatal(err)
	}
	for i := 5; i < 10; i++ { // v7..v11
		f.clock.Advance(time.Minute)
		f.write(t, "t000", i)
	}
	f.clock.Advance(3 * time.Hour)
	rep, _ := f.pass(t)
	if len(rep.Tables) != 1 || rep.Tables[0].Prune.Leased.By == nil {
		t.Fatalf("the lease did not hold the floor: %+v", rep.Tables)
	}
	pr := rep.Tables[0].Prune
	idx, err := fleetidx.Read(ctx, f.store, "wh/")
	if err != nil {
		t.Fatal(err)
	}
	m := idx.Tables["t000"]
	infos, err := tb.Versions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r := maintenance.RetentionGrace(tb, p)
	leaseEnd := pr.Leased.By.EffectiveExpiry().Add(table.MaxClockSkew + time.Second)
	if maintenance.LeaseEndStep != 6*time.Second {
		t.Errorf("LeaseEndStep %s, want 6 s (format.md 2.6)", maintenance.LeaseEndStep)
	}
	var want time.Time
	for i, v := range infos {
		if v.Version < m.Floor || v.Version+uint64(p.KeepLast) > m.Latest || i+1 >= len(infos) {
			continue
		}
		at := infos[i+1].Time.Add(r + time.Second)
		if v.Version < pr.Leased.Wanted && leaseEnd.After(at) {
			at = leaseEnd
		}
		if want.IsZero() || at.Before(want) {
			want = at
		}
	}
	if !want.Equal(leaseEnd) {
		t.Fatalf("test setup: the earliest prunable time %v is not the lease's end %v (floor %d, wanted %d, latest %d)", want, leaseEnd, m.Floor, pr.Leased.Wanted, m.Latest)
	}
	if !m.PrunableAt.Equal(want) {
		t.Errorf("prunable_at %v, want max(T(v') + R + 1 s, eff + 6 s) = %v (eff %v)", m.PrunableAt, want, pr.Leased.By.EffectiveExpiry())
	}
}
