package awsfn

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/tablekeep/tablekeep/shared/fleet"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/telemetry"
	"github.com/tablekeep/tablekeep/shared/warehouse"
)

// TableSummary is what the compactor did to one table.
type TableSummary struct {
	Table   string `json:"table"`
	Skipped string `json:"skipped,omitempty"`
	// CompactionError: compaction failed; pruning still ran (Skipped then
	// holds the whole error).
	CompactionError string   `json:"compaction_error,omitempty"`
	FencingToken    uint64   `json:"fencing_token,omitempty"`
	GroupsPlanned   int      `json:"groups_planned"`
	GroupsDone      int      `json:"groups_committed"`
	FragmentsIn     int      `json:"fragments_in"`
	FragmentsOut    int      `json:"fragments_out"`
	Latest          uint64   `json:"latest_version"`
	Floor           uint64   `json:"floor"`
	RangesEnqueued  int      `json:"ranges_enqueued"`
	Prunable        int      `json:"prunable_versions"`
	Unreclaimed     int      `json:"unreclaimed_versions"`
	Rows            uint64   `json:"rows"`
	StatsNote       string   `json:"stats_note,omitempty"`
	DurationMS      int64    `json:"duration_ms"`
	Versions        []uint64 `json:"compaction_versions,omitempty"`
}

// CompactSummary is the compactor's response.
type CompactSummary struct {
	Function   string         `json:"function"`
	Trigger    string         `json:"trigger"`
	Tables     []TableSummary `json:"tables"`
	Registered int            `json:"registered"`
	NotReached int            `json:"not_reached"`
	Errors     int            `json:"errors"`
	Busy       int            `json:"busy"`
	Stopped    string         `json:"stopped,omitempty"`
	ElapsedMS  int64          `json:"elapsed_ms"`
	// Fan-out (a compaction queue configured): table jobs sent, and tables
	// left to their pending retry or continuation job.
	JobsEnqueued int `json:"jobs_enqueued,omitempty"`
	InRetry      int `json:"in_retry,omitempty"`
	// Idle tables (unchanged, nothing due: one LIST each) and tables
	// backing off after failures were skipped by the scan.
	Idle       int `json:"idle"`
	BackingOff int `json:"backing_off,omitempty"`
}

// tableSummary is the response's view of one table's report.
func tableSummary(tr maintenance.TableReport) TableSummary {
	return TableSummary{
		Table: tr.Table, Skipped: tr.Skipped, CompactionError: tr.CompactionError, FencingToken: tr.Token,
		GroupsPlanned: tr.Compacted.Planned, GroupsDone: tr.Compacted.Committed,
		FragmentsIn: tr.Compacted.InputFrags, FragmentsOut: tr.Compacted.OutputFrags,
		Latest: tr.Prune.Latest, Floor: tr.Prune.Floor, RangesEnqueued: len(tr.Prune.Ranges),
		Prunable: tr.Prune.Prunable, Unreclaimed: tr.Stats.Unreclaimed, Rows: tr.Stats.Rows,
		StatsNote: tr.StatsNote, DurationMS: tr.Duration.Milliseconds(), Versions: tr.Compacted.Versions,
	}
}

// add records one table's report, counting errors and busy tables.
func (sum *CompactSummary) add(tr maintenance.TableReport) {
	switch {
	case tr.Outcome == maintenance.Failed, tr.CompactionError != "":
		sum.Errors++
	case tr.Skipped != "":
		sum.Busy++
	}
	sum.Tables = append(sum.Tables, tableSummary(tr))
}

// newRunner is the maintenance runner of one invocation.
func (d *Deps) newRunner(ctx context.Context, log *slog.Logger, cat maintenance.Catalog, m *telemetry.Metrics) *maintenance.Runner {
	r := d.warehouse().NewRunner(warehouse.Options{Catalog: cat, Owner: "compactor/" + requestID(ctx), Logger: log, Metrics: m})
	r.Compactor.Margin = d.Config.Margin
	b := fleet.BackoffOf(d.backoffMode())
	r.FailureBackoff, r.FailureBackoffMax = b.Base, b.Max
	return r
}

