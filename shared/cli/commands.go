package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/tablekeep/tablekeep/shared/dataset"
	"github.com/tablekeep/tablekeep/shared/formats"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/table"
)

func newCreateCmd(app *App) *cobra.Command {
	var spec, key, tableFormat string
	cmd := &cobra.Command{
		Use:   "create --schema SPEC [--key COLUMN] [--table-format 3|2]",
		Short: "Create an empty table (version 1)",
		Long: `Create an empty table (version 1).

SPEC is a comma-separated list of name:type columns. Types: ` + specTypes + `.
timestamp is microseconds, UTC. A column is required unless its type ends in
"?" or it has a ":nullable" suffix:

  --schema 'name:utf8,uri:utf8,created_at:timestamp,note:utf8?'
  --schema 'id:int64,score:float64:nullable'

--key names the key column (utf8 or int64, required): upsert, delete and
get work by key. Without --key the table is append-only.

--table-format is the table format: 3 (the default: small writes inline in the
manifest, docs/format.md 4.7; releases before format 3 refuse the table)
or 2 (one data file per write; what older releases read and write).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			schema, err := ParseSchemaSpec(spec)
			if err != nil {
				return &UsageError{Err: fmt.Errorf("--schema: %w", err)}
			}
			if key != "" {
				idx := schema.FieldIndices(key)
				if len(idx) != 1 {
					return Usagef("--key %q is not a column of --schema", key)
				}
				f := schema.Field(idx[0])
				if f.Type.ID() != arrow.STRING && f.Type.ID() != arrow.INT64 {
					return Usagef("--key %q must be a utf8 or int64 column, not %s", key, typeName(f.Type))
				}
				if f.Nullable {
					return Usagef("--key %q must not be nullable", key)
				}
			}
			format, err := parseTableFormat(tableFormat)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			store, root, err := app.OpenStore(ctx, false)
			if err != nil {
				return err
			}
			opts := app.TableOptions()
			opts.Format = format
			t, err := table.Create(ctx, store, root, schema, key, opts)
			switch {
			case errors.Is(err, table.ErrTableExists) && isLanceDataset(ctx, store, root):
				return fmt.Errorf("%s is a Lance dataset, not a place for a new table: choose another --table (register --table-format lance maintains it)%w", app.TableURI, quiet{table.ErrTableExists})
			case errors.Is(err, table.ErrTableExists):
				return fmt.Errorf("%s: %w", app.TableURI, table.ErrTableExists)
			case errors.Is(err, table.ErrInvalidSchema):
				return &UsageError{Err: err}
			case err != nil:
				return err
			}
			v := t.Cached().Version
			if app.JSON() {
				return printJSON(app.Stdout, map[string]any{
					"table": app.TableURI, "version": v, "schema": FormatSchemaSpec(schema), "key": key,
				})
			}
			keyNote := "no key column"
			if key != "" {
				keyNote = "key " + key
			}
			_, err = fmt.Fprintf(app.Stdout, "created %s at version %d: %s (%s)\n", app.TableURI, v, FormatSchemaSpec(schema), keyNote)
			return err
		},
	}
	cmd.Flags().StringVar(&spec, "schema", "", "columns, e.g. 'name:utf8,uri:utf8,created_at:timestamp' (required)")
	cmd.Flags().StringVar(&key, "key", "", "key column (utf8 or int64)")
	def := strconv.Itoa(table.FormatVersion)
	cmd.Flags().StringVar(&tableFormat, "table-format", def, "table format: 3 (inline small writes) or 2 (a data file per write, for older releases)")
	deprecatedAlias(cmd, &tableFormat, "format", "table-format", def)
	_ = cmd.MarkFlagRequired("schema")
	return cmd
}

// parseTableFormat is create's --table-format: 3 or 2.
func parseTableFormat(s string) (uint64, error) {
	switch strings.TrimSpace(s) {
	case "3":
		return 3, nil
	case "2":
		return 2, nil
	case formats.Lance:
		return 0, Usagef("--table-format lance: create makes tablekeep tables (3 or 2); LanceDB creates a Lance dataset, then `tablekeep register NAME PATH --table-format lance` maintains it")
	}
	return 0, Usagef("--table-format %q: want 3 (the default) or 2", s)
}

// deprecatedAlias adds --old as a deprecated alias of --name, on the same
// variable (it was --name's spelling in earlier releases): hidden from the
// help, and its use warned of on stderr (NewRoot; pflag's own deprecation
// notice goes to stdout).
func deprecatedAlias(cmd *cobra.Command, v *string, old, name, def string) {
	cmd.Flags().StringVar(v, old, def, "deprecated: --"+name)
	_ = cmd.Flags().MarkHidden(old)
	_ = cmd.Flags().SetAnnotation(old, annotDeprecatedFor, []string{name})
}

// annotDeprecatedFor marks a deprecated alias flag with the flag it stands for.
const annotDeprecatedFor = "tablekeep.deprecated-for"

func newAppendCmd(app *App) *cobra.Command { return newWriteCmd(app, "append") }
func newUpsertCmd(app *App) *cobra.Command { return newWriteCmd(app, "upsert") }

func newWriteCmd(app *App, kind string) *cobra.Command {
	var file, format string
	short := "Append rows from JSON lines or CSV in one commit (keys are not checked against existing rows)"
	if kind == "upsert" {
		short = "Insert or replace rows by key from JSON lines or CSV, in one commit"
	}
	cmd := &cobra.Command{
		Use:   kind + " [--file F] [--format jsonl|csv]",
		Short: short,
		Long: short + `.

Input is JSON lines (one object per line, keys are column names) or CSV
(a header row of column names). The format comes from --format, else from
the file's extension (.jsonl, .ndjson, .json, .csv), else JSON lines for
stdin. A missing column is null (an error if the column is required).
Values: timestamps as RFC 3339 strings (or integer microseconds since the
epoch), binary as base64. In CSV an empty field is null in a nullable
column and the empty string in a required utf8 or binary column.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := inputFormat(format, file)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			t, err := app.OpenTable(ctx)
			if err != nil {
				return err
			}
			m := t.Cached()
			if kind == "upsert" && m.KeyColumn == "" {
				return fmt.Errorf("%s: %w: upsert needs one (use append)", app.TableURI, table.ErrNoKeyColumn)
			}
			var in io.Reader = app.Stdin
			name := "stdin"
			if file != "" && file != "-" {
				fh, err := os.Open(file)
				if err != nil {
					return err
				}
				defer fh.Close()
				in, name = fh, file
			}
			rec, err := readBatch(in, f, m.Schema, m.KeyColumn, kind == "upsert")
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			defer rec.Release()
			var res *table.CommitResult
			if kind == "upsert" {
				res, err = t.Upsert(ctx, rec)
			} else {
				res, err = t.Append(ctx, rec)
			}
			if err != nil {
				return err
			}
			return printCommit(app, kind, rec.NumRows(), res)
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "input file (default stdin)")
	cmd.Flags().StringVar(&format, "format", "", "input format: jsonl or csv (default: by file extension; jsonl for stdin)")
	return cmd
}

