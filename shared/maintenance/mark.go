package maintenance

import "time"

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
