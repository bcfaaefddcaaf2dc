package cli

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/tablekeep/tablekeep/shared/clock"
	"github.com/tablekeep/tablekeep/shared/formats"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/progress"
	"github.com/tablekeep/tablekeep/shared/warehouse"
)

// tableStatus is one row of `tablekeep status`.
type tableStatus struct {
	Table string `json:"table"`
	Root  string `json:"root"`
	// Health is "ok", "behind" (a backlog older than --max-lag), "not
	// pruned" (a Lance restore blocks pruning), "damaged" (listed
	// versions reference deleted files) or "unreadable"; Reason says why.
	Health   string `json:"health"`
	Reason   string `json:"reason,omitempty"`
	Latest   uint64 `json:"latest_version"`
	Floor    uint64 `json:"floor"`
	Versions int    `json:"versions"`
	// PrunableNow: versions the next pass deletes (the prune planner's own
	// rule); PrunableLater more once their grace window ends, at
	// PrunableAt.
	PrunableNow   int    `json:"prunable_versions"`
	PrunableSince string `json:"prunable_since,omitempty"`
	PrunableLater int    `json:"prunable_later"`
	PrunableAt    string `json:"prunable_at,omitempty"`
	// PrunableLeased more are held by lease PrunableLeasedBy, until
	// PrunableLeasedTill at the latest (status_lease.go).
	PrunableLeased     int    `json:"prunable_leased,omitempty"`
	PrunableLeasedBy   string `json:"prunable_leased_by,omitempty"`
	PrunableLeasedTill string `json:"prunable_leased_until,omitempty"`
	// Unreclaimed: stored versions below the floor already set.
	Unreclaimed int `json:"unreclaimed_versions"`
	// Damaged: listed versions whose manifests reference deleted files
	// (health "damaged"; a Lance dataset's, checked at a bounded cost).
	Damaged   int    `json:"damaged_versions,omitempty"`
	Rows      uint64 `json:"rows"`
	Fragments int    `json:"fragments"`
	// Compactable: fragments the compaction planner would fold (its own
	// rule); SmallFrags: under the target rows (a lone small fragment is
	// left alone).
	Compactable      int        `json:"compactable_fragments"`
	CompactGroups    int        `json:"compaction_groups"`
	CompactableSince string     `json:"compactable_since,omitempty"`
	SmallFrags       int        `json:"small_fragments"`
	SmallRatio       float64    `json:"small_fragment_ratio"`
	ManifestBytes    int64      `json:"manifest_bytes"`
	GarbageFiles     int        `json:"garbage_files"`
	GarbageBytes     int64      `json:"garbage_bytes"`
	LastCompaction   string     `json:"last_compaction,omitempty"`
	LastCleanup      string     `json:"last_cleanup,omitempty"`
	Policy           policyJSON `json:"policy"`
	Error            string     `json:"error,omitempty"`
	// Leases are the table's reader leases; LeaseHold says what the one on
	// the lowest version pins (status_lease.go).
	Leases    []leaseJSON `json:"leases,omitempty"`
	LeaseHold string      `json:"lease_hold,omitempty"`
	// DeletedRows: rows masked by deletions in the latest version
	// (status_html.go).
	DeletedRows uint64 `json:"deleted_rows"`
	// A Lance dataset's (its compaction planner's dry plan):
	// DeletedShare is DeletedRows of its physical rows; KeptFragments the
	// fragments the planner leaves, by reason (covered by an index,
	// several data files, ...); CompactRefused why it refuses the whole
	// dataset; CompactBound: from this many compactable fragments, older
	// than --max-lag, health is "behind" (the policy's
	// CompactMinFragments).
	DeletedShare   float64        `json:"deleted_row_share,omitempty"`
	KeptFragments  map[string]int `json:"kept_fragments,omitempty"`
	CompactRefused string         `json:"compact_refused,omitempty"`
	CompactBound   int            `json:"compactable_bound,omitempty"`
}