func printCommit(app *App, kind string, read int64, res *table.CommitResult) error {
	committed := read > 0 && (kind != "delete" || res.RowsDeleted > 0)
	if app.JSON() {
		return printJSON(app.Stdout, map[string]any{
			"op": kind, "committed": committed, "version": res.Version,
			"rows_added": res.RowsAdded, "rows_deleted": res.RowsDeleted, "attempts": res.Attempts,
		})
	}
	var err error
	switch {
	case !committed && kind == "delete":
		_, err = fmt.Fprintf(app.Stdout, "no rows matched; nothing committed (version %d)\n", res.Version)
	case !committed:
		_, err = fmt.Fprintf(app.Stdout, "no rows in input; nothing committed (version %d)\n", res.Version)
	case kind == "delete":
		_, err = fmt.Fprintf(app.Stdout, "deleted %s: version %d\n", nRows(res.RowsDeleted), res.Version)
	case kind == "upsert":
		_, err = fmt.Fprintf(app.Stdout, "upserted %s (%d replaced): version %d\n", nRows(res.RowsAdded), res.RowsDeleted, res.Version)
	default:
		_, err = fmt.Fprintf(app.Stdout, "appended %s: version %d\n", nRows(res.RowsAdded), res.Version)
	}
	return err
}

func nRows(n uint64) string {
	if n == 1 {
		return "1 row"
	}
	return strconv.FormatUint(n, 10) + " rows"
}

