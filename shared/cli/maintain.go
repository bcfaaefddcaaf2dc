package cli

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tablekeep/tablekeep/shared/catalog"
	"github.com/tablekeep/tablekeep/shared/formats"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/progress"
)

// progress is the progress-bar constructor for long local operations: bars
// on stderr when it is a terminal, none otherwise.
func (a *App) progress() func(desc string, total int) progress.Bar {
	if a.bars != nil {
		return a.bars
	}
	return progress.For(a.Stderr)
}

func newMaintainCmd(app *App) *cobra.Command {
	return newPassCmd(app, "maintain", allSteps,
		"Compact, prune, clean up and sweep every registered table, or one (--table NAME); --dry-run prints the plan",
		`Maintain the warehouse's registered tables: for each, under its lock,
compact small fragments and raise the retention floor, enqueueing the
versions below it; then clean up those versions (in-process, or by the
deployment's cleaner with --queue-url) and sweep unreferenced files older
than the grace window. The same library calls as the Lambda functions.

With --table NAME (a registered name) only that table is maintained.
--dry-run changes nothing and prints the plan: compaction groups, cleanup
ranges with every key and byte they delete (--keys lists them), why the
other versions are kept, and what compaction leaves for the next pass.`)
}

func newCompactCmd(app *App) *cobra.Command {
	return newPassCmd(app, "compact", steps{Compact: true},
		"Compact the small fragments of every registered table, or one (--table NAME), under its lock",
		`Compact only: fold small fragments (and fragments with many deleted rows)
into fragments of the policy's target rows, under the table's lock. The
retention floor is not raised (cleanup of versions already below it still
runs). --dry-run prints the groups.`)
}

func newPruneCmd(app *App) *cobra.Command {
	return newPassCmd(app, "prune", steps{Prune: true},
		"Raise the retention floor and clean up the versions below it, for every registered table or one (--table NAME)",
		`Prune only: under the table's lock, raise the retention floor as the
policy allows (keep-last, grace, tags) and enqueue the versions below it;
then clean them up (in-process, or by the deployment's cleaner with
--queue-url). --dry-run prints the ranges, their keys and bytes, and why the
other versions are kept.`)
}

func newSweepCmd(app *App) *cobra.Command {
	return newPassCmd(app, "sweep", steps{Sweep: true},
		"Delete unreferenced data and deletion files older than the grace window, for every registered table or one (--table NAME)",
		`Sweep only: delete data and deletion files that no retained version
references and that are older than the grace window (leftovers of failed
commits and crashed compactions). On a Lance dataset: data, deletion, index
and transaction files that no stored manifest references and that are older
than the grace window and 7 days (Lance's own threshold). Needs no lock.
--dry-run lists them.`)
}

// newPassCmd builds maintain, compact, prune and sweep: one pass (pass.go)
// running the given steps.
func newPassCmd(app *App, name string, st steps, short, long string) *cobra.Command {
	var wf warehouseFlags
	var dryRun, keys bool
	cmd := &cobra.Command{
		Use:   name + " [--table NAME] [--dry-run]",
		Short: short,
		Long:  long,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if err := checkClockAhead(wf.ahead); err != nil {
				return err
			}
			if keys && !dryRun {
				return Usagef("--keys lists the keys a dry run would delete: use it with --dry-run")
			}
			// Sweeping needs no lock (the sweeper function takes none).
			write := !dryRun && (st.Compact || st.Prune)
			w, err := openWarehouse(ctx, app, wf, openMode{Lock: write})
			if err != nil {
				return err
			}
			if err := w.checkLock(ctx); err != nil {
				return err
			}
			var names []string
			if app.TableURI != "" {
				names = []string{app.TableURI}
			}
			rep, runErr := w.pass(ctx, passOptions{DryRun: dryRun, Tables: names, Steps: st, Progress: app.progress()})
			if len(rep.Run.Tables) == 0 && len(rep.Sweeps) == 0 {
				return runErr
			}
			out := maintainJSON(rep, dryRun, keys, w.Remote != nil)
			if app.JSON() {
				err = printJSON(app.Stdout, out)
			} else {
				err = printMaintain(app, out, rep.Elapsed)
			}
			return errors.Join(runErr, err)
		},
	}
	addWarehouseFlags(cmd, &wf, true)
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print what would be done; change nothing")
	cmd.Flags().BoolVar(&keys, "keys", false, "with --dry-run: list every key that would be deleted")
	clockAheadFlag(cmd, &wf.ahead)
	return cmd
}

