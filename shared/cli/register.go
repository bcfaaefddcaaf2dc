package cli

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tablekeep/tablekeep/shared/catalog"
	"github.com/tablekeep/tablekeep/shared/formats"
	"github.com/tablekeep/tablekeep/shared/maintenance"
)

// policyJSON is a registered table with its policy in force.
type policyJSON struct {
	Table    string `json:"table"`
	Root     string `json:"root"`
	Format   string `json:"format"` // "tablekeep" or "lance"
	KeepLast int    `json:"keep_last"`
	Grace    string `json:"grace"`
	// Compaction settings (a Lance dataset's too: its compaction folds
	// fragments of fewer physical rows than TargetRows, and rewrites a
	// fragment whose deleted share is more than DeletedThreshold).
	TargetRows       uint64  `json:"target_rows,omitempty"`
	DeletedThreshold float64 `json:"deleted_threshold,omitempty"`
}

func policyOf(ref maintenance.TableRef) policyJSON {
	p := ref.Policy.WithDefaults()
	return policyJSON{Table: ref.Name, Root: ref.Root, Format: formatName(ref.Format), KeepLast: p.KeepLast, Grace: shortDuration(p.Grace),
		TargetRows: p.TargetRows, DeletedThreshold: p.DeletedThreshold}
}

// formatTablekeep is how listings name tablekeep's own format (TableRef.Format "").
const formatTablekeep = "tablekeep"

// formatName is a registered format as listings show it.
func formatName(f string) string {
	if f == "" {
		return formatTablekeep
	}
	return f
}

// LanceGrace is a Lance dataset's grace when register is given no --grace:
// LanceDB's own cleanup keeps versions for 7 days (cleanup_old_versions'
// and optimize()'s older_than default), which is what a LanceDB user
// expects of old versions; a tablekeep table's default is the writers' 1 h.
const LanceGrace = 7 * 24 * time.Hour

// policyText is the policy in one phrase.
func policyText(p policyJSON) string {
	return fmt.Sprintf("keep-last %d, grace %s, target %d rows, deleted-threshold %g", p.KeepLast, p.Grace, p.TargetRows, p.DeletedThreshold)
}

