package maintenance

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/tablekeep/tablekeep/shared/clock"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/table"
)

// Health is a table's maintenance backlog as the planners see it now, and
// when it shrinks: what `tablekeep status` reports.
type Health struct {
	Latest   uint64
	Floor    uint64 // the floor the prune planner would set now
	Versions int    // stored
	// PrunableNow: stored versions below that floor, untagged (what the
	// next pass deletes). PrunableSince: when the oldest of them became
	// prunable (left the newest KeepLast and its grace window).
	PrunableNow   int
	PrunableSince time.Time
	// PrunableLater: versions outside the newest KeepLast, untagged, still
	// in their grace window; all are prunable from PrunableAt.
	PrunableLater int
	PrunableAt    time.Time
	Tagged        int // tagged versions below the floor (kept)
	// Compactable: fragments in the groups the compaction planner forms
	// (its own rule, without the per-run limits); CompactableSince: when
	// the oldest of them was written.
	Compactable      int
	CompactGroups    int
	CompactableSince time.Time
	// CompactBound: Compactable is behind only from this many fragments
	// (0: from one). A BacklogPlanner's dataset (Lance) has no fragment
	// write times, so its CompactableSince is the latest version's time
	// (every fragment of it is at least that old) and its bound is the
	// policy's CompactMinFragments, the fleet's own trigger.
	CompactBound int
	// Kept: fragments the compaction planner leaves, by reason (a
	// BacklogPlanner's: indexed, several data files, ...); DeletedRows of
	// PhysicalRows are masked by deletions (a LatestStatser's).
	Kept                      map[string]int
	CompactRefused            string // a BacklogPlanner's Backlog.Refused
	DeletedRows, PhysicalRows uint64
	Fragments                 int
	Rows                      uint64
	// Damaged: listed versions below the floor whose manifests reference a
	// file that is gone (a DamageChecker's; DamageComplete: every stored
	// version below the floor was checked fully). HalfCleaned: ranges
	// whose manifests are gone and whose files may not be (the next pass
	// sends them again).
	Damaged        []uint64
	DamageComplete bool
	HalfCleaned    int
	// Plan is the prune plan the health was computed from (its Leased
	// field: the lease holding the floor down, if any).
	Plan PrunePlan `json:"-"`
}

// TableHealth computes t's Health at now with ref's policy (reads only:
// listings, floor, tags, the prune state; the manifest t holds).
func TableHealth(ctx context.Context, t *table.Table, ref TableRef, now time.Time) (Health, error) {
	return SourceHealth(ctx, &TableSource{T: t}, ref, now)
}

// SourceHealth computes a dataset's Health at now with ref's policy, from
// the prune plan a pass would make (PlanSourcePrune: a format that derives
// its change records derives them; open src on a dry view to write
// nothing) and, for a TableBacked source, the compaction planner's view of
// the manifest its table holds (a LatestStatser gives rows and fragments).
func SourceHealth(ctx context.Context, src Source, ref TableRef, now time.Time) (Health, error) {
	p := ref.Policy.WithDefaults()
	var h Health
	plan, err := PlanSourcePrune(ctx, src, ref.Name, p, now)
	if err != nil {
		return h, err
	}
	h.Latest, h.Floor, h.Versions, h.PrunableNow, h.Tagged = plan.Latest, plan.Floor, plan.Versions, plan.Prunable, len(plan.Tagged)
	h.Plan = plan
	h.HalfCleaned = len(plan.halfCleaned)
	h.DamageComplete = true
	if dc, ok := src.(DamageChecker); ok {
		var below []uint64
		for _, v := range plan.vs {
			if v.Version < plan.OldFloor {
				below = append(below, v.Version)
			}
		}
		if h.Damaged, h.DamageComplete, err = dc.ListedUnreadable(ctx, below, plan.OldFloor); err != nil {
			return h, err
		}
	}
	tagged := map[uint64]bool{}
	for _, v := range plan.Tagged {
		tagged[v] = true
	}
	vs := plan.vs
	times := make(map[uint64]time.Time, len(vs))
	for _, x := range vs {
		times[x.Version] = x.Time
	}
	timeOf := func(v uint64) (time.Time, bool) { t, ok := times[v]; return t, ok }
	keepFrom := uint64(1)
	if h.Latest > uint64(p.KeepLast) {
		keepFrom = h.Latest - uint64(p.KeepLast) + 1
	}
	for _, v := range vs {
		if tagged[v.Version] || v.GraceFrom.IsZero() {
			continue
		}
		// Prunable from when its grace window started plus the window,
		// and once it left the newest KeepLast.
		from := v.GraceFrom.Add(plan.grace)
		if t, ok := timeOf(v.Version + uint64(p.KeepLast)); ok && t.After(from) {
			from = t
		}
		switch {
		case v.Version < plan.Floor:
			if h.PrunableSince.IsZero() || from.Before(h.PrunableSince) {
				h.PrunableSince = from
			}
		case v.Version < keepFrom:
			h.PrunableLater++
			if from.After(h.PrunableAt) {
				h.PrunableAt = from
			}
		}
	}
	tb, ok := src.(TableBacked)
	if !ok || tb.Table().Cached() == nil {
		if ls, ok := src.(LatestStatser); ok {
			st, err := ls.LatestStats(ctx)
			if err != nil {
				return h, err
			}
			h.Rows, h.Fragments = st.Rows, st.Fragments
			h.DeletedRows, h.PhysicalRows = st.DeletedRows, st.Rows+st.DeletedRows // both at most the physical rows
		}
		if bp, ok := src.(BacklogPlanner); ok {
			b, err := bp.CompactBacklog(ctx, p)
			if err != nil {
				return h, err
			}
			h.Compactable, h.CompactGroups, h.Kept, h.CompactRefused = b.Compactable, b.Groups, b.Kept, b.Refused
			h.CompactBound = max(p.CompactMinFragments, 1)
			if h.Compactable > 0 && len(vs) > 0 {
				h.CompactableSince = vs[len(vs)-1].Time
			}
		}
		return h, nil
	}
	m := tb.Table().Cached()
	h.Fragments = len(m.Fragments)
	h.Rows = m.Rows() // fragments and (format 3) inline rows
	all := p
	all.MaxGroups, all.MaxInputBytes = math.MaxInt, math.MaxUint64
	cp := SizePlanner{}.Plan(m, all)
	h.CompactGroups = len(cp.Groups)
	for _, g := range cp.Groups {
		h.Compactable += len(g.Fragments)
		for _, f := range g.Fragments {
			at, ok := timeOf(f.CreatedVersion)
			if !ok && len(vs) > 0 {
				at = vs[0].Time // written before the oldest stored version
			}
			if h.CompactableSince.IsZero() || at.Before(h.CompactableSince) {
				h.CompactableSince = at
			}
		}
	}
	return h, nil
}