// EnvAllowClockAhead must be "test" for --clock-ahead to be accepted: the
// variable that gates the Lambda functions' clock offset (awsfn).
const EnvAllowClockAhead = "TABLEKEEP_ALLOW_CLOCK_OFFSET"

// clockAheadFlag adds the hidden, test-only --clock-ahead flag: it makes
// versions and files look older than they are, so on real data it would
// let maintenance delete what a writer may still commit on.
func clockAheadFlag(cmd *cobra.Command, ahead *time.Duration) {
	cmd.Flags().DurationVar(ahead, "clock-ahead", 0, "TEST ONLY, needs "+EnvAllowClockAhead+"=test: act as if the clock were this far ahead")
	_ = cmd.Flags().MarkHidden("clock-ahead")
}

func checkClockAhead(ahead time.Duration) error {
	if ahead != 0 && os.Getenv(EnvAllowClockAhead) != "test" {
		return Usagef("--clock-ahead is for tests only (it bypasses the grace window) and needs %s=test", EnvAllowClockAhead)
	}
	return nil
}

type tableJSON struct {
	sweepOnly       bool        // a row of the sweep step alone (no Runner report)
	swept           bool        // the sweep step ran on it
	compacted       bool        // the compaction step ran on it
	Table           string      `json:"table"`
	Format          string      `json:"format,omitempty"` // "lance"; omitted for tablekeep tables
	Skipped         string      `json:"skipped,omitempty"`
	Error           string      `json:"error,omitempty"`
	FencingToken    uint64      `json:"fencing_token,omitempty"`
	Groups          int         `json:"compaction_groups"`
	GroupFragments  []int       `json:"group_fragments,omitempty"`
	CompactionPlan  []string    `json:"compaction_plan,omitempty"` // a Lance dataset's groups, one line each
	GroupBytes      []uint64    `json:"group_bytes,omitempty"`
	FragmentsBefore int         `json:"input_fragments,omitempty"`
	RowsRewritten   uint64      `json:"rows_rewritten,omitempty"`
	LeftGroups      int         `json:"compaction_groups_left,omitempty"`    // dry run: beyond this pass's limits
	LeftFragments   int         `json:"compaction_fragments_left,omitempty"` // dry run
	Latest          uint64      `json:"latest"`
	Floor           uint64      `json:"floor"`
	Prunable        int         `json:"prunable_versions"`
	Ranges          []string    `json:"ranges"`
	Kept            []keptJSON  `json:"kept,omitempty"`    // dry run: why the other versions are kept
	Cleanup         []rangeJSON `json:"cleanup,omitempty"` // dry run: what the cleaner would delete per range
	Sweep           *sweepJSON  `json:"sweep,omitempty"`   // dry run: what the sweep would delete
	// DeleteKeys and DeleteBytes: dry run, what cleanup and sweep would
	// delete; real run, what they deleted (with --queue-url, the sweep
	// only: the deployment's cleaner does the cleanup).
	DeleteKeys     int   `json:"delete_keys"`
	DeleteBytes    int64 `json:"delete_bytes"`
	VersionsPruned int   `json:"versions_pruned"` // real run: manifests deleted by cleanup
	RangesSent     int   `json:"ranges_sent,omitempty"`
	SweepDeleted   int   `json:"sweep_deleted,omitempty"`

	// DeletedKept, DeletedKeptReason: a Lance dataset's deleted rows its
	// compaction could not drop, and why (maintenance.CompactionResult's).
	DeletedKept       uint64 `json:"deleted_rows_kept,omitempty"`
	DeletedKeptReason string `json:"deleted_rows_kept_reason,omitempty"`
}

type keptJSON struct {
	From   uint64 `json:"from"`
	To     uint64 `json:"to"`
	Reason string `json:"reason"`
	Until  string `json:"until,omitempty"`
}

type rangeJSON struct {
	From          uint64   `json:"from"`
	To            uint64   `json:"to"`
	ChangeRecords int      `json:"change_records"`
	DataKeys      int      `json:"data_keys"`
	DataBytes     int64    `json:"data_bytes"`
	MetaKeys      int      `json:"manifest_and_change_keys"`
	MetaBytes     int64    `json:"manifest_and_change_bytes"`
	Versions      int      `json:"versions"`
	KeptForTags   int      `json:"kept_for_tags,omitempty"`
	Keys          []string `json:"keys,omitempty"`
}

