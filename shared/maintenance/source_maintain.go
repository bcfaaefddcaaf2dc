package maintenance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/tablekeep/tablekeep/shared/dataset"
	"github.com/tablekeep/tablekeep/shared/lock"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/table"
	"github.com/tablekeep/tablekeep/shared/telemetry"
)

// LatestProber is a Source that tells a fleet scan its latest version
// cheaply (docs/lance.md "What a pass costs"). known, if not 0, is the
// latest version the dataset's last maintenance saw: a prober may use it
// to confirm that nothing was written since.
type LatestProber interface {
	LatestVersion(ctx context.Context, known uint64) (uint64, error)
}

// LatestStatser is a Source that summarises its latest version for
// _stats (rows and fragments), with at most a few requests.
type LatestStatser interface {
	LatestStats(ctx context.Context) (dataset.Stats, error)
}

// SourceCompacter is a Source that compacts its own format (Lance: pages
// spliced, committed as a Rewrite; docs/lance.md "Compaction"). The runner
// calls it under the table's lease, fence checking (and renewing) that
// lease, before the prune; dryRun plans and writes nothing.
type SourceCompacter interface {
	CompactSource(ctx context.Context, p Policy, fence func(context.Context) error, dryRun bool) (SourceCompaction, error)
}

// SourceCompaction is what a SourceCompacter did.
type SourceCompaction struct {
	Result CompactionResult
	// Groups describe the groups, one line each.
	Groups []string
	// LeftFragments are the fragments this run would have compacted but
	// did not (beyond its limits, stopped, or dropped for a conflict):
	// the mark brings the dataset back for them (markAfter's compactFrags).
	LeftFragments int
}

// openSource opens the Source of a dataset of another format through
// Runner.Sources; ErrUnknownFormat if there is no opener.
func (r *Runner) openSource(ctx context.Context, store objstore.Store, ref TableRef) (Source, error) {
	if r.Sources == nil {
		return nil, fmt.Errorf("%s: %w: %q (no opener for it)", ref.Name, ErrUnknownFormat, ref.Format)
	}
	src, err := r.Sources(ctx, store, ref)
	if err != nil {
		return nil, fmt.Errorf("open %s (%s): %w", ref.Name, ref.Format, err)
	}
	return src, nil
}

// sourceLatest is the fleet scan's probe of a dataset of another format:
// the Source's LatestProber, or the full version listing.
func (r *Runner) sourceLatest(ctx context.Context, ref TableRef, known uint64) (uint64, error) {
	src, err := r.openSource(ctx, r.Store, ref)
	if err != nil {
		return 0, err
	}
	if p, ok := src.(LatestProber); ok {
		return p.LatestVersion(ctx, known)
	}
	if err := src.Prepare(ctx); err != nil {
		return 0, err
	}
	vs, err := src.Versions(ctx)
	if err != nil || len(vs) == 0 {
		return 0, errors.Join(err, fmt.Errorf("%s: %w", ref.Root, table.ErrNotATable))
	}
	return vs[len(vs)-1].Version, nil
}

// dryOverlay is the store a dry run opens a Source on: writes land in
// memory and are read back (Get, Head) by the same Source, so the change
// records a dry run derives can be planned from (PlanSourceRange), while
// nothing reaches the store; deletes do nothing. Listings are the store's.
type dryOverlay struct {
	objstore.Store
	mu   sync.Mutex
	objs map[string][]byte
}

func newDryOverlay(st objstore.Store) *dryOverlay {
	return &dryOverlay{Store: st, objs: map[string][]byte{}}
}

func (o *dryOverlay) Get(ctx context.Context, key string) ([]byte, error) {
	o.mu.Lock()
	b, ok := o.objs[key]
	o.mu.Unlock()
	if ok {
		return append([]byte(nil), b...), nil
	}
	return o.Store.Get(ctx, key)
}

