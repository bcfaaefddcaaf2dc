package cli

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/tablekeep/tablekeep/shared/embedded"
	"github.com/tablekeep/tablekeep/shared/lock"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/progress"
)

// warehouseFlag adds --warehouse: a local directory holding _registry,
// _stats and the managed tables (the embedded default; AWS runs the same
// maintenance as Lambda functions).
func warehouseFlag(cmd *cobra.Command, dir *string) {
	cmd.Flags().StringVar(dir, "warehouse", "", "local warehouse directory (holds _registry, _stats and the tables)")
}

// progress is the progress-bar constructor for long local operations: bars
// on stderr when it is a terminal, none otherwise.
func (a *App) progress() func(desc string, total int) progress.Bar {
	return progress.For(a.Stderr)
}

func openWarehouse(ctx context.Context, app *App, dir string, clock lock.Clock) (*embedded.Warehouse, error) {
	if dir == "" {
		return nil, Usagef("--warehouse is required (a local directory)")
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("warehouse %s: no such directory", dir)
	}
	return embedded.Open(ctx, dir, clock, app.Logger, nil)
}

func newRegisterCmd(app *App) *cobra.Command {
	var dir string
	p := maintenance.DefaultPolicy()
	cmd := &cobra.Command{
		Use:   "register NAME PATH",
		Short: "Register a table (PATH relative to the warehouse) for maintenance, with its policy",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			w, err := openWarehouse(ctx, app, dir, nil)
			if err != nil {
				return err
			}
			if err := w.Catalog.Register(ctx, args[0], args[1], p); err != nil {
				return err
			}
			fmt.Fprintf(app.Stdout, "registered %s at %s (keep-last %d, grace %s, target %d rows)\n",
				args[0], args[1], p.KeepLast, p.Grace, p.TargetRows)
			return nil
		},
	}
	warehouseFlag(cmd, &dir)
	f := cmd.Flags()
	f.IntVar(&p.KeepLast, "keep-last", p.KeepLast, "newest versions always kept")
	f.DurationVar(&p.Grace, "grace", p.Grace, "keep versions superseded less than this long ago, and unreferenced files younger than this")
	f.Uint64Var(&p.TargetRows, "target-rows", p.TargetRows, "compaction target rows per fragment")
	f.Float64Var(&p.DeletedThreshold, "deleted-threshold", p.DeletedThreshold, "rewrite fragments with more than this share of deleted rows")
	return cmd
}

func newMaintainCmd(app *App) *cobra.Command {
	var dir string
	var dryRun, keys bool
	var ahead time.Duration
	cmd := &cobra.Command{
		Use:   "maintain",
		Short: "Compact, plan pruning, drain cleanup and sweep every registered table (or print the plan)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if err := checkClockAhead(ahead); err != nil {
				return err
			}
			var clock lock.Clock
			if ahead != 0 {
				clock = lock.AheadClock{Clock: lock.SystemClock(), Ahead: ahead}
			}
			w, err := openWarehouse(ctx, app, dir, clock)
			if err != nil {
				return err
			}
			rep, err := w.Maintain(ctx, embedded.Options{DryRun: dryRun, Progress: app.progress()})
			if err != nil {
				return err
			}
			out := maintainJSON(rep, dryRun, keys)
			if app.JSON() {
				return printJSON(app.Stdout, out)
			}
			return printMaintain(app, out, rep.Elapsed)
		},
	}
	warehouseFlag(cmd, &dir)
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print what would be done; change nothing")
	cmd.Flags().BoolVar(&keys, "keys", false, "with --dry-run: list every key that would be deleted")
	clockAheadFlag(cmd, &ahead)
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
	Table           string      `json:"table"`
	Skipped         string      `json:"skipped,omitempty"`
	FencingToken    uint64      `json:"fencing_token,omitempty"`
	Groups          int         `json:"compaction_groups"`
	GroupFragments  []int       `json:"group_fragments,omitempty"`
	GroupBytes      []uint64    `json:"group_bytes,omitempty"`
	FragmentsBefore int         `json:"input_fragments,omitempty"`
	RowsRewritten   uint64      `json:"rows_rewritten,omitempty"`
	Latest          uint64      `json:"latest"`
	Floor           uint64      `json:"floor"`
	Prunable        int         `json:"prunable_versions"`
	Ranges          []string    `json:"ranges"`
	Cleanup         []rangeJSON `json:"cleanup,omitempty"` // dry run: what the cleaner would delete per range
	Sweep           *sweepJSON  `json:"sweep,omitempty"`   // dry run: what the sweep would delete
	DeleteKeys      int         `json:"delete_keys"`       // dry run: cleanup + sweep
	DeleteBytes     int64       `json:"delete_bytes"`
	SweepDeleted    int         `json:"sweep_deleted,omitempty"`
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
	DeleteKeys     int         `json:"delete_keys,omitempty"`
	DeleteBytes    int64       `json:"delete_bytes,omitempty"`
	CleanupHandled int         `json:"cleanup_messages,omitempty"`
	CleanupFailed  int         `json:"cleanup_failed,omitempty"`
	ElapsedMS      int64       `json:"elapsed_ms"`
}

