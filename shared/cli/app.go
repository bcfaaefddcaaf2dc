package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"regexp"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/progress"
	"github.com/tablekeep/tablekeep/shared/table"
	"github.com/tablekeep/tablekeep/shared/warehouse"
)

// Exit codes.
const (
	ExitOK    = 0
	ExitError = 1 // the command ran and failed
	ExitUsage = 2 // bad flags, arguments or flag values
)

// App is the state shared by every subcommand: global flags and I/O.
type App struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer

	TableURI string // --table
	Output   string // --output: "table" or "json"
	Verbose  bool   // --verbose

	Logger *slog.Logger // discards unless --verbose

	counting *objstore.Counting // set by OpenStore with --verbose
	bars     progress.Func      // tests: the bars a terminal would show
	warnings []string           // printed after a command that succeeded
}

// JSON reports whether --output json was given.
func (a *App) JSON() bool { return a.Output == "json" }

// UsageError marks an error as a usage error (exit code 2).
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// Usagef returns a usage error (exit code 2).
func Usagef(format string, args ...any) error {
	return &UsageError{Err: fmt.Errorf(format, args...)}
}

// OpenStore opens the store and root that --table names. With mustExist, a
// local path that is not an existing directory is an error rather than
// being created.
func (a *App) OpenStore(ctx context.Context, mustExist bool) (objstore.Store, string, error) {
	if a.TableURI == "" {
		return nil, "", Usagef("--table is required (s3://bucket/prefix or a local path)")
	}
	scheme, _, path, err := objstore.ParseURI(a.TableURI)
	if err != nil {
		return nil, "", Usagef("--table: %v", err)
	}
	if scheme == "file" && mustExist {
		st, err := os.Stat(path)
		switch {
		case errors.Is(err, fs.ErrPermission):
			return nil, "", fmt.Errorf("%s: permission denied", a.TableURI)
		case err != nil:
			return nil, "", fmt.Errorf("%s: %w: no such directory", a.TableURI, table.ErrNotATable)
		case !st.IsDir():
			return nil, "", fmt.Errorf("%s: %w: it is a file, not a table directory", a.TableURI, table.ErrNotATable)
		}
	}
	store, root, err := warehouse.OpenStore(ctx, a.TableURI, stackEndpoint("AWS_ENDPOINT_URL_S3", EnvStackS3Endpoint))
	if err != nil || !a.Verbose {
		return store, root, err
	}
	a.counting = objstore.NewCounting(store)
	return a.counting, root, nil
}

// TableOptions are the table options every command uses.
func (a *App) TableOptions() table.Options {
	return table.Options{Logger: a.Logger}
}

// OpenTable opens the existing table that --table names.
func (a *App) OpenTable(ctx context.Context) (*table.Table, error) {
	store, root, err := a.OpenStore(ctx, true)
	if err != nil {
		return nil, err
	}
	t, err := table.Open(ctx, store, root, a.TableOptions())
	if err != nil && !errors.Is(err, context.Canceled) && isLanceDataset(ctx, store, root) {
		return nil, lanceNotTable(a.TableURI)
	}
	if errors.Is(err, table.ErrNotATable) {
		return nil, fmt.Errorf("%s: %w (no manifests under %s)", a.TableURI, table.ErrNotATable, table.VersionsPrefix)
	}
	return t, err
}

// OpenTableAt opens the table for reading version v (0: the latest). A
// corrupt latest manifest does not keep an older, intact version from
// being read: with v set, the table is then a handle that has read nothing
// (Snapshot checks out v by name).
func (a *App) OpenTableAt(ctx context.Context, v uint64) (*table.Table, error) {
	t, err := a.OpenTable(ctx)
	if v == 0 || !errors.Is(err, table.ErrCorruptManifest) {
		return t, err
	}
	store, root, serr := a.OpenStore(ctx, true)
	if serr != nil {
		return nil, err
	}
	a.Logger.Warn("latest manifest unreadable; reading the version asked for", "version", v, "err", err)
	return table.Handle(store, root, a.TableOptions()), nil
}

// Snapshot opens the table at version v, or at its latest version if v is 0
// (the one OpenTable just loaded: no further requests).
func (a *App) Snapshot(ctx context.Context, t *table.Table, v uint64) (*table.Snapshot, error) {
	if v == 0 {
		return t.Snapshot(), nil
	}
	s, err := t.Checkout(ctx, v)
	if err != nil {
		return nil, friendlyVersionErr(a, t, v, err)
	}
	return s, nil
}