// bucketProblem is why the warehouse's bucket is unhealthy for every
// table ("" if it is not): a versioned bucket without a noncurrent-version
// expiration rule, which the functions refuse at cold start, since deletes
// there reclaim nothing.
func bucketProblem(ctx context.Context, w *whouse) string {
	if w.CheckBucket == nil {
		return ""
	}
	if err := w.CheckBucket(ctx); errors.Is(err, warehouse.ErrVersionedBucket) {
		return err.Error()
	}
	return ""
}

// errUnhealthy makes status exit 1 after printing every row.
var errUnhealthy = errors.New("unhealthy tables")

func newStatusCmd(app *App) *cobra.Command {
	var wf warehouseFlags
	var lag time.Duration
	var htmlFile string
	parallel := defaultStatusParallel
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Is every registered table healthy, what is its backlog, when will it shrink (exit 1 if not)",
		Long: `Show every table in the warehouse's _registry (or one: --table NAME):

  HEALTH       ok; behind: a backlog older than --max-lag (default: the
               policy's re-plan interval, 6h, plus an hour: longer than a
               lost cleanup message takes to be found again); not pruned
               (a Lance dataset after a LanceDB restore); damaged: listed
               versions reference deleted files (a Lance dataset: the
               lowest 8 versions below the floor checked); unreadable. The
               reasons follow the table, one line per table
  PRUNABLE     versions the next pass deletes (the prune planner's rule),
               "+N held by lease ID until T": more a reader lease holds,
               and "+N at T": more once their grace window ends at T
  COMPACTABLE  fragments the compaction planner would fold (its rule)
  GARBAGE      unreferenced data and deletion files older than the grace
               window: what a sweep deletes
  LAST COMPACTION, LAST CLEANUP, and the POLICY in force

Reads only, and only a warehouse: a location without _registry is an
error. Exit status 1 when any table is not ok, so status -o json can drive
monitoring.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if err := checkClockAhead(wf.ahead); err != nil {
				return err
			}
			if lag < 0 {
				return Usagef("--max-lag %s must not be negative", lag)
			}
			if parallel < 1 {
				return Usagef("--parallel %d: read at least 1 table at once", parallel)
			}
			w, err := openWarehouse(ctx, app, wf, openMode{})
			if err != nil {
				return err
			}
			var names []string
			if app.TableURI != "" {
				names = []string{app.TableURI}
			}
			refs, err := w.refs(ctx, names)
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
			g.SetLimit(parallel)
			for i, ref := range refs {
				g.Go(func() error {
					rows[i] = statusOf(ctx, w.Store, ref, stats[ref.Name], w.Clock, lag)
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
			var bad []string
			for _, r := range rows {
				if r.Health != "ok" {
					bad = append(bad, r.Table)
				}
			}
			bucket := bucketProblem(ctx, w)
			if bucket != "" {
				bad = append(bad, "the bucket")
			}
			if app.JSON() {
				err = printJSON(app.Stdout, struct {
					Healthy bool          `json:"healthy"`
					Bucket  string        `json:"bucket_error,omitempty"`
					Tables  []tableStatus `json:"tables"`
				}{len(bad) == 0, bucket, rows})
			} else {
				if bucket != "" {
					fmt.Fprintf(app.Stdout, "warehouse %s: unhealthy: %s\n", w.URI, bucket)
				}
				err = printStatus(app, rows)
				printLeaseLines(app, rows)
			}
			if err != nil {
				return err
			}
			if htmlFile != "" {
				if err := writeStatusHTML(ctx, w, refs, rows, bucket, htmlFile); err != nil {
					return err
				}
			}
			if len(bad) > 0 {
				return fmt.Errorf("%w: %s", errUnhealthy, strings.Join(bad, ", "))
			}
			return nil
		},
	}
	addWarehouseFlags(cmd, &wf, false)
	clockAheadFlag(cmd, &wf.ahead)
	cmd.Flags().Var((*dayDuration)(&lag), "max-lag", "a backlog waiting longer than this is unhealthy, e.g. 12h, 1d (0: the policy's re-plan interval plus 1h)")
	cmd.Flags().StringVar(&htmlFile, "html", "", "also write the status as one self-contained HTML page (history charts from _stats; no server, no network) to FILE")
	cmd.Flags().IntVar(&parallel, "parallel", defaultStatusParallel, "tables read at once (each sends at most "+strconv.Itoa(maintenance.DefaultConcurrency)+" requests at once)")
	return cmd
}

func printStatus(app *App, rows []tableStatus) error {
	head := []string{"TABLE", "FORMAT", "HEALTH", "VERSIONS", "PRUNABLE", "COMPACTABLE", "GARBAGE", "LAST COMPACTION", "LAST CLEANUP", "POLICY"}
	var cells [][]string
	var reasons []string
	for _, r := range rows {
		// The HEALTH column holds the word; the reasons follow the table.
		health := r.Health
		if r.Reason != "" {
			reasons = append(reasons, fmt.Sprintf("%s: %s: %s", r.Table, r.Health, r.Reason))
		}
		if l := keptLine(r); l != "" {
			reasons = append(reasons, l)
		}
		if r.Error != "" {
			cells = append(cells, []string{r.Table, r.Policy.Format, health, "", "", "", "", "", "", ""})
			continue
		}
		prunable := prunableText(r)
		compactable, garbage := fmt.Sprintf("%d of %d", r.Compactable, r.Fragments), shortBytes(r.GarbageBytes)
		switch {
		case r.CompactRefused != "":
			compactable, garbage = "refused", "-"
		case r.Policy.Format != formatTablekeep:
			garbage = "-" // `tablekeep sweep --dry-run` reads every manifest
		}
		cells = append(cells, []string{r.Table, r.Policy.Format, health, strconv.Itoa(r.Versions), prunable,
			compactable, garbage,
			orNever(r.LastCompaction), orNever(r.LastCleanup),
			fmt.Sprintf("keep %d, grace %s", r.Policy.KeepLast, r.Policy.Grace)})
	}
	if err := printAligned(app.Stdout, head, cells); err != nil {
		return err
	}
	if len(reasons) > 0 {
		fmt.Fprintln(app.Stdout)
	}
	for _, l := range reasons {
		if _, err := fmt.Fprintln(app.Stdout, l); err != nil {
			return err
		}
	}
	return nil
}

// keptLine says what a Lance dataset's compaction planner leaves: the
// fragments it keeps and why, the deleted rows' share, or why it refuses
// the dataset ("" for a tablekeep table, or nothing to say).
func keptLine(r tableStatus) string {
	if r.CompactRefused != "" {
		return fmt.Sprintf("%s: compaction refused: %s", r.Table, r.CompactRefused)
	}
	var kept []string
	for _, why := range slices.Sorted(maps.Keys(r.KeptFragments)) {
		kept = append(kept, fmt.Sprintf("%d %s", r.KeptFragments[why], why))
	}
	if len(kept) == 0 && r.DeletedShare == 0 {
		return ""
	}
	if len(kept) == 0 {
		kept = []string{"none"}
	}
	return fmt.Sprintf("%s: fragments kept: %s; deleted rows %.1f%% of %d", r.Table, strings.Join(kept, ", "), 100*r.DeletedShare, r.Rows+r.DeletedRows)
}

// defaultStatusParallel is how many tables `tablekeep status` reads at once.
const defaultStatusParallel = 4

func orNever(s string) string {
	if s == "" {
		return "never"
	}
	return s
}

func rfc3339(t time.Time) string {
	// Zero, or zero plus a grace window: an unknown time, never printed
	// as year 1.
	if t.IsZero() || t.Year() < 1970 {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

func statusOf(ctx context.Context, store objstore.Store, ref maintenance.TableRef, old maintenance.TableStats, clock clock.Clock, lag time.Duration) tableStatus {
	r := tableStatus{Table: ref.Name, Root: ref.Root, Health: "ok", Policy: policyOf(ref)}
	ctx = progress.Named(ctx, ref.Name) // its long phases' bars name it
	fail := func(err error) tableStatus {
		r.Error = oneLine(sdkOneLine(err))
		r.Health, r.Reason = "unreadable", r.Error
		return r
	}
	now := clock.Now()
	// The prune plan a pass would make, the health and the stats only
	// read (a Lance dataset's change records are derived in memory).
	h, s, src, err := formats.Status(ctx, store, ref, now)
	if why := restoreBlocked(ctx, store, ref.Root, err); why != "" {
		r.Health, r.Reason, r.Error = "not pruned", why, oneLine(sdkOneLine(err))
		return r
	}
	if err != nil {
		return fail(err)
	}
	r.Latest, r.Floor = h.Latest, h.Plan.OldFloor
	// The dry-run orphan sweep of a tablekeep table (that of a Lance
	// dataset reads every stored manifest: `tablekeep sweep --dry-run`
	// shows it).
	if tb, ok := src.(maintenance.TableBacked); ok {
		sr, err := maintenance.Sweep(progress.Named(ctx, "sweep"), tb.Table(), ref.Policy, now, 0, true)
		if err != nil {
			return fail(err)
		}
		r.GarbageFiles, r.GarbageBytes = len(sr.Planned), sr.Bytes
	}
	r.Versions, r.Unreclaimed, r.Rows, r.Fragments, r.SmallFrags = s.Versions, s.Unreclaimed, s.Rows, s.Fragments, s.SmallFrags
	r.ManifestBytes, r.DeletedRows = s.ManifestBytes, deletedRows(src)
	if s.Fragments > 0 {
		r.SmallRatio = float64(s.SmallFrags) / float64(s.Fragments)
	}
	r.PrunableNow, r.PrunableSince = h.PrunableNow, rfc3339(h.PrunableSince)
	r.PrunableLater, r.PrunableAt = h.PrunableLater, rfc3339(h.PrunableAt)
	r.Compactable, r.CompactGroups, r.CompactableSince = h.Compactable, h.CompactGroups, rfc3339(h.CompactableSince)
	r.KeptFragments, r.CompactRefused, r.CompactBound = h.Kept, h.CompactRefused, h.CompactBound
	if h.PhysicalRows > 0 { // a Lance dataset's (LatestStats)
		r.DeletedRows = h.DeletedRows
		r.DeletedShare = float64(h.DeletedRows) / float64(h.PhysicalRows)
	}
	r.LastCompaction = rfc3339(old.LastCompaction)
	lag = r.setLastCleanup(s, old, ref, lag)
	if why := h.Behind(now, lag); len(why) > 0 {
		r.Health, r.Reason = "behind", strings.Join(why, "; ")
	}
	if why := h.DamageReason(); why != "" {
		r.Health, r.Reason, r.Damaged = "damaged", why, len(h.Damaged)
	}
	if err := r.setLeases(ctx, store, ref, h.Plan, now); err != nil {
		return fail(err)
	}
	return r
}

// setLastCleanup fills LAST CLEANUP (the stats row's, else the previous
// one's) and returns the lag past which prunable versions are "behind"
// (lag, or the policy's ReplanAfter plus an hour).
func (r *tableStatus) setLastCleanup(s, old maintenance.TableStats, ref maintenance.TableRef, lag time.Duration) time.Duration {
	last := s.LastCleanup
	if last.IsZero() {
		last = old.LastCleanup
	}
	r.LastCleanup = rfc3339(last)
	if lag == 0 {
		lag = ref.Policy.WithDefaults().ReplanAfter + time.Hour
	}
	return lag
}
