package awsfn

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/tablekeep/tablekeep/shared/formats"
	"github.com/tablekeep/tablekeep/shared/maintenance"
)

// SweepTable is one table's sweep.
type SweepTable struct {
	Table      string `json:"table"`
	Listed     int    `json:"listed"`
	Referenced int    `json:"referenced"`
	Young      int    `json:"young"`
	Foreign    int    `json:"foreign"`
	Deleted    int    `json:"deleted"`
	// More: the delete bound was reached; the next run continues.
	More bool `json:"more,omitempty"`
	// DanglingTags name versions whose manifest is gone: reported, the
	// sweep goes on.
	DanglingTags []string `json:"dangling_tags,omitempty"`
	Error        string   `json:"error,omitempty"`
	// Skipped: a dataset of another format (Lance), left to its own cleanup.
	Skipped string `json:"skipped,omitempty"`
}

// SweepSummary is the sweeper's response.
type SweepSummary struct {
	Function   string       `json:"function"`
	Trigger    string       `json:"trigger"`
	Tables     []SweepTable `json:"tables"`
	Registered int          `json:"registered"`
	NotReached int          `json:"not_reached"`
	Errors     int          `json:"errors"`
	Deleted    int          `json:"deleted"`
	ElapsedMS  int64        `json:"elapsed_ms"`
}

// Sweep is the sweeper's handler: on a scheduled event it deletes, for each
// registered table, data and deletion files that no retained version
// references and that are older than the table's grace window, at most
// SweepMaxDeletes per table per invocation, until the deadline minus the
// margin. Tables are visited from a starting point that rotates with each
// run, so a warehouse too big for one invocation is still covered.
func (d *Deps) Sweep(ctx context.Context, raw json.RawMessage) (SweepSummary, error) {
	start := time.Now()
	sum := SweepSummary{Function: string(RoleSweeper)}
	log := d.logger(ctx)
	ev, err := ParseScheduled(RoleSweeper, raw)
	if err != nil {
		log.ErrorContext(ctx, "rejected event", "err", err)
		return sum, err
	}
	sum.Trigger = ev.Source
	cat, err := d.Catalog(ctx)
	if err != nil {
		return sum, err
	}
	refs, err := cat.Tables(ctx)
	if err != nil {
		return sum, fmt.Errorf("sweeper: list tables: %w", err)
	}
	sum.Registered = len(refs)
	sort.Slice(refs, func(i, j int) bool { return refs[i].Name < refs[j].Name })
	off := 0
	if len(refs) > 0 {
		off = int(start.Unix()/60) % len(refs)
	}
	wctx, cancel := d.workContext(ctx, 0)
	defer cancel()
	m := d.metrics(RoleSweeper)
	for i := range refs {
		ref := refs[(off+i)%len(refs)]
		if dl, ok := wctx.Deadline(); (ok && dl.Sub(d.Clock.Now()) < d.Config.Margin) || wctx.Err() != nil {
			sum.NotReached = len(refs) - i
			log.WarnContext(ctx, "sweeper out of time", "not_reached", sum.NotReached)
			break
		}
		st := SweepTable{Table: ref.Name}
		res, err := maintenance.SweepTable(wctx, d.Store, ref, maintenance.SweepOptions{
			Now: d.Clock.Now(), MaxDeletes: d.Config.SweepMaxDeletes, Logger: log, Clock: d.Clock,
			Metrics: m, Table: d.tableOptions(), Sources: formats.Open,
		})
		st.Listed, st.Referenced, st.Young, st.Foreign, st.Deleted = res.Listed, res.Referenced, res.Young, res.Foreign, res.Deleted
		st.More = res.Deleted >= d.Config.SweepMaxDeletes
		st.DanglingTags = res.DanglingTags
		st.Skipped = res.Skipped
		if err != nil {
			st.Error = err.Error()
			sum.Errors++
			log.ErrorContext(ctx, "sweep failed", "table", ref.Name, "err", err)
		}
		sum.Deleted += res.Deleted
		sum.Tables = append(sum.Tables, st)
	}
	sum.ElapsedMS = time.Since(start).Milliseconds()
	m.Count("OrphansDeleted", sum.Deleted)
	m.Count("TableErrors", sum.Errors)
	m.Count("TablesNotReached", sum.NotReached)
	if err := m.Flush(); err != nil {
		log.WarnContext(ctx, "metrics not written", "err", err)
	}
	return sum, nil
}
