package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"time"

	"github.com/tablekeep/tablekeep/shared/catalog"
	"github.com/tablekeep/tablekeep/shared/fleet"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/statuspage"
	"github.com/tablekeep/tablekeep/shared/table"
	"github.com/tablekeep/tablekeep/shared/warehouse"
)

// deletedRows is the rows masked by deletions in a tablekeep table's latest
// version (its cached manifest: no I/O); a Lance dataset's are its
// Health's (statusOf).
func deletedRows(src maintenance.Source) uint64 {
	if tb, ok := src.(maintenance.TableBacked); ok {
		if m := tb.Table().Cached(); m != nil {
			return table.StatsOf(m).DeletedRows
		}
	}
	return 0
}

// writeStatusHTML writes `status --html FILE`: status's rows, each table's
// _stats history (catalog.StatsHistory over the newest
// warehouse.StatusHistoryVersions versions of _stats) and its fleet mark
// (fleet.Read: its last run's outcome and error), as one self-contained
// page (shared/statuspage). These reads are made only with --html.
func writeStatusHTML(ctx context.Context, w *whouse, refs []maintenance.TableRef, rows []tableStatus, bucket, file string) error {
	now := w.Clock.Now()
	hist, err := w.Catalog.StatsHistory(ctx, warehouse.StatusHistoryVersions)
	if err != nil {
		w.Logger.Warn("_stats history unreadable: the page has no charts", "err", err)
	}
	marks := map[string]fleet.Mark{}
	if idx, err := fleet.Read(ctx, w.Store, w.Catalog.Root()); err != nil {
		w.Logger.Warn("fleet index unreadable: the page has no last runs", "err", err)
	} else {
		marks = idx.Tables
	}
	p := statuspage.Page{Warehouse: w.URI, Generated: now, Source: "tablekeep status"}
	if bucket != "" {
		p.Notes = append(p.Notes, bucket)
	}
	for i, r := range rows {
		p.Tables = append(p.Tables, pageRow(ctx, w, refs[i], r, hist[r.Table], marks, now))
	}
	var b bytes.Buffer
	if err := statuspage.Write(&b, p); err != nil {
		return err
	}
	if err := os.WriteFile(file, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("status --html: %w", err)
	}
	return nil
}

// pageRow is one status row on the page: the warehouse's view of the
// table (its history and mark: warehouse.PageTable) with what status read
// of the table itself.
func pageRow(ctx context.Context, w *whouse, ref maintenance.TableRef, r tableStatus, hist []catalog.StatsPoint, marks map[string]fleet.Mark, now time.Time) statuspage.Table {
	m, hasMark := marks[r.Table]
	var st maintenance.TableStats
	if n := len(hist); n > 0 {
		st = hist[n-1].TableStats
	}
	t := warehouse.PageTable(ref, st, hist, m, hasMark, now)
	switch {
	case r.Health == "unreadable":
		t.Health, t.Unknown, t.Reason, t.LastError = statuspage.Failing, true, "status could not read it", r.Error
		return t
	case r.Health != "ok":
		t.Health, t.Reason = statuspage.Behind, r.Health+": "+r.Reason
	case t.Health == statuspage.Behind:
		// status read the table itself: its own rule decides.
		t.Health, t.Reason = statuspage.Healthy, ""
	}
	if r.Error != "" { // not pruned (a Lance restore): status read no counts
		t.Unknown, t.LastError = true, r.Error
		return t
	}
	t.Versions, t.Prunable, t.PrunableLater, t.PrunableKnown = r.Versions, r.PrunableNow, r.PrunableLater, true
	t.Unreclaimed, t.Fragments, t.Compactable, t.Rows = r.Unreclaimed, r.Fragments, r.Compactable, r.Rows
	t.ManifestBytes, t.Leases, t.LeaseHold = r.ManifestBytes, len(r.Leases), r.LeaseHold
	t.DeletedRows, t.DeletedKnown = r.DeletedRows, true
	if r.Policy.Format == formatTablekeep {
		t.GarbageFiles, t.GarbageBytes, t.GarbageKnown = r.GarbageFiles, r.GarbageBytes, true
	} else {
		t.DeletedKnown = r.Error == "" // the health's, read from the latest manifest
	}
	for _, s := range []string{r.LastCompaction, r.LastCleanup} {
		if at, err := time.Parse(time.RFC3339, s); err == nil && at.After(t.LastMaintained) {
			t.LastMaintained = at
		}
	}
	return t
}