func (o *dryOverlay) Head(ctx context.Context, key string) (objstore.ObjectInfo, error) {
	o.mu.Lock()
	b, ok := o.objs[key]
	o.mu.Unlock()
	if ok {
		return objstore.ObjectInfo{Key: key, Size: int64(len(b))}, nil
	}
	return o.Store.Head(ctx, key)
}

func (o *dryOverlay) Put(_ context.Context, key string, b []byte) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.objs[key] = append([]byte(nil), b...)
	return nil
}

func (o *dryOverlay) PutIfAbsent(ctx context.Context, key string, b []byte) error {
	if _, err := o.Head(ctx, key); err == nil {
		return fmt.Errorf("%s: %w", key, objstore.ErrExists)
	}
	return o.Put(ctx, key, b)
}

func (o *dryOverlay) Delete(context.Context, []string) error { return nil }

// maintainSource is MaintainTable for a dataset of another format (ref.Format
// set): no compaction (the format's own tools compact: Lance's optimize /
// compact_files), the prune pass under the table's lease (PruneSource), then
// the mark and the stats the pass saw. A dry run plans on a view of the
// store that keeps its writes in memory (TableReport.Source reads them).
// Called inside a batch or dry.
func (r *Runner) maintainSource(ctx context.Context, ref TableRef, start time.Time) (TableReport, error) {
	rep := TableReport{Table: ref.Name, ref: ref}
	p := ref.Policy.WithDefaults()
	cnt, ok := r.Store.(*objstore.Counting)
	if !ok {
		cnt = objstore.NewCounting(r.Store)
	}
	var store objstore.Store = cnt
	if r.DryRun {
		store = newDryOverlay(cnt)
	}
	src, err := r.openSource(ctx, store, ref)
	if err != nil {
		return rep, err
	}
	if r.DryRun {
		if c, ok := src.(SourceCompacter); ok && !r.NoSourceCompaction {
			sc, err := c.CompactSource(ctx, p, nil, true)
			if err != nil {
				rep.CompactionError = err.Error()
			}
			rep.Compacted, rep.CompactionGroups = sc.Result, sc.Groups
		}
		rep.Prune, err = PlanSourcePrune(ctx, src, ref.Name, p, r.Clock.Now())
		if err != nil {
			return rep, fmt.Errorf("plan prune %s: %w", ref.Name, err)
		}
		rep.Source = src // its derived change records, for PlanSourceRange
		return rep, nil
	}
	// A SourceCompacter compacts first, under the same lease; a failed
	// compaction is reported (CompactionError) and the prune still runs.
	st := r.beginStep(cnt)
	var compact func(*lock.Fence)
	left := 0
	if c, ok := src.(SourceCompacter); ok && !r.NoSourceCompaction {
		compact = func(fence *lock.Fence) {
			sc, err := c.CompactSource(ctx, p, fence.Heartbeat, false)
			res := sc.Result
			rep.Compacted, rep.CompactionGroups, left = res, sc.Groups, sc.LeftFragments
			if err != nil {
				rep.CompactionError = err.Error()
			}
			r.Logger.InfoContext(ctx, "maintenance step", "step", "compaction", "table", ref.Name, "format", ref.Format,
				"planned", res.Planned, "committed", res.Committed, "dropped", res.Dropped, "input_fragments", res.InputFrags,
				"versions", res.Versions, "stopped", res.Stopped, "error", rep.CompactionError)
		}
	}
	plan, token, held, err := r.pruneSource(ctx, ref, src, compact)
	rep.Prune, rep.Token = plan, token
	if held {
		rep.Skipped = "locked by another compactor"
		return rep, nil
	}
	from, to := uint64(0), uint64(0)
	if len(plan.Ranges) > 0 {
		from, to = plan.Ranges[0].From, plan.Ranges[len(plan.Ranges)-1].To
	}
	r.endStep(ctx, st, err, "prune plan", ref.Name, token, slog.String("format", ref.Format),
		slog.Group("versions", slog.Uint64("latest", plan.Latest), slog.Uint64("floor", plan.Floor),
			slog.Uint64("old_floor", plan.OldFloor), slog.Uint64("from", from), slog.Uint64("to", to)),
		slog.Int("stored", plan.Versions), slog.Int("ranges", len(plan.Ranges)), slog.Int("prunable", plan.Prunable),
		slog.Int("unreclaimed", plan.Unreclaim), slog.Int("tagged", len(plan.Tagged)), slog.Int("replanned", plan.Replanned))
	if err != nil {
		if errors.Is(err, lock.ErrLeaseLost) || errors.Is(err, lock.ErrLeaseExpired) {
			r.Metrics.Count(telemetry.LockLost, 1)
		}
		return rep, err
	}
	now := r.Clock.Now()
	rep.mark, rep.marked = markAfterSource(ref, src.Grace(p.Grace), plan, left, now), true
	st = r.beginStep(cnt)
	rep.Stats, rep.StatsNote = r.sourceStats(ctx, ref, src, plan)
	rep.statsReady = rep.StatsNote == ""
	s := rep.Stats
	r.endStep(ctx, st, nil, "stats refresh", ref.Name, token, slog.String("format", ref.Format),
		slog.Group("versions", slog.Uint64("latest", plan.Latest), slog.Uint64("floor", plan.Floor)),
		slog.Int("stored", s.Versions), slog.Int("unreclaimed", s.Unreclaimed), slog.Uint64("rows", s.Rows),
		slog.Int("fragments", s.Fragments), slog.Int64("bytes", s.ManifestBytes), slog.String("note", rep.StatsNote))
	r.Metrics.Count(telemetry.UnreclaimedVersions, s.Unreclaimed)
	rep.Duration = r.Clock.Now().Sub(start)
	return rep, nil
}

