package cli

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/tablekeep/tablekeep/shared/lock"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/progress"
	"github.com/tablekeep/tablekeep/shared/table"
)

// tableStatus is one row of `tablekeep status`.
type tableStatus struct {
	Table          string  `json:"table"`
	Root           string  `json:"root"`
	Latest         uint64  `json:"latest_version"`
	Floor          uint64  `json:"floor"`
	Versions       int     `json:"versions"`
	Unreclaimed    int     `json:"unreclaimed_versions"`
	Rows           uint64  `json:"rows"`
	Fragments      int     `json:"fragments"`
	SmallFrags     int     `json:"small_fragments"`
	SmallRatio     float64 `json:"small_fragment_ratio"`
	ManifestBytes  int64   `json:"manifest_bytes"`
	GarbageFiles   int     `json:"garbage_files"`
	GarbageBytes   int64   `json:"garbage_bytes"`
	LastCompaction string  `json:"last_compaction,omitempty"`
	LastCleanup    string  `json:"last_cleanup,omitempty"`
	Error          string  `json:"error,omitempty"`
}

func newStatusCmd(app *App) *cobra.Command {
	var dir string
	var ahead time.Duration
	parallel := defaultStatusParallel
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the health of every registered table: versions, backlog, fragments, garbage, last maintenance",
		Long: `Show every table in the warehouse's _registry: versions stored, unreclaimed
versions (stored below the retention floor), fragments and the share under
the compaction target, garbage bytes (data and deletion files no retained
version references and older than the grace window: what a sweep would
delete), and when compaction and cleanup last ran. Reads only; it lists and
reads the tables' metadata.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if err := checkClockAhead(ahead); err != nil {
				return err
			}
			var clock lock.Clock = lock.SystemClock()
			if ahead != 0 {
				clock = lock.AheadClock{Clock: clock, Ahead: ahead}
			}
			w, err := openWarehouse(ctx, app, dir, clock)
			if err != nil {
				return err
			}
			refs, err := w.Catalog.Tables(ctx)
			if err != nil {
				return err
			}
			stats, err := w.Catalog.Stats(ctx)
			if err != nil {
				app.Logger.Warn("_stats unreadable", "err", err)
			}
			bar := progress.New(app.Stderr, "status", len(refs))
			// Tables are read at once (at most --parallel), each with its
			// own bounded fan-out; rows keep the registry's order.
			rows := make([]tableStatus, len(refs))
			var barMu sync.Mutex
			var g errgroup.Group
			g.SetLimit(max(parallel, 1))
			for i, ref := range refs {
				g.Go(func() error {
					rows[i] = statusOf(ctx, w.Store, ref, stats[ref.Name], clock)
					barMu.Lock()
					_ = bar.Add(1)
					barMu.Unlock()
					return nil
				})
			}
			_ = g.Wait()
			_ = bar.Finish()
			if err := ctx.Err(); err != nil {
				return err
			}
			if app.JSON() {
				return printJSON(app.Stdout, struct {
					Tables []tableStatus `json:"tables"`
				}{rows})
			}
			head := []string{"TABLE", "VERSIONS", "UNRECLAIMED", "FRAGMENTS", "SMALL", "GARBAGE", "LAST COMPACTION", "LAST CLEANUP"}
			var cells [][]string
			for _, r := range rows {
				if r.Error != "" {
					cells = append(cells, []string{r.Table, "error: " + r.Error, "", "", "", "", "", ""})
					continue
				}
				cells = append(cells, []string{r.Table, strconv.Itoa(r.Versions), strconv.Itoa(r.Unreclaimed),
					strconv.Itoa(r.Fragments), fmt.Sprintf("%.0f%%", 100*r.SmallRatio), shortBytes(r.GarbageBytes),
					orNever(r.LastCompaction), orNever(r.LastCleanup)})
			}
			return printAligned(app.Stdout, head, cells)
		},
	}
	warehouseFlag(cmd, &dir)
	clockAheadFlag(cmd, &ahead)
	cmd.Flags().IntVar(&parallel, "parallel", defaultStatusParallel, "tables read at once (each sends at most "+strconv.Itoa(maintenance.DefaultConcurrency)+" requests at once)")
	return cmd
}

// defaultStatusParallel is how many tables `tablekeep status` reads at once.
const defaultStatusParallel = 4

func orNever(s string) string {
	if s == "" {
		return "never"
	}
	return s
}

func statusOf(ctx context.Context, store objstore.Store, ref maintenance.TableRef, old maintenance.TableStats, clock lock.Clock) tableStatus {
	r := tableStatus{Table: ref.Name, Root: ref.Root}
	fail := func(err error) tableStatus { r.Error = oneLine(err.Error()); return r }
	t, err := table.Open(ctx, store, ref.Root, table.Options{Clock: clock.Now, Grace: ref.Policy.Grace})
	if err != nil {
		return fail(err)
	}
	if r.Floor, err = t.Floor(ctx); err != nil {
		return fail(err)
	}
	// The stats and the dry-run sweep only read: they run at once.
	var s maintenance.TableStats
	var sr maintenance.SweepResult
	var statsErr, sweepErr error
	var g errgroup.Group
	g.Go(func() error { s, statsErr = maintenance.ComputeStats(ctx, t, ref, r.Floor); return nil })
	g.Go(func() error { sr, sweepErr = maintenance.Sweep(ctx, t, ref.Policy, clock.Now(), 0, true); return nil })
	_ = g.Wait()
	if statsErr != nil {
		return fail(statsErr)
	}
	r.Latest = t.Cached().Version
	r.Versions, r.Unreclaimed, r.Rows, r.Fragments, r.SmallFrags = s.Versions, s.Unreclaimed, s.Rows, s.Fragments, s.SmallFrags
	r.ManifestBytes = s.ManifestBytes
	if s.Fragments > 0 {
		r.SmallRatio = float64(s.SmallFrags) / float64(s.Fragments)
	}
	if sweepErr != nil {
		return fail(sweepErr)
	}
	r.GarbageFiles, r.GarbageBytes = len(sr.Planned), sr.Bytes
	if !old.LastCompaction.IsZero() {
		r.LastCompaction = old.LastCompaction.UTC().Format(time.RFC3339)
	}
	last := s.LastCleanup
	if last.IsZero() {
		last = old.LastCleanup
	}
	if !last.IsZero() {
		r.LastCleanup = last.UTC().Format(time.RFC3339)
	}
	return r
}