// keyType is the table's key column type, or an error without one.
func keyType(app *App, m *table.Manifest) (arrow.DataType, error) {
	if m.KeyColumn == "" {
		return nil, fmt.Errorf("%s: %w", app.TableURI, table.ErrNoKeyColumn)
	}
	return m.Schema.Field(m.Schema.FieldIndices(m.KeyColumn)[0]).Type, nil
}

// parseKey converts a command-line key to the key column's Go type.
func parseKey(kt arrow.DataType, s string) (any, error) {
	if kt.ID() == arrow.INT64 {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, Usagef("key %q is not an int64 (the key column is int64)", s)
		}
		return n, nil
	}
	return s, nil
}

func newDeleteCmd(app *App) *cobra.Command {
	var keys []string
	var prefix string
	var hasPrefix, all bool
	cmd := &cobra.Command{
		Use:   "delete (--key K [--key K2 ...] | --prefix P | --all)",
		Short: "Delete rows by key, key prefix or all (--all), in one commit",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			hasPrefix = cmd.Flags().Changed("prefix")
			if all && (len(keys) > 0 || (hasPrefix && prefix != "")) {
				return Usagef("--all deletes every row: give it alone (or with --prefix \"\")")
			}
			if hasPrefix && prefix == "" && !all {
				return Usagef("--prefix \"\" matches every row: pass --all to delete every row")
			}
			if !all && (len(keys) > 0) == hasPrefix {
				return Usagef("give either --key (repeatable), --prefix or --all")
			}
			ctx := cmd.Context()
			t, err := app.OpenTable(ctx)
			if err != nil {
				return err
			}
			kt, err := keyType(app, t.Cached())
			if err != nil {
				return err
			}
			var res *table.CommitResult
			if all {
				everything, err := table.KeyRange(kt, nil, nil)
				if err != nil {
					return err
				}
				res, err = t.DeleteWhere(ctx, everything)
				if err != nil {
					return err
				}
				return printCommit(app, "delete", 1, res)
			}
			if hasPrefix {
				if kt.ID() != arrow.STRING {
					return Usagef("--prefix needs a utf8 key column; this table's key is %s", typeName(kt))
				}
				res, err = t.DeleteWhere(ctx, table.KeyPrefix(prefix))
			} else {
				vals := make([]any, len(keys))
				for i, k := range keys {
					if vals[i], err = parseKey(kt, k); err != nil {
						return err
					}
				}
				res, err = t.Delete(ctx, vals...)
			}
			if err != nil {
				return err
			}
			return printCommit(app, "delete", 1, res)
		},
	}
	cmd.Flags().StringArrayVar(&keys, "key", nil, "key of a row to delete (repeatable)")
	cmd.Flags().StringVar(&prefix, "prefix", "", "delete every row whose (utf8) key starts with this (not empty: see --all)")
	cmd.Flags().BoolVar(&all, "all", false, "delete every row (one commit; history is kept)")
	return cmd
}

var errStop = errors.New("stop")

