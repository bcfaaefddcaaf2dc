package warehouse

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/tablekeep/tablekeep/shared/catalog"
	"github.com/tablekeep/tablekeep/shared/fleet"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/statuspage"
	"github.com/tablekeep/tablekeep/shared/table"
)

// StatusPageKey is where the scheduled compactor writes the status page,
// under the warehouse root (catalog.StatusDir: no table is registered
// there).
const StatusPageKey = catalog.StatusDir + "/index.html"

// StatusHistoryVersions is how many versions of _stats a status page reads
// for its charts (the newest; fewer if fewer are stored).
const StatusHistoryVersions = 24

// PageHistory is a table's _stats history as the page draws it.
func PageHistory(pts []catalog.StatsPoint) []statuspage.Point {
	out := make([]statuspage.Point, len(pts))
	for i, p := range pts {
		out[i] = statuspage.Point{At: p.At, Versions: p.Versions, Fragments: p.Fragments, ManifestBytes: p.ManifestBytes, Unreclaimed: p.Unreclaimed}
	}
	return out
}

// PageTable is a table's row on the status page from what the warehouse
// records without opening the table: its _stats row, its history and its
// fleet mark (hasMark false: none). Failing: its last maintenance failed
// (or its compaction did); behind: a change seen but not maintained,
// compactable fragments, or enqueued ranges not seen cleaned, waiting
// longer than the policy's ReplanAfter plus an hour (status's --max-lag
// default).
func PageTable(ref maintenance.TableRef, st maintenance.TableStats, hist []catalog.StatsPoint, m fleet.Mark, hasMark bool, now time.Time) statuspage.Table {
	t := statuspage.Table{Name: ref.Name, Format: formatName(ref.Format), Health: statuspage.Healthy,
		Versions: st.Versions, Unreclaimed: st.Unreclaimed, Fragments: st.Fragments, Rows: st.Rows,
		ManifestBytes: st.ManifestBytes, History: PageHistory(hist)}
	t.LastMaintained = latest(st.LastCompaction, st.LastCleanup)
	if !hasMark {
		return t
	}
	t.LastMaintained, t.LastRun, t.Compactable = latest(t.LastMaintained, m.Checked), m.Checked, m.CompactFrags
	lag := ref.Policy.WithDefaults().ReplanAfter + time.Hour
	waited := func(since time.Time) bool { return !since.IsZero() && now.Sub(since) > lag }
	switch {
	case m.Failures > 0:
		t.Health, t.LastOutcome, t.LastError = statuspage.Failing, "failed", m.Error
		t.Reason = fmt.Sprintf("%d failed maintenances in a row; next try %s", m.Failures, m.RetryAt.UTC().Format(time.RFC3339))
	case m.CompactFailures > 0:
		t.Health, t.LastOutcome, t.LastError = statuspage.Failing, "failed", m.CompactError
		t.Reason = fmt.Sprintf("compaction failed %d times in a row (pruning runs)", m.CompactFailures)
	case m.Seen > m.Latest && waited(m.ChangedAt):
		t.Health, t.Reason = statuspage.Behind, fmt.Sprintf("version %d written since %s, not maintained yet", m.Seen, m.ChangedAt.UTC().Format(time.RFC3339))
	case m.CompactFrags > 0 && waited(m.CompactSince):
		t.Health, t.Reason = statuspage.Behind, fmt.Sprintf("%d fragments compactable since %s", m.CompactFrags, m.CompactSince.UTC().Format(time.RFC3339))
	case m.Pending > 0 && waited(m.ReplanAt):
		t.Health, t.Reason = statuspage.Behind, fmt.Sprintf("%d cleanup ranges not seen cleaned (re-plan due %s)", m.Pending, m.ReplanAt.UTC().Format(time.RFC3339))
	}
	if t.LastOutcome == "" && !m.Checked.IsZero() {
		t.LastOutcome = "ok"
	}
	return t
}

func formatName(f string) string {
	if f == "" {
		return "tablekeep"
	}
	return f
}

func latest(ts ...time.Time) time.Time {
	var l time.Time
	for _, t := range ts {
		if t.After(l) {
			l = t
		}
	}
	return l
}

// WriteStatusPage renders p and writes it to StatusPageKey under root:
// one PUT (a plain overwrite: the page is a report, the last writer wins).
func WriteStatusPage(ctx context.Context, store objstore.Store, root string, p statuspage.Page) (int, error) {
	var b bytes.Buffer
	if err := statuspage.Write(&b, p); err != nil {
		return 0, err
	}
	key := table.NormalizeRoot(root) + StatusPageKey
	if err := store.Put(ctx, key, b.Bytes()); err != nil {
		return 0, fmt.Errorf("status page %s: %w", key, err)
	}
	return b.Len(), nil
}