// BacklogPlanner is a Source (not TableBacked) whose compaction planner
// reports its backlog from a dry plan, writing nothing (a Lance dataset:
// Lance's own candidate rule, the policy's TargetRows and
// DeletedThreshold, without the per-run limits).
type BacklogPlanner interface {
	CompactBacklog(ctx context.Context, p Policy) (Backlog, error)
}

// Backlog is a BacklogPlanner's dry plan of the latest version.
type Backlog struct {
	Compactable int            // fragments in the planned groups
	Groups      int            // planned groups
	Kept        map[string]int // fragments left, by reason
	Refused     string         // why the planner refuses the whole dataset ("" if it does not)
}

// Status is a read-only look at any registered dataset for `tablekeep
// status`: its Source opened with open (nil: OpenTableSource) on a view of
// store that keeps writes in memory (a format that derives its change
// records derives them there, nothing written: the first look at a Lance
// dataset reads every manifest once; a TableBacked source's table is
// opened), its Health at now, and its _stats row as a pass would write it
// (Unreclaimed: the stored versions below the stored floor), with the
// Source (a TableBacked one's dry-run orphan sweep is Sweep of its Table).
func Status(ctx context.Context, store objstore.Store, ref TableRef, open SourceOpener, now time.Time) (Health, TableStats, Source, error) {
	var h Health
	var s TableStats
	src, err := openWith(ctx, open, objstore.NewOverlay(store), ref)
	if err != nil {
		return h, s, nil, err
	}
	if tb, ok := src.(TableBacked); ok {
		opts := table.Options{Grace: ref.Policy.WithDefaults().Grace, Clock: clock.Fixed(now)}
		if _, err := tb.OpenTable(ctx, opts); err != nil {
			return h, s, src, err
		}
	}
	if h, err = SourceHealth(ctx, src, ref, now); err != nil {
		return h, s, src, err
	}
	rep := TableReport{Prune: h.Plan}
	rep.Prune.Floor = h.Plan.OldFloor
	var r Runner
	s, note := r.computeStats(ctx, ref, src, rep)
	if note != "" {
		return h, s, src, errors.New(note)
	}
	return h, s, src, nil
}

// DamageReason says which listed versions reference deleted files (empty
// if none was found).
func (h Health) DamageReason() string {
	if len(h.Damaged) == 0 {
		return ""
	}
	how := "of every stored version below the floor"
	if !h.DamageComplete {
		how = "at least; only the lowest versions below the floor are checked"
	}
	return fmt.Sprintf("%d listed versions reference deleted files (%s: %v): readers that list them fail to open them; the range's cleanup is resent by the pass after ReplanAfter", len(h.Damaged), how, h.Damaged)
}

// Behind returns why the table's maintenance is behind at now (empty if it
// is not): prunable versions or compactable fragments waiting longer than
// lag.
func (h Health) Behind(now time.Time, lag time.Duration) []string {
	var why []string
	if h.PrunableNow > 0 && now.Sub(h.PrunableSince) > lag {
		why = append(why, fmt.Sprintf("%d versions prunable since %s", h.PrunableNow, h.PrunableSince.UTC().Format(time.RFC3339)))
	}
	if h.Compactable > 0 && h.Compactable >= h.CompactBound && now.Sub(h.CompactableSince) > lag {
		why = append(why, fmt.Sprintf("%d fragments compactable since %s", h.Compactable, h.CompactableSince.UTC().Format(time.RFC3339)))
	}
	if w := h.Plan.LeaseBehind(now, lag); w != "" {
		why = append(why, w)
	}
	return why
}
