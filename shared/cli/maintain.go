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
)

// warehouseFlag adds --warehouse: a local directory holding _registry,
// _stats and the managed tables (the embedded default; AWS runs the same
// maintenance as Lambda functions).
func warehouseFlag(cmd *cobra.Command, dir *string) {
	cmd.Flags().StringVar(dir, "warehouse", "", "local warehouse directory (holds _registry, _stats and the tables)")
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
	var dryRun bool
	var ahead time.Duration
	cmd := &cobra.Command{
		Use:   "maintain",
		Short: "Compact, plan pruning, drain cleanup and sweep every registered table (or print the plan)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			var clock lock.Clock
			if ahead != 0 {
				clock = aheadClock{lock.SystemClock(), ahead}
			}
			w, err := openWarehouse(ctx, app, dir, clock)
			if err != nil {
				return err
			}
			rep, err := w.Maintain(ctx, embedded.Options{DryRun: dryRun})
			if err != nil {
				return err
			}
			if app.JSON() {
				return printJSON(app.Stdout, maintainJSON(rep, dryRun))
			}
			return printMaintain(app, rep, dryRun)
		},
	}
	warehouseFlag(cmd, &dir)
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print what would be done; change nothing")
	cmd.Flags().DurationVar(&ahead, "clock-ahead", 0, "act as if the clock were this far ahead (demos and tests: lets versions age past the grace window)")
	return cmd
}

type aheadClock struct {
	lock.Clock
	ahead time.Duration
}

func (c aheadClock) Now() time.Time { return c.Clock.Now().Add(c.ahead) }

type tableJSON struct {
	Table           string   `json:"table"`
	Skipped         string   `json:"skipped,omitempty"`
	FencingToken    uint64   `json:"fencing_token,omitempty"`
	Groups          int      `json:"compaction_groups"`
	GroupFragments  []int    `json:"group_fragments,omitempty"`
	FragmentsBefore int      `json:"input_fragments,omitempty"`
	RowsRewritten   uint64   `json:"rows_rewritten,omitempty"`
	Latest          uint64   `json:"latest"`
	Floor           uint64   `json:"floor"`
	Prunable        int      `json:"prunable_versions"`
	Ranges          []string `json:"ranges"`
	SweepDeleted    int      `json:"sweep_deleted,omitempty"`
}

type maintainOut struct {
	DryRun         bool        `json:"dry_run"`
	Tables         []tableJSON `json:"tables"`
	CleanupHandled int         `json:"cleanup_messages,omitempty"`
	CleanupFailed  int         `json:"cleanup_failed,omitempty"`
	ElapsedMS      int64       `json:"elapsed_ms"`
}

func maintainJSON(rep embedded.Report, dry bool) maintainOut {
	out := maintainOut{DryRun: dry, CleanupHandled: rep.Drain.Succeeded, CleanupFailed: rep.Drain.Failed + rep.Drain.DeadLettered,
		ElapsedMS: rep.Elapsed.Milliseconds()}
	for _, tr := range rep.Run.Tables {
		tj := tableJSON{Table: tr.Table, Skipped: tr.Skipped, FencingToken: tr.Token, Latest: tr.Prune.Latest,
			Floor: tr.Prune.Floor, Prunable: tr.Prune.Prunable, Ranges: []string{}}
		if dry {
			tj.Groups = len(tr.Compaction.Groups)
			for _, g := range tr.Compaction.Groups {
				tj.GroupFragments = append(tj.GroupFragments, len(g.Fragments))
			}
		} else {
			tj.Groups, tj.FragmentsBefore, tj.RowsRewritten = tr.Compacted.Committed, tr.Compacted.InputFrags, tr.Compacted.RowsWritten
			tj.SweepDeleted = rep.Sweeps[tr.Table].Deleted
		}
		for _, r := range tr.Prune.Ranges {
			tj.Ranges = append(tj.Ranges, fmt.Sprintf("%d-%d", r.From, r.To))
		}
		out.Tables = append(out.Tables, tj)
	}
	return out
}

func printMaintain(app *App, rep embedded.Report, dry bool) error {
	j := maintainJSON(rep, dry)
	head := []string{"TABLE", "GROUPS", "LATEST", "FLOOR", "PRUNABLE", "RANGES", "NOTE"}
	var rows [][]string
	for _, t := range j.Tables {
		note := t.Skipped
		if !dry && note == "" {
			note = fmt.Sprintf("%d fragments rewritten, %d orphans swept", t.FragmentsBefore, t.SweepDeleted)
		}
		ranges := strconv.Itoa(len(t.Ranges))
		rows = append(rows, []string{t.Table, strconv.Itoa(t.Groups), strconv.FormatUint(t.Latest, 10),
			strconv.FormatUint(t.Floor, 10), strconv.Itoa(t.Prunable), ranges, note})
	}
	if err := printAligned(app.Stdout, head, rows); err != nil {
		return err
	}
	if dry {
		_, err := fmt.Fprintln(app.Stdout, "dry run: nothing changed")
		return err
	}
	_, err := fmt.Fprintf(app.Stdout, "cleanup: %d messages handled, %d failed; took %s\n", j.CleanupHandled, j.CleanupFailed, rep.Elapsed.Round(time.Millisecond))
	return err
}