// EnvTable is the default of --table for the table commands.
const EnvTable = "TABLEKEEP_TABLE"

// Command annotations: warehouse commands (their --table is a registered
// name, not TABLEKEEP_TABLE), commands with CSV output.
const (
	annotWarehouse = "tablekeep.warehouse"
	annotCSV       = "tablekeep.csv"
)

// buildStamp is the commit `make build` stamps in with -ldflags -X (e.g.
// "commit 0123456789ab+dirty, 2026-12-01T21:00:00Z"): the version says
// which commit even when Go's VCS stamping is off (GOFLAGS=-buildvcs=false,
// a build outside the work tree). Set only by the linker.
var buildStamp string

// buildVersion is the module version and VCS revision the binary was built
// from (debug.ReadBuildInfo, else buildStamp), with the Go version.
func buildVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(no build info)"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, at, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	switch {
	case rev != "":
		v += fmt.Sprintf(" (commit %.12s%s, %s)", rev, dirty, at)
	case buildStamp != "":
		v += " (" + buildStamp + ")"
	}
	return v + " " + bi.GoVersion
}

// commands are the subcommands of the tree.
var commands = []func(*App) *cobra.Command{
	newCreateCmd,
	newAppendCmd,
	newUpsertCmd,
	newDeleteCmd,
	newScanCmd,
	newGetCmd,
	newVersionsCmd,
	newTagCmd,
	newTagsCmd,
	newRestoreCmd,
	newStatsCmd,
	newDescribeCmd,
	newExportCmd,
	newFilesCmd,
	newRegisterCmd,
	newUnregisterCmd,
	newTablesCmd,
	newMaintainCmd,
	newCompactCmd,
	newPruneCmd,
	newSweepCmd,
	newStatusCmd,
	newLeaseCmd,
}

// NewRoot builds the command tree for app.
func NewRoot(app *App) *cobra.Command {
	root := &cobra.Command{
		Use:           "tablekeep",
		Short:         "Keep versioned tables on S3 or local disk healthy",
		SilenceErrors: true,
		SilenceUsage:  true,
		Version:       buildVersion(),
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			switch app.Output {
			case "table", "json":
			case "csv":
				if cmd.Annotations[annotCSV] == "" {
					return Usagef("--output csv is for scan and get; %s takes table or json", cmd.Name())
				}
			default:
				return Usagef("--output must be table, json or csv (scan, get), not %q", app.Output)
			}
			// TABLEKEEP_TABLE stands for --table in the table commands (in
			// the warehouse commands --table names a registered table).
			if !cmd.Flags().Changed("table") && cmd.Annotations[annotWarehouse] == "" {
				app.TableURI = os.Getenv(EnvTable)
			}
			cmd.Flags().Visit(func(f *pflag.Flag) {
				if to := f.Annotations[annotDeprecatedFor]; len(to) == 1 {
					app.warnings = append(app.warnings, fmt.Sprintf("--%s is deprecated here: use --%s", f.Name, to[0]))
				}
			})
			// Versions start at 1 (docs/format.md): --version 0 is not "the
			// latest" (which is --version left out).
			if f := cmd.Flags().Lookup("version"); f != nil && f.Changed && f.Value.String() == "0" {
				return Usagef("--version 0: versions start at 1 (leave --version out for the latest)")
			}
			if app.Verbose {
				app.Logger = slog.New(slog.NewTextHandler(app.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
			}
			// The long phases of the library calls (a sweep reading 20,000
			// manifests) tick on the terminal's bars.
			cmd.SetContext(progress.WithBars(cmd.Context(), app.progress()))
			return nil
		},
	}
	root.SetVersionTemplate("tablekeep {{.Version}}\n")
	root.SetIn(app.Stdin)
	root.SetOut(app.Stdout)
	root.SetErr(app.Stderr)
	pf := root.PersistentFlags()
	pf.StringVar(&app.TableURI, "table", "", "table location: s3://bucket/prefix or a local directory (default $"+EnvTable+"); warehouse commands: a registered NAME")
	pf.StringVarP(&app.Output, "output", "o", "table", "output format: table or json (scan and get: also csv)")
	pf.BoolVarP(&app.Verbose, "verbose", "v", false, "log to stderr")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		if msg := numberFlagError(err); msg != "" {
			return Usagef("%s: %s", c.CommandPath(), msg)
		}
		return Usagef("%s: %v (usage: %s; see %s --help)", c.CommandPath(), err, c.UseLine(), c.CommandPath())
	})

	for _, newCmd := range commands {
		root.AddCommand(newCmd(app))
	}
	// cobra's completion command, with an unknown shell a usage error
	// (cobra prints its help and exits 0).
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		switch c.Name() {
		case "completion":
			c.Args = cobra.ArbitraryArgs
			c.RunE = func(cmd *cobra.Command, args []string) error {
				if len(args) > 0 {
					return Usagef("completion %s: unknown shell: want bash, zsh, fish or powershell", args[0])
				}
				return cmd.Help()
			}
		case "describe":
			c.SuggestFor = []string{"schema", "info", "show"}
		}
	}
	for _, c := range root.Commands() {
		switch c.Name() {
		case "register", "unregister", "tables", "status", "maintain", "compact", "prune", "sweep":
			c.Annotations = map[string]string{annotWarehouse: "1"}
		case "scan", "get":
			c.Annotations = map[string]string{annotCSV: "1"}
		}
	}
	addCompletions(app, root)
	markRunErrors(root)
	return root
}