func maintainJSON(rep embedded.Report, dry, keys bool) maintainOut {
	out := maintainOut{DryRun: dry, CleanupHandled: rep.Drain.Succeeded, CleanupFailed: rep.Drain.Failed + rep.Drain.DeadLettered,
		ElapsedMS: rep.Elapsed.Milliseconds()}
	for _, tr := range rep.Run.Tables {
		tj := tableJSON{Table: tr.Table, Skipped: tr.Skipped, FencingToken: tr.Token, Latest: tr.Prune.Latest,
			Floor: tr.Prune.Floor, Prunable: tr.Prune.Prunable, Ranges: []string{}}
		if dry {
			tj.Groups = len(tr.Compaction.Groups)
			for _, g := range tr.Compaction.Groups {
				tj.GroupFragments = append(tj.GroupFragments, len(g.Fragments))
				tj.GroupBytes = append(tj.GroupBytes, g.InputBytes)
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
			if sr, ok := rep.Sweeps[tr.Table]; ok {
				tj.Sweep = &sweepJSON{Keys: len(sr.Planned), Bytes: sr.Bytes}
				if keys {
					tj.Sweep.List = sr.Planned
				}
				tj.DeleteKeys += len(sr.Planned)
				tj.DeleteBytes += sr.Bytes
			}
		} else {
			tj.Groups, tj.FragmentsBefore, tj.RowsRewritten = tr.Compacted.Committed, tr.Compacted.InputFrags, tr.Compacted.RowsWritten
			tj.SweepDeleted = rep.Sweeps[tr.Table].Deleted
		}
		for _, r := range tr.Prune.Ranges {
			tj.Ranges = append(tj.Ranges, fmt.Sprintf("%d-%d", r.From, r.To))
		}
		out.DeleteKeys += tj.DeleteKeys
		out.DeleteBytes += tj.DeleteBytes
		out.Tables = append(out.Tables, tj)
	}
	return out
}

func printMaintain(app *App, j maintainOut, elapsed time.Duration) error {
	dry := j.DryRun
	head := []string{"TABLE", "GROUPS", "LATEST", "FLOOR", "PRUNABLE", "RANGES", "NOTE"}
	if dry {
		head = []string{"TABLE", "GROUPS", "LATEST", "FLOOR", "PRUNABLE", "RANGES", "DELETE KEYS", "DELETE BYTES", "NOTE"}
	}
	var rows [][]string
	for _, t := range j.Tables {
		note := t.Skipped
		if !dry && note == "" {
			note = fmt.Sprintf("%d fragments rewritten, %d orphans swept", t.FragmentsBefore, t.SweepDeleted)
		}
		ranges := strconv.Itoa(len(t.Ranges))
		row := []string{t.Table, strconv.Itoa(t.Groups), strconv.FormatUint(t.Latest, 10),
			strconv.FormatUint(t.Floor, 10), strconv.Itoa(t.Prunable), ranges}
		if dry {
			row = append(row, strconv.Itoa(t.DeleteKeys), shortBytes(t.DeleteBytes))
		}
		rows = append(rows, append(row, note))
	}
	if err := printAligned(app.Stdout, head, rows); err != nil {
		return err
	}
	if !dry {
		_, err := fmt.Fprintf(app.Stdout, "cleanup: %d messages handled, %d failed; took %s\n", j.CleanupHandled, j.CleanupFailed, elapsed.Round(time.Millisecond))
		return err
	}
	// The plan, table by table: compaction groups, cleanup ranges, sweep.
	out := app.Stdout
	for _, t := range j.Tables {
		if t.Groups == 0 && len(t.Cleanup) == 0 && (t.Sweep == nil || t.Sweep.Keys == 0) {
			continue
		}
		fmt.Fprintf(out, "\n%s:\n", t.Table)
		for i, n := range t.GroupFragments {
			fmt.Fprintf(out, "  compact group %d: %d fragments, %s\n", i+1, n, shortBytes(int64(t.GroupBytes[i])))
		}
		for _, r := range t.Cleanup {
			fmt.Fprintf(out, "  cleanup %d-%d: %d versions; %d data/deletion files (%s), %d manifests and change records (%s)\n",
				r.From, r.To, r.Versions, r.DataKeys, shortBytes(r.DataBytes), r.MetaKeys, shortBytes(r.MetaBytes))
			for _, k := range r.Keys {
				fmt.Fprintf(out, "    %s\n", k)
			}
		}
		if t.Sweep != nil && t.Sweep.Keys > 0 {
			fmt.Fprintf(out, "  sweep: %d unreferenced files (%s)\n", t.Sweep.Keys, shortBytes(t.Sweep.Bytes))
			for _, k := range t.Sweep.List {
				fmt.Fprintf(out, "    %s\n", k)
			}
		}
	}
	_, err := fmt.Fprintf(out, "\ndry run: would delete %d keys, %s; nothing changed\n", j.DeleteKeys, shortBytes(j.DeleteBytes))
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
