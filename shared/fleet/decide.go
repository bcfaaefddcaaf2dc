package fleet

import (
	"fmt"
	"math"
	"time"

	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/table"
)

// The scan's decision and the mark rules (docs/format.md 2.6), on a mark
// and the thresholds of its table's policy.

// Thresholds is what of a table's policy the decision reads.
type Thresholds struct {
	CompactMinFragments int
	CompactMaxWait      time.Duration
}

// Decide is what a scan decides for one registered table at root from
// its mark m (known: the index has one) and the latest version it listed
// (or, not listed, LatestOf(m)): the reasons it is in need (none: idle or
// backing off), the mark to record (upd) and whether it changed (a change
// first seen). docs/format.md 2.6 gives the rules in this order.
func Decide(root string, m Mark, known bool, latest uint64, scanErr error, now time.Time, p Thresholds) (reasons []string, upd Mark, changed bool) {
	if !known || m.Root != root {
		return []string{"no mark"}, m, false
	}
	if scanErr != nil {
		return []string{"scan failed: " + scanErr.Error()}, m, false
	}
	upd = m
	if latest != m.Latest && latest != m.Seen {
		upd.Seen = latest
		if upd.ChangedAt.IsZero() {
			upd.ChangedAt = now
		}
		upd.Updated = now
		changed = true
	}
	if m.Failures > 0 {
		if now.Before(m.RetryAt) {
			return nil, upd, changed // backing off: its failure delays no one
		}
		return []string{fmt.Sprintf("retry after %d failures", m.Failures)}, upd, changed
	}
	if !now.Before(m.Due) {
		reasons = append(reasons, "due: "+m.DueReason)
	}
	if latest != m.Latest {
		est := m.CompactFrags
		if m.CompactHeld(now) {
			// Compaction backs off: the versions since count (pruning's
			// own need), not the fragments compaction left.
			est = 0
		}
		if latest > m.Latest {
			est += int(min(latest-m.Latest, math.MaxInt32))
		} else {
			est += p.CompactMinFragments // version went back: a recreated table
		}
		if est >= p.CompactMinFragments {
			reasons = append(reasons, fmt.Sprintf("changed: ~%d fragments to compact", est))
		} else if !upd.ChangedAt.IsZero() && now.Sub(upd.ChangedAt) >= p.CompactMaxWait {
			reasons = append(reasons, fmt.Sprintf("changed %s ago", now.Sub(upd.ChangedAt).Round(time.Second)))
		}
	}
	return reasons, upd, changed
}

// LatestOf is the newest version a mark knows of its table (a change a
// scan saw, or the version last maintained).
func LatestOf(m Mark) uint64 {
	if m.Seen != 0 {
		return m.Seen
	}
	return m.Latest
}

// Wake is the earliest time Decide finds the table in need when its
// latest version is LatestOf(m) (nothing changed since the mark):
// its retry time if it failed; otherwise its due time, and with a change
// seen, when the change's fragments reach the threshold (at once, or when
// compaction's backoff ends) or when it has waited CompactMaxWait. Zero:
// at once.
func Wake(m Mark, p Thresholds) time.Time {
	if m.Failures > 0 {
		return m.RetryAt
	}
	w := m.Due
	lat := LatestOf(m)
	if lat == m.Latest {
		return w
	}
	vers := p.CompactMinFragments
	if lat > m.Latest {
		vers = int(min(lat-m.Latest, 1<<31-1))
	}
	switch {
	case vers >= p.CompactMinFragments:
		return time.Time{}
	case m.CompactFrags+vers >= p.CompactMinFragments:
		if m.CompactFailures == 0 {
			return time.Time{}
		}
		w = earlier(w, m.CompactRetryAt)
	}
	if !m.ChangedAt.IsZero() {
		w = earlier(w, m.ChangedAt.Add(p.CompactMaxWait))
	}
	return w
}

// CarryCompactSince keeps the time small fragments were first left
// waiting across maintenances that leave some (so the wait bound counts
// from the first), and moves the due time up accordingly.
func CarryCompactSince(m, prev Mark, p Thresholds) Mark {
	if m.CompactFrags == 0 || prev.CompactFrags == 0 || prev.CompactSince.IsZero() || !prev.CompactSince.Before(m.CompactSince) {
		return m
	}
	m.CompactSince = prev.CompactSince
	if at := later(m.CompactSince.Add(p.CompactMaxWait), m.CompactRetryAt); m.CompactFrags < p.CompactMinFragments && at.Before(m.Due) {
		m.Due, m.DueReason = at, "small fragments waiting"
	}
	return m
}

// Failed records a failed or timed-out maintenance: the table keeps
// its previous mark (so nothing it recorded as pending is forgotten) and
// is retried after the failure backoff (b).
func Failed(root string, prev Mark, known bool, err error, b Backoff, now time.Time) Mark {
	m := prev
	if !known || m.Root != root {
		m = Mark{Root: root, Due: now}
	}
	m.Failures++
	m.RetryAt = table.SatAddTime(now, b.Delay(m.Failures))
	m.Updated = now
	m.Error = maintenance.ClipError(err.Error())
	return m
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func earlier(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