// runError marks an error returned by a command's RunE, so that Run can tell
// it from cobra's own argument and flag errors (which are usage errors).
type runError struct{ err error }

func (e *runError) Error() string { return e.err.Error() }
func (e *runError) Unwrap() error { return e.err }

func markRunErrors(c *cobra.Command) {
	// cobra's argument errors name the command and its usage.
	if args := c.Args; args != nil {
		c.Args = func(cmd *cobra.Command, a []string) error {
			if err := args(cmd, a); err != nil {
				return Usagef("%s: %v (usage: %s)", cmd.CommandPath(), err, cmd.UseLine())
			}
			return nil
		}
	}
	if run := c.RunE; run != nil {
		c.RunE = func(cmd *cobra.Command, args []string) error {
			if err := run(cmd, args); err != nil {
				return &runError{err}
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		markRunErrors(sub)
	}
}

// Run executes the command tree with args and returns the exit code. Errors
// are printed to stderr as one line: "tablekeep: <message>".
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	app := &App{Stdin: stdin, Stdout: stdout, Stderr: stderr, Logger: slog.New(slog.DiscardHandler)}
	root := NewRoot(app)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if app.counting != nil {
		app.Logger.Info("object store requests", "counts", app.counting.Counts().String())
	}
	if err == nil {
		for _, w := range app.warnings { // on failure the error line says it all
			fmt.Fprintf(stderr, "tablekeep: warning: %s\n", w)
		}
		return ExitOK
	}
	msg := styled(err, app.TableURI).Error()
	if m := didYouMean.FindStringSubmatch(msg); m != nil {
		msg = fmt.Sprintf("%s: did you mean %s? (see tablekeep --help)", m[1], strings.Join(strings.Fields(m[2]), " or "))
	}
	fmt.Fprintf(stderr, "tablekeep: %s\n", oneLine(msg))
	var ue *UsageError
	var re *runError
	switch {
	case errors.As(err, &ue):
		return ExitUsage
	case errors.As(err, &re):
		return ExitError
	default: // cobra's own: unknown command, wrong number of arguments, bad flag
		return ExitUsage
	}
}

var newlines = regexp.MustCompile(`\s*\n\s*`)

// didYouMean is cobra's suggestion for an unknown command.
var didYouMean = regexp.MustCompile(`(?s)^(unknown command .*?)\s+Did you mean this\?\s+(.*?)\s*$`)

func oneLine(s string) string { return newlines.ReplaceAllString(strings.TrimSpace(s), " ") }

// numberFlagError says what a numeric flag takes when its value is not one
// ("--target-rows -5: want a whole number >= 0; --target-rows: ..."), not
// strconv's "parsing "-5": invalid syntax"; "" for any other error.
func numberFlagError(err error) string {
	var iv *pflag.InvalidValueError
	var ne *strconv.NumError
	if !errors.As(err, &iv) || !errors.As(err, &ne) {
		return ""
	}
	f := iv.GetFlag()
	want := map[string]string{"uint": "a whole number >= 0", "uint64": "a whole number >= 0", "uint32": "a whole number >= 0",
		"int": "a whole number", "int64": "a whole number", "float64": "a number"}[f.Value.Type()]
	if want == "" {
		return ""
	}
	if errors.Is(ne.Err, strconv.ErrRange) {
		want += " in range"
	}
	return fmt.Sprintf("--%s %s: want %s; --%s: %s", f.Name, iv.GetValue(), want, f.Name, f.Usage)
}