func newRegisterCmd(app *App) *cobra.Command {
	var wf warehouseFlags
	var format string
	p := maintenance.DefaultPolicy()
	cmd := &cobra.Command{
		Use:   "register NAME PATH [--table-format tablekeep|lance]",
		Short: "Register a table (PATH relative to the warehouse) for maintenance, with its policy",
		Long: `Register the table at PATH (relative to the warehouse, e.g. tables/orders)
under NAME, with its maintenance policy. Everything is checked before
anything is stored: the name, the path (inside the warehouse: no URI, no
absolute path, no '..'), that PATH holds a table, and the policy values.
Registering a name again replaces its entry. Prints the policy stored.
Refused: a PATH registered under another name, a PATH inside a registered
table or holding one, the warehouse's own directories (_registry, _stats,
_locks, _fleet, _maintenance, _status), a deleted threshold outside [0.001, 1] or
not a number. The first registration creates the warehouse (_registry,
_stats): no other command does.

--table-format lance registers a Lance dataset (e.g. lance/items.lance, as LanceDB
writes it): it is checked with tablekeep's Lance reader (its listing, latest
manifest and tags) and refused, with the reason, if it uses a feature the
reader does not understand. Maintenance compacts it (its small fragments'
pages spliced into one file, committed as a Lance Rewrite that LanceDB
reads) and prunes it like a table (keep-last, grace from each version's own
timestamp, tags). Its grace is 7 days unless --grace is given (168h: LanceDB's
own cleanup default, older_than 7 days; a tablekeep table's default is 1h).
See docs/lance.md.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			// Bad input is a usage error (exit 2) before anything is opened.
			if err := catalog.ValidateName(args[0]); err != nil {
				return &UsageError{Err: err}
			}
			if err := catalog.ValidateLocation(args[1]); err != nil {
				return &UsageError{Err: err}
			}
			if err := catalog.ValidatePolicy(p); err != nil {
				return &UsageError{Err: err}
			}
			switch format = strings.ToLower(strings.TrimSpace(format)); format {
			case "", formatTablekeep:
				format = ""
			case formats.Lance:
				// --target-rows and --deleted-threshold apply (docs/lance.md
				// "Compaction"): fragments of fewer physical rows are folded,
				// and one whose deleted share passes the threshold rewritten.
			default:
				return Usagef("--table-format %q: want %s (a tablekeep table) or %s (a Lance dataset, as LanceDB writes it)", format, formatTablekeep, formats.Lance)
			}
			w, err := openWarehouse(ctx, app, wf, openMode{Create: true})
			if err != nil {
				return err
			}
			if format != "" {
				defaultGrace := !cmd.Flags().Changed("grace")
				if defaultGrace {
					p.Grace = LanceGrace
				}
				return registerDataset(ctx, app, w, args[0], args[1], format, p, defaultGrace)
			}
			ref, err := w.Catalog.RegisterTable(ctx, args[0], args[1], p)
			if errors.Is(err, catalog.ErrSystemTable) {
				return &UsageError{Err: err}
			}
			if err != nil && !errors.Is(err, catalog.ErrAlreadyRegistered) && !errors.Is(err, catalog.ErrNestedRoot) &&
				isLanceDataset(ctx, w.Store, w.Catalog.TableRoot(args[1])) {
				return fmt.Errorf("register %s in %s: %w", args[0], w.URI, lanceNotRegistered(strings.Trim(args[1], "/")))
			}
			if err != nil {
				return fmt.Errorf("register %s in %s: %w", args[0], w.URI, err)
			}
			pj := policyOf(ref)
			if app.JSON() {
				return printJSON(app.Stdout, pj)
			}
			_, err = fmt.Fprintf(app.Stdout, "registered %s at %s in %s (%s)\n", ref.Name, args[1], w.URI, policyText(pj))
			return err
		},
	}
	addWarehouseFlags(cmd, &wf, false)
	f := cmd.Flags()
	f.StringVar(&format, "table-format", formatTablekeep, "the table's format: tablekeep, or lance (a Lance dataset: compacted by page splicing and pruned; see docs/lance.md)")
	deprecatedAlias(cmd, &format, "format", "table-format", formatTablekeep)
	f.IntVar(&p.KeepLast, "keep-last", p.KeepLast, "newest versions always kept (at least 1)")
	f.Var((*dayDuration)(&p.Grace), "grace", "keep versions superseded less than this long ago, and unreferenced files younger than this, e.g. 6h, 1d (at least the writers' 1h, at most 100 years; a Lance dataset's default is 7d, LanceDB's own cleanup default)")
	f.Uint64Var(&p.TargetRows, "target-rows", p.TargetRows, "compaction target rows per fragment (at least 1)")
	f.Float64Var(&p.DeletedThreshold, "deleted-threshold", p.DeletedThreshold, "rewrite fragments with more than this share of deleted rows, in [0.001, 1] (a Lance dataset too, by Lance's rule: more than this share, the fragment is rewritten without them)")
	return cmd
}

func newUnregisterCmd(app *App) *cobra.Command {
	var wf warehouseFlags
	cmd := &cobra.Command{
		Use:   "unregister NAME",
		Short: "Stop maintaining a table (its data is left as it is)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if err := catalog.ValidateName(args[0]); err != nil {
				return &UsageError{Err: err}
			}
			w, err := openWarehouse(ctx, app, wf, openMode{})
			if err != nil {
				return err
			}
			err = w.Catalog.Unregister(ctx, args[0])
			switch {
			case errors.Is(err, catalog.ErrSystemTable):
				return &UsageError{Err: err}
			case errors.Is(err, maintenance.ErrUnknownTable):
				return fmt.Errorf("%w %q in warehouse %s (see `tablekeep tables`)", maintenance.ErrUnknownTable, args[0], w.URI)
			case err != nil:
				return err
			}
			if app.JSON() {
				return printJSON(app.Stdout, map[string]any{"unregistered": args[0], "warehouse": w.URI, "data_untouched": true})
			}
			_, err = fmt.Fprintf(app.Stdout, "unregistered %s from %s (its data is untouched)\n", args[0], w.URI)
			return err
		},
	}
	addWarehouseFlags(cmd, &wf, false)
	return cmd
}

func newTablesCmd(app *App) *cobra.Command {
	var wf warehouseFlags
	cmd := &cobra.Command{
		Use:   "tables",
		Short: "List the warehouse's registered tables with their policies",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			w, err := openWarehouse(ctx, app, wf, openMode{})
			if err != nil {
				return err
			}
			refs, err := w.Catalog.Tables(ctx)
			if err != nil {
				return err
			}
			if app.JSON() {
				return printJSONLines(app.Stdout, refs, func(ref maintenance.TableRef) any { return policyOf(ref) })
			}
			var rows [][]string
			for _, ref := range refs {
				pj := policyOf(ref)
				target, threshold := strconv.FormatUint(pj.TargetRows, 10), strconv.FormatFloat(pj.DeletedThreshold, 'g', -1, 64)
				rows = append(rows, []string{pj.Table, pj.Format, pj.Root, strconv.Itoa(pj.KeepLast), shortDuration(ref.Policy.WithDefaults().Grace),
					target, threshold})
			}
			return printAligned(app.Stdout, []string{"TABLE", "FORMAT", "ROOT", "KEEP LAST", "GRACE", "TARGET ROWS", "DELETED THRESHOLD"}, rows)
		},
	}
	addWarehouseFlags(cmd, &wf, false)
	return cmd
}

// shortDuration renders 1h0m0s as 1h, 90m as 1h30m.
func shortDuration(d time.Duration) string {
	s := d.String()
	for _, suf := range []string{"m0s", "h0m"} {
		if len(s) > len(suf) && s[len(s)-len(suf):] == suf {
			s = s[:len(s)-len(suf)+1]
		}
	}
	return s
}

// registerDataset registers a dataset of another format (Lance) after
// checking it with the format's reader: nothing is stored for a path that
// is not a dataset or a dataset the reader refuses (exit 1, with why).
// defaultGrace: no --grace was given (p.Grace is LanceGrace), which the
// output says.
func registerDataset(ctx context.Context, app *App, w *whouse, name, rel, format string, p maintenance.Policy, defaultGrace bool) error {
	if name == catalog.RegistryName || name == catalog.StatsName {
		return &UsageError{Err: fmt.Errorf("%w %s: registered with the warehouse", catalog.ErrSystemTable, name)}
	}
	rel = strings.Trim(rel, "/")
	if err := w.Catalog.CheckRoot(ctx, name, rel); err != nil {
		if errors.Is(err, catalog.ErrSystemTable) {
			return &UsageError{Err: err}
		}
		return fmt.Errorf("register %s in %s: %w", name, w.URI, err)
	}
	root := w.Catalog.TableRoot(rel)
	sum, err := formats.Inspect(ctx, w.Store, root)
	switch {
	case err != nil && isTablekeepTable(ctx, w.Store, root):
		return fmt.Errorf("register %s in %s: %w", name, w.URI, tableNotLance(rel))
	case errors.Is(err, formats.ErrNotADataset):
		return fmt.Errorf("register %s in %s: %s: not a Lance dataset (no manifests under %s/%s)", name, w.URI, rel, rel, formats.LanceVersionsDir)
	case errors.Is(err, formats.ErrUnsupported):
		return fmt.Errorf("register %s in %s: %s: refused, nothing registered: %w", name, w.URI, rel, err)
	case err != nil:
		return fmt.Errorf("register %s in %s: %s: %w", name, w.URI, rel, err)
	}
	if v, restore, err := latestIsRestore(ctx, w.Store, root); err != nil {
		return fmt.Errorf("register %s in %s: %s: %w", name, w.URI, rel, err)
	} else if restore {
		why := restoreBlocked(ctx, w.Store, root, fmt.Errorf("%w: version %d restores or clones an earlier version", formats.ErrUnsupported, v))
		return fmt.Errorf("register %s in %s: %s: refused, nothing registered: the latest version is a restore, %s", name, w.URI, rel, strings.TrimPrefix(why, "not pruned: "))
	}
	if err := w.Catalog.RegisterBatch(ctx, []catalog.Registration{{Name: name, Rel: rel, Policy: p, Format: format}}); err != nil {
		return fmt.Errorf("register %s in %s: %w", name, w.URI, err)
	}
	ref, err := w.Catalog.Resolve(ctx, name)
	if err != nil {
		return err
	}
	pj := policyOf(ref)
	if app.JSON() {
		return printJSON(app.Stdout, pj)
	}
	_, err = fmt.Fprintf(app.Stdout, "registered %s at %s in %s as a %s dataset (%s, latest %d, %s; %s)\n",
		ref.Name, rel, w.URI, ref.Format, plural(sum.Versions, "version", "versions"), sum.Latest, plural(len(sum.Tags), "tag", "tags"), policyText(pj))
	if err == nil && defaultGrace {
		_, err = fmt.Fprintf(app.Stdout, "grace %s: LanceDB's own cleanup default (older_than 7 days), so versions superseded less than 7 days ago are kept; --grace sets another (a tablekeep table's default is 1h)\n", pj.Grace)
	}
	return err
}
