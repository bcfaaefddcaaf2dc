package maintenance

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"time"

	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/table"
)

// LatestVersion returns a table's latest version with one LIST (max-keys
// 1 on the manifest keys, which sort newest first), or 0 and
// table.ErrNotATable if it has none. A stray object sorting first costs an
// Open instead.
func LatestVersion(ctx context.Context, store objstore.Store, root string) (uint64, error) {
	root = table.NormalizeRoot(root)
	prefix := root + table.VersionsPrefix
	page, err := store.List(ctx, objstore.ListOptions{Prefix: prefix, MaxKeys: 1})
	if err != nil {
		return 0, err
	}
	if len(page.Objects) == 0 {
		return 0, fmt.Errorf("%s: %w", root, table.ErrNotATable)
	}
	if v, ok := table.ParseManifestKey(strings.TrimPrefix(page.Objects[0].Key, root)); ok {
		return v, nil
	}
	t, err := table.Open(ctx, store, root, table.Options{})
	if err != nil {
		return 0, err
	}
	return t.Cached().Version, nil
}

// markAfter computes a table's mark after a successful maintenance at now
// from what it saw: the prune plan (versions, floor, tracked ranges) and
// the compaction planner's view of the latest manifest.
//
// grace is the Source's; seen, if not 0, is the latest version compaction
// worked from (a tablekeep table's manifest held).
func markAfter(ref TableRef, grace time.Duration, seen uint64, pl PrunePlan, compactFrags int, cs compactState, now time.Time) Mark {
	p := ref.Policy.WithDefaults()
	// Prune: retained versions in [floor, latest-KeepLast] become prunable,
	// oldest first, when their grace window (from GraceFrom) is over.
	md := newMarkDue(ref, pl, now, func(i int) (time.Time, bool) {
		v := pl.vs[i]
		return v.GraceFrom.Add(table.SatAdd(grace, time.Second)), !v.GraceFrom.IsZero()
	})
	md.m.CompactFrags = compactFrags
	// The fragment count is of the manifest compaction held: the mark's
	// latest version is that manifest's, so that a version written after
	// it (a commit between compaction and the prune plan's listing) is a
	// change the next scan sees and counts.
	if seen != 0 && seen < md.m.Latest {
		md.m.Latest = seen
	}
	md.m.CompactFailures, md.m.CompactRetryAt, md.m.CompactError = cs.Failures, cs.RetryAt, cs.Error
	// Compaction left (stopped at a bound, or below the planner's group
	// size): due at the threshold's wait bound, at once above it; while
	// compaction backs off after failures, not before its retry time.
	if compactFrags > 0 {
		md.m.CompactSince = now
		if compactFrags >= p.CompactMinFragments {
			md.set(laterOf(now, cs.RetryAt), "compaction left")
		} else {
			md.set(laterOf(md.m.CompactSince.Add(p.CompactMaxWait), cs.RetryAt), "small fragments waiting")
		}
	}
	return md.done()
}

// compactState is a table's compaction backoff after a maintenance: the
// consecutive compaction failures, when compaction is tried again, the last
// error (zero: compaction did not fail).
type compactState struct {
	Failures int
	RetryAt  time.Time
	Error    string
}

func laterOf(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// markDue is a mark being computed: the rules every format shares (the
// re-plan of tracked ranges, prunable versions, the full check), then the
// format's own (set), then done.
type markDue struct {
	m   Mark
	due time.Time
	why string
}

// newMarkDue starts the mark after a successful maintenance at now.
// prunableAt(i) is when stored version pl.vs[i] becomes prunable (false:
// never, e.g. the latest); only retained versions in [floor,
// latest-KeepLast] count.
func newMarkDue(ref TableRef, pl PrunePlan, now time.Time, prunableAt func(i int) (time.Time, bool)) *markDue {
	p := ref.Policy.WithDefaults()
	md := &markDue{m: Mark{Root: ref.Root, Latest: pl.Latest, Floor: pl.Floor, Checked: now, Updated: now,
		Pending: len(pl.StateAfter.Ranges)}}
	md.due, md.why = now.Add(fullCheckAfter(ref.Name, p.FullCheckEvery)), "full check"
	// Re-plan: planRanges re-sends a range when now - At > ReplanAfter.
	for _, r := range pl.StateAfter.Ranges {
		at := r.At.Add(table.SatAdd(p.ReplanAfter, time.Second))
		if md.m.ReplanAt.IsZero() || at.Before(md.m.ReplanAt) {
			md.m.ReplanAt = at
		}
	}
	md.set(md.m.ReplanAt, "re-plan of tracked ranges")
	var prunable []time.Time
	for i, v := range pl.vs {
		if v.Version < pl.Floor || pl.Latest < uint64(p.KeepLast) || v.Version > pl.Latest-uint64(p.KeepLast) {
			continue
		}
		if at, ok := prunableAt(i); ok {
			prunable = append(prunable, pl.leaseDelay(v.Version, at)) // a lease's versions: at its end
		}
	}
	slices.SortFunc(prunable, time.Time.Compare)
	if len(prunable) > 0 {
		md.m.PrunableAt = prunable[0]
		at := prunable[0].Add(p.PruneMaxWait)
		if len(prunable) >= p.PruneMinVersions {
			at = minTime(at, prunable[p.PruneMinVersions-1])
		}
		md.set(at, "versions prunable")
	}
	if pl.Prunable > 0 && len(pl.Ranges) == 0 && len(pl.StateAfter.Ranges) == 0 {
		md.set(now, "prunable versions not enqueued") // cannot happen; never skip it
	}
	return md
}

// set moves the due time up to at (zero: no rule), for reason.
func (md *markDue) set(at time.Time, reason string) {
	if !at.IsZero() && at.Before(md.due) {
		md.due, md.why = at, reason
	}
}

func (md *markDue) done() Mark {
	md.m.Due, md.m.DueReason = md.due, md.why
	return md.m
}

// fullCheckAfter is when, after a maintenance, the table's next full check
// is due: in (every/2, every], at a point fixed by the table's name (FNV-1a),
// so that tables maintained in one pass are not all checked in one pass.
func fullCheckAfter(name string, every time.Duration) time.Duration {
	h := fnv.New64a()
	_, _ = h.Write([]byte(name))
	half := every / 2
	if half <= 0 {
		return every
	}
	return every - time.Duration(h.Sum64()%uint64(half))
}

// compactFragsOf is how many fragments the compaction planner would take
// from the latest manifest t holds.
func compactFragsOf(c *Compactor, t *table.Table, p Policy) int {
	m := t.Cached()
	if m == nil || c == nil || c.Planner == nil {
		return 0
	}
	n := 0
	for _, g := range c.Planner.Plan(m, p).Groups {
		n += len(g.Fragments)
	}
	return n
}