func newScanCmd(app *App) *cobra.Command {
	var columns []string
	var version uint64
	var limit int
	var keyPrefix, keyRange string
	cmd := &cobra.Command{
		Use:   "scan [--columns a,b] [--version N] [--limit N] [--key-prefix P | --key-range LO..HI]",
		Short: "Print the live rows of a version (default: latest)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 0 {
				return Usagef("--limit must be >= 0")
			}
			ctx := cmd.Context()
			t, err := app.OpenTableAt(ctx, version)
			if err != nil {
				return err
			}
			snap, err := app.Snapshot(ctx, t, version)
			if err != nil {
				return err
			}
			schema := snap.Schema()
			names := columns
			if len(names) == 0 {
				names = nil
				for _, f := range schema.Fields() {
					names = append(names, f.Name)
				}
			}
			for i, n := range names {
				if len(schema.FieldIndices(n)) != 1 {
					return Usagef("--columns: unknown column %q (table columns: %s)", n, strings.Join(fieldNames(schema), ", "))
				}
				if slices.Contains(names[:i], n) {
					return Usagef("--columns: %q given twice", n)
				}
			}
			// The filter is checked before the printer writes a header.
			scanCols := columns
			var keep func(arrow.RecordBatch, int) bool
			var cols []int
			if keyPrefix != "" || keyRange != "" {
				if keep, scanCols, cols, err = keyFilter(snap.Manifest(), names, keyPrefix, keyRange); err != nil {
					return err
				}
			}
			p := newRowPrinter(app.Stdout, app.Output, names, limit)
			if keep != nil {
				p.keep, p.cols = keep, cols
			}
			err = snap.Scan(ctx, table.ScanOptions{Columns: scanCols}, func(rec arrow.RecordBatch) error {
				if err := p.print(rec); err != nil {
					return err
				}
				if p.full() {
					return errStop
				}
				return nil
			})
			if err != nil && !errors.Is(err, errStop) {
				return err
			}
			return p.flush()
		},
	}
	cmd.Flags().StringSliceVar(&columns, "columns", nil, "columns to print, comma-separated (default all)")
	cmd.Flags().Uint64Var(&version, "version", 0, "version to read (default latest)")
	cmd.Flags().IntVar(&limit, "limit", 0, "print at most N rows (0: all)")
	cmd.Flags().StringVar(&keyPrefix, "key-prefix", "", "only rows whose (utf8) key starts with this")
	cmd.Flags().StringVar(&keyRange, "key-range", "", "only rows with LO <= key < HI, as LO..HI (either side may be empty)")
	return cmd
}

// keyFilter returns the row filter of --key-prefix / --key-range, the
// columns to scan (the printed ones plus the key column) and the printed
// columns' positions in the scanned batch.
func keyFilter(m *table.Manifest, names []string, prefix, rng string) (func(arrow.RecordBatch, int) bool, []string, []int, error) {
	if m.KeyColumn == "" {
		return nil, nil, nil, Usagef("--key-prefix and --key-range need a table with a key column")
	}
	kt := m.Schema.Field(m.Schema.FieldIndices(m.KeyColumn)[0]).Type
	if prefix != "" && rng != "" {
		return nil, nil, nil, Usagef("give --key-prefix or --key-range, not both")
	}
	if prefix != "" && kt.ID() != arrow.STRING {
		return nil, nil, nil, Usagef("--key-prefix needs a utf8 key column; this table's key is %s", typeName(kt))
	}
	var lo, hi []byte
	if rng != "" {
		l, h, ok := strings.Cut(rng, "..")
		if !ok || strings.Contains(h, "..") {
			return nil, nil, nil, Usagef("--key-range %q: want LO..HI (either side may be empty)", rng)
		}
		for _, b := range []struct {
			s   string
			out *[]byte
		}{{l, &lo}, {h, &hi}} {
			if b.s == "" {
				continue
			}
			v, err := parseKey(kt, b.s)
			if err != nil {
				return nil, nil, nil, err
			}
			if *b.out, err = table.KeyOf(kt, v); err != nil {
				return nil, nil, nil, Usagef("--key-range: %v", err)
			}
		}
		if lo != nil && hi != nil && bytes.Compare(lo, hi) >= 0 {
			return nil, nil, nil, Usagef("--key-range %q: no key is >= %q and < %q (LO must sort before HI)", rng, l, h)
		}
	}
	scan := append([]string{}, names...)
	keyCol := slices.Index(scan, m.KeyColumn)
	if keyCol < 0 {
		scan = append(scan, m.KeyColumn)
		keyCol = len(scan) - 1
	}
	cols := make([]int, len(names))
	for i := range cols {
		cols[i] = i
	}
	keep := func(rec arrow.RecordBatch, i int) bool {
		var k []byte
		switch col := rec.Column(keyCol).(type) {
		case *array.String:
			if prefix != "" {
				return strings.HasPrefix(col.Value(i), prefix)
			}
			k, _ = table.KeyOf(kt, col.Value(i))
		case *array.Int64:
			k, _ = table.KeyOf(kt, col.Value(i))
		}
		return (lo == nil || bytes.Compare(k, lo) >= 0) && (hi == nil || bytes.Compare(k, hi) < 0)
	}
	return keep, scan, cols, nil
}

