package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/tablekeep/tablekeep/shared/formats"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/table"
)

type describeJSON struct {
	Table       string      `json:"table"`
	Version     uint64      `json:"version"`
	Schema      string      `json:"schema,omitempty"` // tablekeep (a Lance dataset's is LanceDB's)
	Key         string      `json:"key_column,omitempty"`
	WriterGrace string      `json:"writer_grace,omitempty"` // tablekeep: the writers' grace window
	Fragments   int         `json:"fragments"`
	Rows        uint64      `json:"rows"`
	Registered  string      `json:"registered_as,omitempty"`
	Format      string      `json:"format"`                   // "tablekeep" or "lance"
	FormatVer   uint64      `json:"format_version,omitempty"` // tablekeep: 3 or 2
	InlineRows  uint64      `json:"inline_rows"`              // of Rows, those in the manifest (format 3)
	Versions    int         `json:"versions,omitempty"`       // Lance: versions stored
	Policy      *policyJSON `json:"policy,omitempty"`
}

func newDescribeCmd(app *App) *cobra.Command {
	var wf warehouseFlags
	cmd := &cobra.Command{
		Use:   "describe [--warehouse W]",
		Short: "Print a table's schema, key column and, with --warehouse, the maintenance policy it is registered with",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			var d describeJSON
			t, err := app.OpenTable(ctx)
			if err != nil {
				// A Lance dataset (what LanceDB writes) is described too.
				ld, lerr := describeLance(ctx, app)
				if lerr != nil {
					return err
				}
				d = ld
			} else {
				m := t.Cached()
				d = describeJSON{Table: app.TableURI, Format: formatTablekeep, Version: m.Version, Schema: FormatSchemaSpec(m.Schema), Key: m.KeyColumn,
					WriterGrace: shortDuration(t.WriterGrace()), Fragments: len(m.Fragments)}
				d.Rows = m.Rows() // fragments' live rows and inline rows (format 3)
				d.FormatVer, d.InlineRows = m.FormatVersion(), uint64(len(m.Inline))
			}
			if wf.URI != "" || os.Getenv("TABLEKEEP_WAREHOUSE") != "" {
				w, err := openWarehouse(ctx, app, wf, openMode{})
				if err != nil {
					return err
				}
				refs, err := w.Catalog.Tables(ctx)
				if err != nil {
					return err
				}
				for _, ref := range refs {
					if sameTable(w.URI, ref, app.TableURI) {
						pj := policyOf(ref)
						d.Registered, d.Policy = ref.Name, &pj
					}
				}
			}
			if app.JSON() {
				return printJSON(app.Stdout, d)
			}
			pairs := [][2]string{{"table", d.Table}, {"format", d.Format}}
			if d.FormatVer != 0 {
				pairs[1][1] += " " + strconv.FormatUint(d.FormatVer, 10)
			}
			pairs = append(pairs, [2]string{"version", strconv.FormatUint(d.Version, 10)})
			if d.Format == formatTablekeep {
				pairs = append(pairs, [2]string{"schema", d.Schema}, [2]string{"key column", orDash(d.Key)}, [2]string{"writer grace", d.WriterGrace})
			} else {
				pairs = append(pairs, [2]string{"versions", strconv.Itoa(d.Versions)})
			}
			pairs = append(pairs, [2]string{"fragments", strconv.Itoa(d.Fragments)}, [2]string{"rows", rowsText(d.Rows, d.InlineRows)})
			switch {
			case d.Policy != nil:
				pairs = append(pairs, [2]string{"registered as", d.Registered}, [2]string{"policy", policyText(*d.Policy)})
			case wf.URI != "":
				pairs = append(pairs, [2]string{"registered as", "not registered in " + wf.URI})
			}
			return printKV(app.Stdout, pairs)
		},
	}
	addWarehouseFlags(cmd, &wf, false)
	return cmd
}

func orDash(s string) string {
	if s == "" {
		return "- (append-only)"
	}
	return s
}

// sameTable reports whether the registered ref of the warehouse at
// whURI is the table at loc.
func sameTable(whURI string, ref maintenance.TableRef, loc string) bool {
	rel, ok := strings.CutPrefix(strings.TrimSuffix(loc, "/"), strings.TrimSuffix(whURI, "/")+"/")
	if !strings.Contains(whURI, "://") && !strings.Contains(loc, "://") {
		aw, err1 := filepath.Abs(whURI)
		al, err2 := filepath.Abs(loc)
		r, err3 := filepath.Rel(aw, al)
		ok = err1 == nil && err2 == nil && err3 == nil && !strings.HasPrefix(r, "..")
		rel = filepath.ToSlash(r)
	}
	if !ok {
		return false
	}
	root := strings.TrimSuffix(ref.Root, "/")
	return root == strings.Trim(rel, "/") || strings.HasSuffix(root, "/"+strings.Trim(rel, "/"))
}