type sweepJSON struct {
	Keys  int      `json:"keys"`
	Bytes int64    `json:"bytes"`
	List  []string `json:"list,omitempty"`
}

type maintainOut struct {
	DryRun         bool        `json:"dry_run"`
	Tables         []tableJSON `json:"tables"`
	DeleteKeys     int         `json:"delete_keys"`
	DeleteBytes    int64       `json:"delete_bytes"`
	VersionsPruned int         `json:"versions_pruned"`
	CleanupHandled int         `json:"cleanup_messages,omitempty"`
	CleanupFailed  int         `json:"cleanup_failed,omitempty"`
	RangesSent     int         `json:"ranges_sent,omitempty"` // --queue-url: left to the deployment's cleaner
	ElapsedMS      int64       `json:"elapsed_ms"`
}

func maintainJSON(rep passReport, dry, keys, remote bool) maintainOut {
	out := maintainOut{DryRun: dry, Tables: []tableJSON{}, CleanupHandled: rep.Drain.Succeeded,
		CleanupFailed: rep.Drain.Failed + rep.Drain.DeadLettered, ElapsedMS: rep.Elapsed.Milliseconds()}
	seen := map[string]bool{}
	for _, tr := range rep.Run.Tables {
		seen[tr.Table] = true
		tj := tableJSON{Table: tr.Table, Skipped: tr.Skipped, FencingToken: tr.Token, Latest: tr.Prune.Latest,
			Floor: tr.Prune.Floor, Prunable: tr.Prune.Prunable, Ranges: []string{}, compacted: rep.Steps.Compact}
		if tr.Outcome == maintenance.Failed {
			tj.Skipped, tj.Error = "", tr.Error
		}
		if dry {
			tj.Groups = len(tr.Compaction.Groups)
			for _, g := range tr.Compaction.Groups {
				tj.GroupFragments = append(tj.GroupFragments, len(g.Fragments))
				tj.GroupBytes = append(tj.GroupBytes, g.InputBytes)
			}
			left := rep.Leftover[tr.Table]
			tj.LeftGroups, tj.LeftFragments = left[0], left[1]
			if tr.CompactionGroups != nil {
				tj.Groups, tj.CompactionPlan = len(tr.CompactionGroups), tr.CompactionGroups
			}
			for _, k := range rep.Kept[tr.Table] {
				kj := keptJSON{From: k.From, To: k.To, Reason: k.Reason}
				if !k.Until.IsZero() {
					kj.Until = k.Until.UTC().Format(time.RFC3339)
				}
				tj.Kept = append(tj.Kept, kj)
			}
			for _, rp := range rep.Cleanup[tr.Table] {
				rj := rangeJSON{From: rp.Range.From, To: rp.Range.To, ChangeRecords: rp.ChangeRecords,
					DataKeys: len(rp.DataKeys), DataBytes: rp.DataBytes, MetaKeys: len(rp.MetaKeys), MetaBytes: rp.MetaBytes,
					Versions: rp.VersionsDeleted, KeptForTags: rp.KeptForTags}
				if keys {
					rj.Keys = append(append([]string{}, rp.DataKeys...), rp.MetaKeys...)
				}
				tj.Cleanup = append(tj.Cleanup, rj)
				tj.DeleteKeys += rp.Keys()
				tj.DeleteBytes += rp.DataBytes + rp.MetaBytes
			}
		} else {
			tj.Groups, tj.FragmentsBefore, tj.RowsRewritten = tr.Compacted.Committed, tr.Compacted.InputFrags, tr.Compacted.RowsWritten
			tj.DeletedKept, tj.DeletedKeptReason = tr.Compacted.DeletedKept, tr.Compacted.DeletedKeptReason
			if c := rep.Cleaned[tr.Table]; c != nil {
				tj.VersionsPruned, tj.DeleteKeys, tj.DeleteBytes = c.Versions, c.Keys, c.Bytes
			}
			if remote {
				tj.RangesSent = len(tr.Prune.Ranges)
			}
		}
		for _, r := range tr.Prune.Ranges {
			tj.Ranges = append(tj.Ranges, fmt.Sprintf("%d-%d", r.From, r.To))
		}
		out.Tables = append(out.Tables, tj)
	}
	// The sweep step alone has no Runner reports: one row per swept table.
	for _, name := range slices.Sorted(maps.Keys(rep.Sweeps)) {
		if !seen[name] {
			out.Tables = append(out.Tables, tableJSON{Table: name, Ranges: []string{}, sweepOnly: true})
		}
	}
	for i := range out.Tables {
		tj := &out.Tables[i]
		if e, ok := rep.Errors[tj.Table]; ok && tj.Error == "" {
			tj.Error = e
		}
		tj.Format = rep.Formats[tj.Table]
		if sr, ok := rep.Sweeps[tj.Table]; ok && sr.Skipped != "" && tj.Skipped == "" && len(rep.Run.Tables) == 0 {
			tj.Skipped = sr.Skipped // the sweep step alone
		}
		if sr, ok := rep.Sweeps[tj.Table]; ok {
			tj.swept = true
			if dry {
				tj.Sweep = &sweepJSON{Keys: len(sr.Planned), Bytes: sr.Bytes}
				if keys {
					tj.Sweep.List = sr.Planned
				}
				tj.DeleteKeys += len(sr.Planned)
			} else {
				tj.SweepDeleted = sr.Deleted
				tj.DeleteKeys += sr.Deleted
			}
			tj.DeleteBytes += sr.Bytes
		}
		out.DeleteKeys += tj.DeleteKeys
		out.DeleteBytes += tj.DeleteBytes
		out.VersionsPruned += tj.VersionsPruned
		out.RangesSent += tj.RangesSent
	}
	return out
}