// sourceStats is a dataset's _stats row from the prune pass (versions,
// unreclaimed, manifest bytes) and, if the Source is a LatestStatser, its
// latest version's rows and fragments (Lance: one GET of the latest
// manifest). DataBytes stays 0 (it would take a HEAD per data file), and so
// do SmallFrags (the format compacts itself) and LastCompaction.
func (r *Runner) sourceStats(ctx context.Context, ref TableRef, src Source, pl PrunePlan) (TableStats, string) {
	s := TableStats{Name: ref.Name, Versions: len(pl.vs)}
	for _, v := range pl.vs {
		s.ManifestBytes += v.ManifestBytes
		if v.Version < pl.Floor {
			s.Unreclaimed++
		}
	}
	if ls, ok := src.(LatestStatser); ok {
		st, err := ls.LatestStats(ctx)
		if err != nil {
			return s, "stats not computed: " + err.Error()
		}
		s.Rows, s.Fragments = st.Rows, st.Fragments
	}
	last, err := lastCleanupAt(ctx, src.Store(), src.StateRoot())
	if err != nil {
		return s, "stats not computed: " + err.Error()
	}
	s.LastCleanup = last
	return s, ""
}

// pruneSource is PruneSource's body: held reports a lock held by another
// maintainer (nothing done).
// compact, if set, runs first under the same lease.
func (r *Runner) pruneSource(ctx context.Context, ref TableRef, src Source, compact func(*lock.Fence)) (plan PrunePlan, token uint64, held bool, err error) {
	p := ref.Policy.WithDefaults()
	fence, release, err := r.holdTable(ctx, ref)
	if errors.Is(err, lock.ErrLockHeld) {
		return PrunePlan{}, 0, true, nil
	}
	if err != nil {
		return PrunePlan{}, 0, false, err
	}
	defer release()
	token = fence.Lease().Token
	if compact != nil {
		compact(fence)
	}
	plan, err = planSourcePrune(ctx, src, ref.Name, p, r.Clock.Now(), true)
	if err != nil {
		return plan, token, false, fmt.Errorf("plan prune %s: %w", ref.Name, err)
	}
	if err := fence.Heartbeat(ctx); err != nil {
		return plan, token, false, fmt.Errorf("prune %s: %w", ref.Name, err)
	}
	plan.Token = fence.Lease().Token
	plan.Fence = fence.CheckFence
	if err := ApplySourcePrune(ctx, src, &plan, r.Queue); err != nil {
		return plan, token, false, fmt.Errorf("prune %s: %w", ref.Name, err)
	}
	return plan, token, false, nil
}