func fieldNames(s *arrow.Schema) []string {
	out := make([]string, s.NumFields())
	for i, f := range s.Fields() {
		out[i] = f.Name
	}
	return out
}

func newGetCmd(app *App) *cobra.Command {
	var version uint64
	cmd := &cobra.Command{
		Use:   "get KEY [--version N]",
		Short: "Print the row with a key",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			t, err := app.OpenTableAt(ctx, version)
			if err != nil {
				return err
			}
			snap, err := app.Snapshot(ctx, t, version)
			if err != nil {
				return err
			}
			kt, err := keyType(app, snap.Manifest())
			if err != nil {
				return err
			}
			key, err := parseKey(kt, args[0])
			if err != nil {
				return err
			}
			rec, err := snap.Get(ctx, key)
			if errors.Is(err, table.ErrNotFound) {
				return &sayErr{fmt.Sprintf("key %q not found at version %d", args[0], snap.Version()), table.ErrNotFound}
			}
			if err != nil {
				return err
			}
			defer rec.Release()
			p := newRowPrinter(app.Stdout, app.Output, fieldNames(snap.Schema()), 0)
			if err := p.print(rec); err != nil {
				return err
			}
			return p.flush()
		},
	}
	cmd.Flags().Uint64Var(&version, "version", 0, "version to read (default latest)")
	return cmd
}

func newVersionsCmd(app *App) *cobra.Command {
	var long bool
	var limit int
	cmd := &cobra.Command{
		Use:   "versions [--limit N] [--long]",
		Short: "List stored versions, oldest first (List requests only; --long reads every manifest)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 0 {
				return Usagef("--limit must be >= 0")
			}
			ctx := cmd.Context()
			var vs []dataset.VersionInfo
			var tags map[string]uint64
			t, err := app.OpenTable(ctx)
			switch {
			case errors.Is(err, ErrWrongFormat) && !long:
				// A Lance dataset: its listing and tags, read-only.
				if vs, tags, err = lanceVersions(ctx, app); err != nil {
					return err
				}
			case err != nil:
				return err
			default:
				if vs, err = t.Versions(ctx); err != nil {
					return err
				}
				if tags, err = t.Tags(ctx); err != nil {
					return err
				}
			}
			if limit > 0 && len(vs) > limit {
				vs = vs[len(vs)-limit:]
			}
			byVersion := map[uint64][]string{}
			for name, v := range tags {
				byVersion[v] = append(byVersion[v], name)
			}
			for _, names := range byVersion {
				sort.Strings(names)
			}
			type row struct {
				Version       uint64   `json:"version"`
				Committed     string   `json:"committed"`
				ManifestBytes int64    `json:"manifest_bytes"`
				Tags          []string `json:"tags"`
				Op            string   `json:"op,omitempty"`
				RowsAdded     *uint64  `json:"rows_added,omitempty"`
				RowsDeleted   *uint64  `json:"rows_deleted,omitempty"`
				Rows          *uint64  `json:"rows,omitempty"`
				// Pruned: with --long, a stored version below the retention
				// floor (cleaners are deleting it; op and rows not shown).
				Pruned bool `json:"pruned,omitempty"`
			}
			rows := make([]row, len(vs))
			for i, v := range vs {
				r := row{Version: v.Version, Committed: v.Time.UTC().Format(timeLayout), ManifestBytes: v.ManifestBytes, Tags: byVersion[v.Version]}
				if r.Tags == nil {
					r.Tags = []string{}
				}
				rows[i] = r
			}
			if long {
				// The manifests are read at once (at most
				// maintenance.Concurrency); each row is filled in place,
				// so the output order is the listing's.
				g, gctx := errgroup.WithContext(ctx)
				g.SetLimit(maintenance.Concurrency(ctx))
				for i := range rows {
					if gctx.Err() != nil {
						break
					}
					g.Go(func() error {
						r := &rows[i]
						snap, err := t.Checkout(gctx, r.Version)
						if errors.Is(err, table.ErrVersionPruned) {
							r.Op, r.Pruned = "pruned", true
							return nil
						}
						if err != nil {
							return err
						}
						m := snap.Manifest()
						added, deleted, live := m.Op.RowsAdded, m.Op.RowsDeleted, m.Rows()
						r.Op, r.RowsAdded, r.RowsDeleted, r.Rows = m.Op.Kind.String(), &added, &deleted, &live
						if m.Op.Kind == dataset.OpRestore {
							r.Op = fmt.Sprintf("restore(%d)", m.Op.RestoredFrom)
						}
						return nil
					})
				}
				if err := g.Wait(); err != nil {
					return err
				}
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			if app.JSON() {
				return printJSONLines(app.Stdout, rows, func(r row) any { return r })
			}
			header := []string{"VERSION", "COMMITTED", "MANIFEST_BYTES"}
			if long {
				header = append(header, "OP", "ROWS_ADDED", "ROWS_DELETED", "ROWS")
			}
			header = append(header, "TAGS")
			var lines [][]string
			for _, r := range rows {
				l := []string{strconv.FormatUint(r.Version, 10), r.Committed, strconv.FormatInt(r.ManifestBytes, 10)}
				if long && r.Pruned {
					l = append(l, r.Op, "-", "-", "-")
				} else if long {
					l = append(l, r.Op, strconv.FormatUint(*r.RowsAdded, 10), strconv.FormatUint(*r.RowsDeleted, 10), strconv.FormatUint(*r.Rows, 10))
				}
				lines = append(lines, append(l, strings.Join(r.Tags, ",")))
			}
			return printTable(app.Stdout, header, lines)
		},
	}
	cmd.Flags().BoolVarP(&long, "long", "l", false, "also show each version's operation and row counts (one List and one GET per version, "+strconv.Itoa(maintenance.DefaultConcurrency)+" at once; a version below the retention floor shows as pruned)")
	cmd.Flags().IntVar(&limit, "limit", 0, "show only the newest N versions (0: all)")
	return cmd
}