// lanceNote is a real run's NOTE for a Lance dataset: its fragments are
// folded (page splicing), its unreferenced files swept.
func lanceNote(t tableJSON) string {
	swept := plural(t.SweepDeleted, "unreferenced file", "unreferenced files") + " swept"
	if t.sweepOnly {
		return t.Format + ": " + swept
	}
	note := t.Format + ": " + plural(t.FragmentsBefore, "fragment", "fragments") + " folded"
	if t.DeletedKeptReason != "" {
		note += fmt.Sprintf(", deleted rows kept: %s (%d rows)", t.DeletedKeptReason, t.DeletedKept)
	}
	if t.swept {
		note += ", " + swept
	}
	return note
}

func printMaintain(app *App, j maintainOut, elapsed time.Duration) error {
	dry := j.DryRun
	head := []string{"TABLE", "GROUPS", "LATEST", "FLOOR", "PRUNED", "DELETED KEYS", "DELETED BYTES", "NOTE"}
	if dry {
		head = []string{"TABLE", "GROUPS", "LATEST", "FLOOR", "PRUNABLE", "RANGES", "DELETE KEYS", "DELETE BYTES", "NOTE"}
	}
	var rows [][]string
	unmeasured := false
	for _, t := range j.Tables {
		note := t.Skipped
		switch {
		case t.Error != "":
			note = "error: " + t.Error
		case !dry && note == "" && t.Format == formats.Lance:
			note = lanceNote(t)
		case !dry && note == "":
			var parts []string
			if t.compacted {
				parts = append(parts, plural(t.FragmentsBefore, "fragment", "fragments")+" rewritten")
			}
			if t.swept {
				parts = append(parts, plural(t.SweepDeleted, "unreferenced file", "unreferenced files")+" swept")
			}
			note = strings.Join(parts, ", ")
			if t.RangesSent > 0 {
				note += fmt.Sprintf(", %s sent to the queue", plural(t.RangesSent, "cleanup range", "cleanup ranges"))
			}
		}
		// A row of the sweep alone, or of a step that read no version,
		// has no latest version or floor to show.
		latest, floor := strconv.FormatUint(t.Latest, 10), strconv.FormatUint(t.Floor, 10)
		if t.sweepOnly || t.Latest == 0 {
			latest, floor = "-", "-"
		}
		row := []string{t.Table, strconv.Itoa(t.Groups), latest, floor}
		if dry {
			row = append(row, strconv.Itoa(t.Prunable), strconv.Itoa(len(t.Ranges)))
		} else {
			row = append(row, strconv.Itoa(t.VersionsPruned))
		}
		bytes := shortBytes(t.DeleteBytes)
		if !dry && t.Format == formats.Lance && t.DeleteBytes == 0 && t.DeleteKeys > 0 {
			// The cleanup of a Lance dataset counts keys, not bytes (its
			// dry run measures them from listings).
			bytes, unmeasured = "-", true
		}
		row = append(row, strconv.Itoa(t.DeleteKeys), bytes)
		rows = append(rows, append(row, note))
	}
	if err := printAligned(app.Stdout, head, rows); err != nil {
		return err
	}
	out := app.Stdout
	if !dry {
		size := shortBytes(j.DeleteBytes)
		if unmeasured {
			size += "; not measured for lance"
		}
		fmt.Fprintf(out, "deleted %s (%s), %s pruned", plural(j.DeleteKeys, "key", "keys"), size, plural(j.VersionsPruned, "version", "versions"))
		if j.RangesSent > 0 {
			fmt.Fprintf(out, "; %s sent to the deployment's queue", plural(j.RangesSent, "cleanup range", "cleanup ranges"))
		}
		_, err := fmt.Fprintf(out, "; cleanup: %s handled, %d failed; took %s\n", plural(j.CleanupHandled, "message", "messages"), j.CleanupFailed, elapsed.Round(time.Millisecond))
		return err
	}
	// The plan, table by table: compaction groups, cleanup ranges, kept
	// versions, sweep.
	for _, t := range j.Tables {
		if t.Error != "" || t.Skipped != "" {
			continue
		}
		idle := len(t.GroupFragments) == 0 && len(t.CompactionPlan) == 0 && t.LeftFragments == 0 && len(t.Cleanup) == 0 && (t.Sweep == nil || t.Sweep.Keys == 0)
		system := t.Table == catalog.RegistryName || t.Table == catalog.StatsName
		if idle && (len(t.Kept) == 0 || system) {
			// Nothing to say (e.g. the sweep alone, nothing to sweep), or
			// only why the warehouse's own _registry and _stats keep their
			// versions: their rows above say it.
			continue
		}
		fmt.Fprintf(out, "\n%s:\n", t.Table)
		for i, n := range t.GroupFragments {
			fmt.Fprintf(out, "  compact group %d: %s, %s\n", i+1, plural(n, "fragment", "fragments"), shortBytes(int64(t.GroupBytes[i])))
		}
		for i, g := range t.CompactionPlan {
			fmt.Fprintf(out, "  compact group %d: %s\n", i+1, g)
		}
		if t.LeftFragments > 0 {
			fmt.Fprintf(out, "  compaction leaves %s in %s for the next pass (per-run limits)\n", plural(t.LeftFragments, "fragment", "fragments"), plural(t.LeftGroups, "group", "groups"))
		}
		for _, r := range t.Cleanup {
			fmt.Fprintf(out, "  cleanup %d-%d: %s; %s (%s), %s (%s)\n",
				r.From, r.To, plural(r.Versions, "version", "versions"), plural(r.DataKeys, "data/deletion file", "data/deletion files"), shortBytes(r.DataBytes),
				plural(r.MetaKeys, "manifest or change record", "manifests and change records"), shortBytes(r.MetaBytes))
			for _, k := range r.Keys {
				fmt.Fprintf(out, "    %s\n", k)
			}
		}
		if len(t.Ranges) == 0 && len(t.Kept) > 0 {
			fmt.Fprintf(out, "  nothing to prune:\n")
		}
		for _, k := range t.Kept {
			vs := fmt.Sprintf("version %d", k.From)
			if k.To > k.From {
				vs = fmt.Sprintf("versions %d-%d", k.From, k.To)
			}
			fmt.Fprintf(out, "  keep %s: %s\n", vs, k.Reason)
		}
		if t.Sweep != nil && t.Sweep.Keys > 0 {
			fmt.Fprintf(out, "  sweep: %s (%s)\n", plural(t.Sweep.Keys, "unreferenced file", "unreferenced files"), shortBytes(t.Sweep.Bytes))
			for _, k := range t.Sweep.List {
				fmt.Fprintf(out, "    %s\n", k)
			}
		}
	}
	_, err := fmt.Fprintf(out, "\ndry run: would delete %s, %s; nothing changed\n", plural(j.DeleteKeys, "key", "keys"), shortBytes(j.DeleteBytes))
	return err
}

// shortBytes renders a byte count compactly: "512 B", "1.5 KiB".
func shortBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