func newExportCmd(app *App) *cobra.Command {
	var format, out string
	var version uint64
	var force bool
	cmd := &cobra.Command{
		Use:   "export --format parquet --out FILE [--version N] [--force]",
		Short: "Write the live rows of a version (default latest) to one Parquet file",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if format != "parquet" {
				return Usagef("--format must be parquet, not %q (for JSON lines or CSV use scan -o json / -o csv)", format)
			}
			if out == "" {
				return Usagef("--out FILE is required")
			}
			if _, err := os.Stat(out); err == nil && !force {
				return fmt.Errorf("export: %s exists: choose another --out, or --force to overwrite it", out)
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
			f, err := os.Create(out)
			if err != nil {
				return err
			}
			props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Zstd))
			w, err := pqarrow.NewFileWriter(snap.Schema(), f, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
			if err != nil {
				f.Close()
				return err
			}
			var rows int64
			err = snap.Scan(ctx, table.ScanOptions{}, func(rec arrow.RecordBatch) error {
				rows += rec.NumRows()
				return w.Write(rec)
			})
			if cerr := w.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				_ = os.Remove(out)
				return err
			}
			if app.JSON() {
				return printJSON(app.Stdout, map[string]any{"file": out, "version": snap.Version(), "rows": rows})
			}
			_, err = fmt.Fprintf(app.Stdout, "exported %s of version %d to %s\n", nRows(uint64(rows)), snap.Version(), out)
			return err
		},
	}
	cmd.Flags().StringVar(&format, "format", "parquet", "output format: parquet")
	cmd.Flags().StringVar(&out, "out", "", "the file to write (refused if it exists, unless --force)")
	cmd.Flags().BoolVar(&force, "force", false, "overwrite --out if it exists")
	cmd.Flags().Uint64Var(&version, "version", 0, "version to export (default latest)")
	return cmd
}

// fileJSON is one live data file of a version: what a reader needs to
// return the version's rows from the Parquet files directly.
type fileJSON struct {
	Path     string   `json:"path"` // the table location + the file's key
	Rows     uint64   `json:"rows"` // physical rows in the file
	LiveRows uint64   `json:"live_rows"`
	Bytes    uint64   `json:"bytes"`
	Deleted  []uint32 `json:"deleted_positions"` // 0-based row positions masked by the deletion vector
	// InlineRows are the version's rows in no file (format 3: in the
	// manifest), the same on every line: the files alone miss them.
	InlineRows uint64 `json:"inline_rows"`
}

// inlineNote says that n rows of a version are in no data file.
func inlineNote(n uint64) string {
	return fmt.Sprintf("%s inline in the manifest and not in these files: use `export` (docs/cli.md, \"On a format-3 table\")", areRows(n))
}

func areRows(n uint64) string {
	if n == 1 {
		return "1 row is"
	}
	return strconv.FormatUint(n, 10) + " rows are"
}

func newFilesCmd(app *App) *cobra.Command {
	var version uint64
	cmd := &cobra.Command{
		Use:   "files [--version N]",
		Short: "List the data files of a version with their deleted row positions (to read them with DuckDB)",
		Long: `List the live data files of a version (default latest), each with the
row positions its deletion vector masks: the rows of the version are the
rows of these files minus those positions (docs/cli.md has the DuckDB query).
Reads every file's deletion vector (and, to do so, the file).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			t, err := app.OpenTableAt(ctx, version)
			if errors.Is(err, ErrWrongFormat) {
				return lanceFiles(ctx, app, version) // a Lance dataset, read-only
			}
			if err != nil {
				return err
			}
			snap, err := app.Snapshot(ctx, t, version)
			if err != nil {
				return err
			}
			m := snap.Manifest()
			inline := uint64(len(m.Inline))
			files := make([]fileJSON, len(m.Fragments))
			var g errgroup.Group
			g.SetLimit(maintenance.DefaultConcurrency)
			base := strings.TrimSuffix(app.TableURI, "/") + "/"
			for i, f := range m.Fragments {
				files[i] = fileJSON{Path: base + f.File.DataKey(), Rows: f.Rows, LiveRows: f.LiveRows(), Bytes: f.Bytes, Deleted: []uint32{}, InlineRows: inline}
				if f.Deletion == nil {
					files[i].Deleted = append(files[i].Deleted, f.Inline...) // format 3: in the manifest
					continue
				}
				g.Go(func() error {
					rec, del, err := t.ReadFragment(ctx, m.Schema, f, []int{0})
					if err != nil {
						return err
					}
					rec.Release()
					files[i].Deleted = del
					return nil
				})
			}
			if err := g.Wait(); err != nil {
				return err
			}
			if app.JSON() {
				if inline > 0 { // stdout goes to a file: say it where a person sees it
					fmt.Fprintf(app.Stderr, "tablekeep: note: %s\n", inlineNote(inline))
				}
				return printJSONLines(app.Stdout, files, func(f fileJSON) any { return f })
			}
			var rows [][]string
			for _, f := range files {
				rows = append(rows, []string{f.Path, strconv.FormatUint(f.Rows, 10), strconv.FormatUint(f.LiveRows, 10), strconv.Itoa(len(f.Deleted))})
			}
			if err := printAligned(app.Stdout, []string{"PATH", "ROWS", "LIVE", "DELETED"}, rows); err != nil || inline == 0 {
				return err
			}
			_, err = fmt.Fprintln(app.Stdout, inlineNote(inline))
			return err
		},
	}
	cmd.Flags().Uint64Var(&version, "version", 0, "version (default latest)")
	return cmd
}

// describeLance describes the Lance dataset at --table (formats.Inspect: its
// listing, latest manifest and tags; rows from the latest manifest).
func describeLance(ctx context.Context, app *App) (describeJSON, error) {
	store, root, err := app.OpenStore(ctx, true)
	if err != nil {
		return describeJSON{}, err
	}
	sum, err := formats.Inspect(ctx, store, root)
	if err != nil {
		return describeJSON{}, err
	}
	st, err := formats.LatestStats(ctx, store, root)
	if err != nil {
		return describeJSON{}, err
	}
	return describeJSON{Table: app.TableURI, Format: formats.Lance, Version: sum.Latest, Versions: sum.Versions,
		Fragments: sum.Fragments, Rows: st.Rows}, nil
}
