package table

import "time"

// Timing bounds of the commit protocol. docs/reliability.md ("Time") states
// each rule that uses them as an inequality; the margins below are what make
// those inequalities hold when clocks disagree and requests are slow.
const (
	// MaxClockSkew bounds how far the clocks of writers, maintainers and
	// the object store's timestamps may disagree.
	MaxClockSkew = 5 * time.Second
	// MaxCommitDuration bounds one manifest write: a writer gives up on
	// (and does not report) a manifest PUT still unanswered after it.
	MaxCommitDuration = 30 * time.Second
	// SafetyMargin is what maintainers add to the writers' grace window
	// before they treat a file or a superseded version as no longer
	// reachable by any writer: the writer's manifest PUT may land up to
	// MaxCommitDuration after its last check, and three clocks (writer,
	// store, maintainer) may each be off by MaxClockSkew.
	SafetyMargin = MaxCommitDuration + 3*MaxClockSkew
)

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
