package warehouse

import (
	"strings"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/catalog"
	"github.com/tablekeep/tablekeep/shared/fleet"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/statuspage"
)

// TestPageTableHealth: a table's state on the compactor's page from its
// mark, at fixed times: failing when its last maintenance (or compaction)
// failed; behind when a seen change, compactable fragments or cleanup
// ranges waited longer than ReplanAfter + 1h (not at exactly that: the
// comparison is strict); healthy otherwise; no mark: healthy, no last run.
func TestPageTableHealth(t *testing.T) {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	ref := maintenance.TableRef{Name: "t", Format: "lance"}
	lag := ref.Policy.WithDefaults().ReplanAfter + time.Hour
	at := func(d time.Duration) time.Time { return now.Add(-d) }
	st := maintenance.TableStats{Versions: 7, LastCleanup: at(3 * time.Hour)}
	hist := []catalog.StatsPoint{{At: at(time.Hour), TableStats: st}}
	for _, c := range []struct {
		name   string
		m      fleet.Mark
		want   statuspage.Health
		reason string
	}{
		{"maintained", fleet.Mark{Checked: at(time.Minute)}, statuspage.Healthy, ""},
		{"failed", fleet.Mark{Checked: at(time.Hour), Failures: 2, Error: "boom", RetryAt: now}, statuspage.Failing, "2 failed maintenances in a row"},
		{"compaction failed", fleet.Mark{Checked: at(time.Hour), CompactFailures: 1, CompactError: "bad"}, statuspage.Failing, "compaction failed 1 times"},
		{"change seen, at the lag", fleet.Mark{Latest: 3, Seen: 4, ChangedAt: at(lag)}, statuspage.Healthy, ""},
		{"change seen, past the lag", fleet.Mark{Latest: 3, Seen: 4, ChangedAt: at(lag + time.Second)}, statuspage.Behind, "version 4 written since"},
		{"compactable, past the lag", fleet.Mark{CompactFrags: 5, CompactSince: at(lag + time.Second)}, statuspage.Behind, "5 fragments compactable"},
		{"ranges, past the lag", fleet.Mark{Pending: 2, ReplanAt: at(lag + time.Second)}, statuspage.Behind, "2 cleanup ranges"},
	} {
		got := PageTable(ref, st, hist, c.m, true, now)
		if got.Health != c.want || (c.reason == "") != (got.Reason == "") || (c.reason != "" && !strings.Contains(got.Reason, c.reason)) {
			t.Errorf("%s: %s %q, want %s %q", c.name, got.Health, got.Reason, c.want, c.reason)
		}
		if got.Format != "lance" || got.Versions != 7 || len(got.History) != 1 {
			t.Errorf("%s: %+v", c.name, got)
		}
	}
	if got := PageTable(ref, st, nil, fleet.Mark{}, false, now); got.Health != statuspage.Healthy || got.LastOutcome != "" || !got.LastMaintained.Equal(st.LastCleanup) {
		t.Errorf("no mark: %+v", got)
	}
	if got := PageTable(ref, st, nil, fleet.Mark{Checked: at(time.Minute)}, true, now); got.LastOutcome != "ok" || !got.LastMaintained.Equal(at(time.Minute)) {
		t.Errorf("maintained a minute ago: %+v", got)
	}
}
