package maintenance

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/tablekeep/tablekeep/shared/dataset"
	"github.com/tablekeep/tablekeep/shared/table"
)

// PlanPruneAfterCompaction is PlanPrune as the real run computes it: after
// the compaction it plans has committed `commits` versions (one per group)
// at about now. The dry run uses it, so that a dry run followed by a real
// run on an unchanged table plans the same floor and ranges: with KeepLast
// N, the compaction's commits move the newest-N window up by `commits`.
// The modelled versions are never prunable (they are the newest), and
// PrunePlan.Versions counts stored versions only.
func PlanPruneAfterCompaction(ctx context.Context, t *table.Table, name string, p Policy, now time.Time, commits int) (PrunePlan, error) {
	return planPrune(ctx, &TableSource{T: t}, name, p, now, commits, false)
}

// withCommits returns vs followed by n versions written at now (each
// superseding the one before at now).
func withCommits(vs []dataset.VersionInfo, n int, now time.Time) []dataset.VersionInfo {
	if n <= 0 || len(vs) == 0 {
		return vs
	}
	out := slices.Clone(vs)
	out[len(out)-1].GraceFrom = now
	last := vs[len(vs)-1].Version
	for i := range n {
		v := dataset.VersionInfo{Version: last + uint64(i) + 1, Time: now}
		if i+1 < n {
			v.GraceFrom = now
		}
		out = append(out, v)
	}
	return out
}

// Kept is one run of stored versions the plan keeps, with the reason.
type Kept struct {
	From, To uint64
	// Reason: "keep-last N", "grace until T" (superseded less than the
	// retention grace ago; prunable from T), "tag NAME", "lease ID on
	// version V until T" (a reader lease holds the floor at V), or "at or above
	// the retention floor" (kept because the floor, which only rises, is
	// already above an older kept version).
	Reason string
	// Until is, for grace, when the last version of the run leaves it.
	Until time.Time `json:",omitzero"`
}

// Kept says why each stored version at or above the floor, and each tagged
// version below it, is kept: the newest KeepLast (keep-last), those
// superseded less than the retention grace ago (grace until T), tagged
// versions (tag NAME). Runs of versions with the same reason are merged.
func (plan *PrunePlan) Kept() []Kept {
	var out []Kept
	if len(plan.vs) == 0 {
		return nil
	}
	names := map[uint64][]string{}
	for n, v := range plan.tags {
		names[v] = append(names[v], n)
	}
	keepFrom := uint64(1)
	if plan.Latest > uint64(plan.policy.KeepLast) {
		keepFrom = plan.Latest - uint64(plan.policy.KeepLast) + 1
	}
	add := func(v uint64, reason string, until time.Time) {
		if n := len(out); n > 0 && out[n-1].Reason == reason && out[n-1].To+1 == v {
			out[n-1].To = v
			if until.After(out[n-1].Until) {
				out[n-1].Until = until
			}
			return
		}
		out = append(out, Kept{From: v, To: v, Reason: reason, Until: until})
	}
	for i, v := range plan.vs {
		if i >= plan.Versions {
			break // modelled compaction commits: not stored yet
		}
		switch {
		case v.Version < plan.Floor:
			if ns := names[v.Version]; len(ns) > 0 {
				slices.Sort(ns)
				add(v.Version, "tag "+ns[0], time.Time{})
			}
		case plan.heldByLease(v.Version):
			by := plan.Leased.By
			add(v.Version, fmt.Sprintf("lease %s on version %d until %s", by.ID, by.Version, by.EffectiveExpiry().UTC().Format(time.RFC3339)), time.Time{})
		case v.Version >= keepFrom:
			add(v.Version, fmt.Sprintf("keep-last %d", plan.policy.KeepLast), time.Time{})
		case !v.GraceFrom.IsZero() && plan.now.Sub(v.GraceFrom) <= plan.grace:
			add(v.Version, "grace", v.GraceFrom.Add(plan.grace).UTC().Truncate(time.Second).Add(time.Second))
		default:
			add(v.Version, "at or above the retention floor", time.Time{})
		}
	}
	// Grace runs: one reason for the run, with its latest time.
	for i := range out {
		if !out[i].Until.IsZero() {
			out[i].Reason = "grace until " + out[i].Until.Format(time.RFC3339)
		}
	}
	return out
}

// CompactionLeftover is what compaction leaves for the next pass: the
// candidate fragments (by the planner's rule) in groups beyond the plan's
// per-run limits (MaxGroups, MaxInputBytes).
func CompactionLeftover(m *table.Manifest, p Policy, plan CompactionPlan) (groups, fragments int) {
	p = p.WithDefaults()
	p.MaxGroups, p.MaxInputBytes = math.MaxInt, math.MaxUint64
	all := SizePlanner{}.Plan(m, p)
	planned := 0
	for _, g := range plan.Groups {
		planned += len(g.Fragments)
	}
	total := 0
	for _, g := range all.Groups {
		total += len(g.Fragments)
	}
	return len(all.Groups) - len(plan.Groups), total - planned
}