// backoffMode is the failure backoff's mode of this compactor: with a
// compaction queue, the fan-out's (ModeJobs, 1 min to 1 h: the fleet
// index's retry time is the retry job's not-before, in the scheduled runs
// and the job batches alike, and its cap stays below MarkerStale); without
// one the scheduled runs are the only retry, as the passes of the CLI and
// the embedded warehouse (ModePass, 15 min to 6 h: a table that keeps
// failing is not tried again at every run).
func (d *Deps) backoffMode() fleet.Mode {
	if d.Jobs != nil {
		return fleet.ModeJobs
	}
	return fleet.ModePass
}

// fleetOptions are the fleet scan's options of an invocation: with
// notifications on, the safety-net scan (fanout_config.go).
func (d *Deps) fleetOptions() fleet.Options {
	return fleet.Options{SafetyScanEvery: d.Config.SafetyScanEvery, Unnotified: unnotified}
}

// Compact is the compactor's handler: on a scheduled event it maintains
// every registered table, most in need first, until the invocation's
// deadline minus the safety margin: lock (DynamoDB), compact, plan prune,
// enqueue ranges (SQS), refresh stats, release. Overlapping invocations are
// safe: a table locked by another run is skipped. A table's failure is
// reported in the summary and the TableErrors metric, not as a function
// error (which would make Lambda retry the whole run).
func (d *Deps) Compact(ctx context.Context, raw json.RawMessage) (CompactSummary, error) {
	start := time.Now()
	sum := CompactSummary{Function: string(RoleCompactor)}
	log := d.logger(ctx)
	ev, err := ParseScheduled(RoleCompactor, raw)
	if err != nil {
		log.ErrorContext(ctx, "rejected event", "err", err)
		return sum, err
	}
	sum.Trigger = ev.Source
	cat, err := d.Catalog(ctx)
	if err != nil {
		return sum, err
	}
	wctx, cancel := d.workContext(ctx, 0) // Runner and Compactor keep the margin
	defer cancel()
	m := d.metrics(RoleCompactor)
	r := d.newRunner(ctx, log, cat, m)
	if d.notifyProblem != "" {
		m.Count(telemetry.NotificationsMissing, 1)
	}
	if d.Jobs != nil {
		// Fan-out: inline while there is time, the rest as table jobs.
		d.compactFanout(ctx, wctx, r, log, m, &sum)
		d.writeStatusPage(ctx, cat, log)
		sum.ElapsedMS = time.Since(start).Milliseconds()
		if err := m.Flush(); err != nil {
			log.WarnContext(ctx, "metrics not written", "err", err)
		}
		log.InfoContext(ctx, "compactor run", "tables", len(sum.Tables), "errors", sum.Errors, "busy", sum.Busy,
			"not_reached", sum.NotReached, "jobs_enqueued", sum.JobsEnqueued, "in_retry", sum.InRetry,
			"stopped", sum.Stopped, "elapsed_ms", sum.ElapsedMS)
		return sum, nil
	}
	rep, err := fleet.New(r, d.fleetOptions()).Run(wctx)
	if err != nil {
		log.ErrorContext(ctx, "compactor run failed", "err", err)
		return sum, fmt.Errorf("compactor: %w", err)
	}
	sum.Stopped = rep.Stopped
	var ranges int
	for _, tr := range rep.Tables {
		sum.add(tr)
		ranges += len(tr.Prune.Ranges)
	}
	if refs, err := cat.Tables(ctx); err == nil {
		sum.Registered = len(refs)
		sum.NotReached = max(len(refs)-len(rep.Tables)-rep.Idle-rep.BackingOff, 0)
		sum.Idle, sum.BackingOff = rep.Idle, rep.BackingOff
	}
	d.writeStatusPage(ctx, cat, log)
	sum.ElapsedMS = time.Since(start).Milliseconds()
	m.Count(telemetry.TablesMaintained, len(rep.Tables)-sum.Errors-sum.Busy)
	m.Count(telemetry.TablesBusy, sum.Busy)
	m.Count(telemetry.TableErrors, sum.Errors)
	m.Count(telemetry.TablesNotReached, sum.NotReached)
	m.Count(telemetry.RangesEnqueued, ranges)
	if err := m.Flush(); err != nil {
		log.WarnContext(ctx, "metrics not written", "err", err)
	}
	log.InfoContext(ctx, "compactor run", "tables", len(sum.Tables), "errors", sum.Errors, "busy", sum.Busy,
		"not_reached", sum.NotReached, "ranges_enqueued", ranges, "stopped", sum.Stopped, "elapsed_ms", sum.ElapsedMS)
	return sum, nil
}
