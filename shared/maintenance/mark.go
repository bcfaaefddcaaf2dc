package maintenance

import (
	"hash/fnv"
	"slices"
	"time"

	"github.com/tablekeep/tablekeep/shared/table"
)

// Mark is one table's maintenance mark: what its last maintenance saw and
// left pending, so that a scan can tell from one LIST whether the table
// needs anything. docs/format.md "Fleet index" describes every field.
type Mark struct {
	Root string `json:"root"`
	// Latest and Floor are the latest version and the retention floor the
	// last maintenance planned on.
	Latest uint64 `json:"latest"`
	Floor  uint64 `json:"floor"`
	// Checked is when the last maintenance computed this mark; Updated is
	// when the mark last changed (a scan records Seen and ChangedAt).
	Checked time.Time `json:"checked"`
	Updated time.Time `json:"updated"`
	// Due: maintain again by then even if nothing changed; DueReason says why.
	Due       time.Time `json:"due"`
	DueReason string    `json:"due_reason,omitempty"`
	// Pending is the number of tracked prune ranges (enqueued, not yet
	// seen cleaned); ReplanAt is when the oldest must be re-planned.
	Pending  int       `json:"pending,omitempty"`
	ReplanAt time.Time `json:"replan_at,omitzero"`
	// PrunableAt is when the next retained version becomes prunable.
	PrunableAt time.Time `json:"prunable_at,omitzero"`
	// CompactFrags is the fragments the compaction planner would still take
	// after the last maintenance; CompactSince is since when.
	CompactFrags int       `json:"compact_frags,omitempty"`
	CompactSince time.Time `json:"compact_since,omitzero"`
	// Seen is the latest version a scan saw above Latest (a change not yet
	// maintained), ChangedAt when a scan first saw it.
	Seen      uint64    `json:"seen,omitempty"`
	ChangedAt time.Time `json:"changed_at,omitzero"`
	// Failures counts consecutive failed (or timed-out) maintenances;
	// RetryAt is the earliest next attempt; Error the last error.
	Failures int       `json:"failures,omitempty"`
	RetryAt  time.Time `json:"retry_at,omitzero"`
	Error    string    `json:"error,omitempty"`
	// CompactFailures counts consecutive maintenances whose compaction
	// failed while pruning succeeded; until CompactRetryAt compaction is
	// not tried (pruning keeps its own bounds); CompactError is the last.
	CompactFailures int       `json:"compact_failures,omitempty"`
	CompactRetryAt  time.Time `json:"compact_retry_at,omitzero"`
	CompactError    string    `json:"compact_error,omitempty"`
}

// Newer reports whether m should replace o when two index writers merge:
// the later maintenance wins, then the later update.
func (m Mark) Newer(o Mark) bool {
	if !m.Checked.Equal(o.Checked) {
		return m.Checked.After(o.Checked)
	}
	return m.Updated.After(o.Updated)
}

// CompactHeld reports whether compaction is backing off at now.
func (m Mark) CompactHeld(now time.Time) bool {
	return m.CompactFailures > 0 && now.Before(m.CompactRetryAt)
}

// ClipError is an error's text as a mark keeps it: at most 300 bytes.
func ClipError(s string) string {
	if len(s) > 300 {
		return s[:300]
	}
	return s
}

// LeaseEndStep is how long after its pin's effective expiry (eff,
// docs/format.md 2.8) a version a lease holds becomes prunable in a mark
// (2.6): the name is live through eff + MaxClockSkew (table.LeaseInfo.Live),
// and the first time after that is taken at the 1 s step every prunable
// time uses (T(v') + R + 1 s): 5 s + 1 s = 6 s.
const LeaseEndStep = table.MaxClockSkew + time.Second

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
	// A half-cleaned range sent again is not tracked (no prunable version
	// is left in it): looked at again as a tracked range would be, in
	// case this message is lost too.
	if pl.Resumed > 0 {
		md.set(now.Add(table.SatAdd(p.ReplanAfter, time.Second)), "half-cleaned ranges resent")
	}
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