// markAfterSource is markAfter for a dataset of another format: nothing is
// compacted, and a version's grace window starts at its own Time (Source
// contract), so version i becomes prunable at vs[i].Time + grace.
//
// compactLeft is the fragments its compaction left (SourceCompaction): as
// for a table, due at once at or above CompactMinFragments, else after
// CompactMaxWait.
func markAfterSource(ref TableRef, grace time.Duration, pl PrunePlan, compactLeft int, now time.Time) Mark {
	p := ref.Policy.WithDefaults()
	md := newMarkDue(ref, pl, now, func(i int) (time.Time, bool) {
		return pl.vs[i].Time.Add(table.SatAdd(grace, time.Second)), true
	})
	if compactLeft > 0 {
		md.m.CompactFrags, md.m.CompactSince = compactLeft, now
		if compactLeft >= p.CompactMinFragments {
			md.set(now, "compaction left")
		} else {
			md.set(now.Add(p.CompactMaxWait), "small fragments waiting")
		}
	}
	return md.done()
}

// lastCleanupAt is when a cleaner last finished a range of the dataset
// whose maintenance state is under stateRoot (zero if never).
func lastCleanupAt(ctx context.Context, store objstore.Store, stateRoot string) (time.Time, error) {
	b, err := store.Get(ctx, stateRoot+cleanupStateKey)
	if errors.Is(err, objstore.ErrNotExist) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, err
	}
	var s cleanupState
	if err := json.Unmarshal(b, &s); err != nil {
		return time.Time{}, fmt.Errorf("%s%s: %w: %v", stateRoot, cleanupStateKey, table.ErrCorruptObject, err)
	}
	return s.At, nil
}

// SourceStatus is a read-only look at a dataset of another format for
// `tablekeep status`: the prune plan a pass would make now (its change
// records derived in memory, nothing written: the first look at a dataset
// reads every manifest once), and when the versions it keeps become
// prunable.
type SourceStatus struct {
	Plan  PrunePlan
	Stats TableStats
	// PrunableSince is when the oldest prunable version became prunable;
	// Later versions become prunable by grace from Later's first at LaterAt.
	PrunableSince time.Time
	Later         int
	LaterAt       time.Time
}

// StatusOfSource computes a SourceStatus with open (Runner.Sources).
func StatusOfSource(ctx context.Context, store objstore.Store, ref TableRef, open SourceOpener, now time.Time) (SourceStatus, error) {
	var st SourceStatus
	if open == nil {
		return st, fmt.Errorf("%s: %w: %q", ref.Name, ErrUnknownFormat, ref.Format)
	}
	src, err := open(ctx, newDryOverlay(store), ref)
	if err != nil {
		return st, err
	}
	p := ref.Policy.WithDefaults()
	if st.Plan, err = PlanSourcePrune(ctx, src, ref.Name, p, now); err != nil {
		return st, err
	}
	grace := src.Grace(p.Grace)
	for _, v := range st.Plan.vs {
		if v.Time.IsZero() {
			// No timestamp (a tagged version below the floor, whose
			// manifest the sidecar does not time): not waiting on grace.
			continue
		}
		at := v.Time.Add(grace)
		switch {
		case v.Version < st.Plan.Floor:
			if st.PrunableSince.IsZero() || at.Before(st.PrunableSince) {
				st.PrunableSince = at
			}
		case st.Plan.Latest >= uint64(p.KeepLast) && v.Version <= st.Plan.Latest-uint64(p.KeepLast):
			st.Later++
			if st.LaterAt.IsZero() {
				st.LaterAt = at
			}
		}
	}
	r := Runner{}
	st.Stats, _ = r.sourceStats(ctx, ref, src, st.Plan)
	return st, nil
}