func printTable(out io.Writer, header []string, lines [][]string) error {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, l := range lines {
		fmt.Fprintln(tw, strings.Join(l, "\t"))
	}
	return tw.Flush()
}

func parseVersionArg(s string) (uint64, error) {
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil || v == 0 {
		return 0, Usagef("version %q is not a positive integer", s)
	}
	return v, nil
}

// friendlyVersionErr rewrites a version-not-found error from the table
// package (which names the manifest key) into one naming the version.
func friendlyVersionErr(app *App, t *table.Table, v uint64, err error) error {
	if errors.Is(err, table.ErrVersionNotFound) {
		latest := ""
		if m := t.Cached(); m != nil {
			latest = fmt.Sprintf(" (latest is %d)", m.Version)
		}
		return fmt.Errorf("version %d not found in %s%s: %w", v, app.TableURI, latest, table.ErrVersionNotFound)
	}
	if errors.Is(err, table.ErrVersionPruned) {
		return prunedErr(app.TableURI, t, v)
	}
	return err
}

func newTagCmd(app *App) *cobra.Command {
	var version uint64
	var del bool
	cmd := &cobra.Command{
		Use:   "tag NAME [--version N] | tag --delete NAME",
		Short: "Name a version (default latest) so it is never pruned, or delete a tag",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if del && cmd.Flags().Changed("version") {
				return Usagef("--delete takes no --version")
			}
			ctx := cmd.Context()
			t, err := app.OpenTable(ctx)
			if err != nil {
				return err
			}
			if del {
				err := t.Untag(ctx, name)
				switch {
				case errors.Is(err, table.ErrInvalidTag):
					return &UsageError{Err: err}
				case errors.Is(err, table.ErrTagNotFound):
					return fmt.Errorf("tag %q: %w", name, table.ErrTagNotFound)
				case err != nil:
					return err
				}
				if app.JSON() {
					return printJSON(app.Stdout, map[string]any{"deleted": name})
				}
				_, err = fmt.Fprintf(app.Stdout, "deleted tag %s\n", name)
				return err
			}
			v := version
			if v == 0 {
				v = t.Cached().Version
			}
			err = t.Tag(ctx, name, v)
			switch {
			case errors.Is(err, table.ErrInvalidTag):
				return &UsageError{Err: err}
			case errors.Is(err, table.ErrTagExists):
				return fmt.Errorf("tag %q: %w (delete it first with tag --delete)", name, table.ErrTagExists)
			case err != nil:
				return friendlyVersionErr(app, t, v, err)
			}
			if app.JSON() {
				return printJSON(app.Stdout, map[string]any{"tag": name, "version": v})
			}
			_, err = fmt.Fprintf(app.Stdout, "tagged version %d as %s\n", v, name)
			return err
		},
	}
	cmd.Flags().Uint64Var(&version, "version", 0, "version to tag (default latest)")
	cmd.Flags().BoolVar(&del, "delete", false, "delete the tag instead")
	return cmd
}

