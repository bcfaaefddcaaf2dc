package table

import (
	"math"
	"time"
)

// Timing bounds of the commit protocol. docs/reliability.md ("Time") states
// each rule that uses them as an inequality; the margins below are what make
// those inequalities hold when clocks disagree and requests are slow.
const (
	// MaxClockSkew bounds how far the clocks of writers, maintainers and
	// the object store's timestamps may disagree.
	MaxClockSkew = 5 * time.Second
	// MaxCommitDuration bounds when one manifest write may be applied by
	// the store, counted from the writer's last check before it (docs/
	// reliability.md, "An abandoned manifest PUT"): the client gives up
	// after ManifestPutTimeout, and the store applies what it received
	// within StoreApplyAllowance or never.
	MaxCommitDuration = 30 * time.Second
	// StoreApplyAllowance is the part of MaxCommitDuration left to the
	// store: a request whose last byte the client sent may still be
	// delivered (bytes in the kernel's and the network's buffers outlive
	// the client's abandoning it) and processed this long afterwards. It
	// is an assumption about the store, not something a client can check.
	StoreApplyAllowance = 10 * time.Second
	// ManifestPutTimeout is the client's bound on one manifest write, all
	// of the SDK's attempts and backoffs included: the write runs under a
	// context with this deadline, and the SDK starts no attempt after it
	// and aborts the one in flight (TestS3CallBoundedByDeadline). So
	// ManifestPutTimeout + StoreApplyAllowance <= MaxCommitDuration.
	ManifestPutTimeout = MaxCommitDuration - StoreApplyAllowance
	// SafetyMargin is what maintainers add to the writers' grace window
	// before they treat a file or a superseded version as no longer
	// reachable by any writer: the writer's manifest PUT may land up to
	// MaxCommitDuration after its last check, and three clocks (writer,
	// store, maintainer) may each be off by MaxClockSkew.
	SafetyMargin = MaxCommitDuration + 3*MaxClockSkew
	// MaxGrace bounds every grace window (docs/format.md 8.5): Create
	// refuses a longer Options.Grace (ErrInvalidGrace); the manifest
	// decoder reads a longer stored writer grace (written by a release
	// before the bound) as MaxGrace, so that table's versions stay
	// readable (format.md 4.4; TestWriterGraceBounded); and a policy's
	// longer grace is refused by its validation and counts as MaxGrace in
	// RetentionGrace. 100 years is "keep for ever" in
	// practice, yet a third of MaxInt64 nanoseconds (~292 years), so
	// RetentionGrace and the sums maintainers build on it (+ 1 s,
	// + ReplanAfter, + PruneMaxWait) stay far from the limit; those sums
	// saturate (SatAdd) all the same.
	MaxGrace = 100 * 365 * 24 * time.Hour
)

// SatAdd is a + b saturated at the limits of time.Duration instead of
// wrapping around: every sum of durations in a timing rule goes through it
// (a grace near MaxInt64 plus the margin once wrapped to a negative grace,
// and the sweep deleted a commit's files in flight: issue 19 item 3).
func SatAdd(a, b time.Duration) time.Duration {
	s := a + b
	switch {
	case a > 0 && b > 0 && s < 0:
		return math.MaxInt64
	case a < 0 && b < 0 && s >= 0:
		return math.MinInt64
	}
	return s
}

// RetentionGrace is R, the retention grace maintainers use (docs/format.md
// 8.5): R = max(min(P, MaxGrace), W) + SafetyMargin, saturated, for a
// policy grace P and a table's writer grace W (0 for a format without
// one). A P beyond MaxGrace counts as MaxGrace; W is at most MaxGrace
// once decoded, and R >= W + SafetyMargin whatever P is.
func RetentionGrace(policyGrace, writerGrace time.Duration) time.Duration {
	return SatAdd(max(min(policyGrace, MaxGrace), writerGrace), SafetyMargin)
}

// WriterGrace is the writers' grace window of this table, stored in its
// manifests (set at Create, carried forward by every commit; DefaultGrace
// for tables written before the field): a writer commits only while its
// read version, and every data file it uploaded, is at most this old. A
// handle's Options.Grace may shorten its own bound, never lengthen it.
// Maintenance must keep what a writer may still reference for
// WriterGrace + SafetyMargin. It is read from the handle's cached latest
// manifest (no I/O); DefaultGrace before any manifest is loaded.
func (t *Table) WriterGrace() time.Duration {
	if m := t.Cached(); m != nil && m.WriterGrace > 0 {
		return m.WriterGrace
	}
	return DefaultGrace
}

// SatAddTime is t + d, saturating at the largest time instead of wrapping
// (a backoff or retry time computed from a huge duration).
func SatAddTime(t time.Time, d time.Duration) time.Time {
	u := t.Add(d)
	if d > 0 && u.Before(t) {
		return time.Unix(1<<62, 0)
	}
	return u
}

// SatShift is d x 2^n for a backoff that doubles, saturated at the
// largest duration instead of wrapping (a shifted duration can wrap to a
// negative or a small positive value); d <= 0 or n <= 0 is returned as is.
func SatShift(d time.Duration, n int) time.Duration {
	if d <= 0 || n <= 0 {
		return d
	}
	if n >= 63 || d > math.MaxInt64>>n {
		return math.MaxInt64
	}
	return d << n
}
