package maintenance

import (
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/table"
)

// A mark's retry time saturates instead of wrapping.
func TestFleetAddSatSaturates(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if at := table.SatAddTime(now, 1<<63-1); at.Before(now) {
		t.Fatalf("SatAddTime wrapped: %v", at)
	}
}

// TestMarkDueAfterResumedHalfCleanedRange: a pass that sent a half-cleaned
// range again (PrunePlan.Resumed, not tracked in the prune state) makes
// the table due again ReplanAfter + 1 s later, as a tracked range would
// (in case that message is lost too): exactly then, not 1 ns later; a pass
// that resumed nothing keeps the full-check due.
func TestMarkDueAfterResumedHalfCleanedRange(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ref := TableRef{Name: "t", Root: "t/", Policy: Policy{ReplanAfter: 6 * time.Hour, FullCheckEvery: 7 * 24 * time.Hour}}
	never := func(int) (time.Time, bool) { return time.Time{}, false }
	md := newMarkDue(ref, PrunePlan{Latest: 10, Floor: 5, Resumed: 1}, now, never)
	m := md.done()
	if want := now.Add(6*time.Hour + time.Second); !m.Due.Equal(want) || m.DueReason != "half-cleaned ranges resent" {
		t.Fatalf("due %v (%s), want %v", m.Due, m.DueReason, want)
	}
	m = newMarkDue(ref, PrunePlan{Latest: 10, Floor: 5}, now, never).done()
	if m.DueReason != "full check" || !m.Due.After(now.Add(6*time.Hour+time.Second)) {
		t.Fatalf("nothing resumed: due %v (%s)", m.Due, m.DueReason)
	}
}