func newTagsCmd(app *App) *cobra.Command {
	return &cobra.Command{
		Use:   "tags",
		Short: "List tags",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			t, err := app.OpenTable(ctx)
			if err != nil {
				return err
			}
			tags, err := t.Tags(ctx)
			if err != nil {
				return err
			}
			names := make([]string, 0, len(tags))
			for n := range tags {
				names = append(names, n)
			}
			sort.Strings(names)
			if app.JSON() {
				return printJSONLines(app.Stdout, names, func(n string) any { return map[string]any{"name": n, "version": tags[n]} })
			}
			lines := make([][]string, len(names))
			for i, n := range names {
				lines[i] = []string{n, strconv.FormatUint(tags[n], 10)}
			}
			return printTable(app.Stdout, []string{"TAG", "VERSION"}, lines)
		},
	}
}

func newRestoreCmd(app *App) *cobra.Command {
	return &cobra.Command{
		Use:   "restore VERSION",
		Short: "Commit a new version with the rows of an earlier one",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			v, err := parseVersionArg(args[0])
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			t, err := app.OpenTable(ctx)
			if err != nil {
				return err
			}
			res, err := t.Restore(ctx, v)
			if err != nil {
				return friendlyVersionErr(app, t, v, err)
			}
			if app.JSON() {
				return printJSON(app.Stdout, map[string]any{"restored": v, "version": res.Version, "rows": res.RowsAdded})
			}
			_, err = fmt.Fprintf(app.Stdout, "restored version %d as version %d (%s)\n", v, res.Version, nRows(res.RowsAdded))
			return err
		},
	}
}

func newStatsCmd(app *App) *cobra.Command {
	return &cobra.Command{
		Use:   "stats",
		Short: "Summarise the latest version and the stored history",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			t, err := app.OpenTable(ctx)
			if err != nil {
				return err
			}
			s, err := t.Stats(ctx)
			if err != nil {
				return err
			}
			if app.JSON() {
				return printJSON(app.Stdout, struct {
					Table string `json:"table"`
					dataset.Stats
				}{app.TableURI, s})
			}
			return printKV(app.Stdout, StatsLines(s))
		},
	}
}

// StatsLines renders table stats as label/value pairs (shared with the demo).
func StatsLines(s dataset.Stats) [][2]string {
	pairs := [][2]string{{"latest version", strconv.FormatUint(s.Version, 10)}}
	if s.FormatVersion != 0 {
		pairs = append(pairs, [2]string{"format version", strconv.FormatUint(s.FormatVersion, 10)})
	}
	return append(pairs, [][2]string{
		{"versions stored", strconv.Itoa(s.Versions)},
		{"fragments", strconv.Itoa(s.Fragments)},
		{"rows", rowsText(s.Rows, s.InlineRows)},
		{"deleted rows", fmt.Sprintf("%d (in %d deletion files)", s.DeletedRows, s.DeletionFiles)},
		{"manifest bytes", HumanBytes(s.ManifestBytes) + " all versions"},
		{"latest manifest", HumanBytes(s.LatestManifestBytes)},
		{"data bytes", HumanBytes(int64(s.DataBytes)) + " referenced by the latest version"},
	}...)
}

// rowsText is a row count, with the inline rows among them (format 3:
// in the manifest, in no data file) when there are any.
func rowsText(rows, inline uint64) string {
	if inline == 0 {
		return strconv.FormatUint(rows, 10)
	}
	return fmt.Sprintf("%d (%d inline in the manifest)", rows, inline)
}

// PrintKV prints label/value pairs aligned (shared with the demo).
func PrintKV(out io.Writer, pairs [][2]string) error { return printKV(out, pairs) }
