package demo

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tablekeep/tablekeep/shared/objstore"
)

// Main runs the tkdemo command line and returns the exit code (2 for usage
// errors, 1 for failures). tty turns the progress bar on.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer, tty bool) int {
	cfg := Config{Out: stdout, Maintain: Maintain}
	var noMaintain bool
	var latency string
	usage := false
	cmd := &cobra.Command{
		Use:           "tkdemo [--dir D] [--ops N] [--writers W] [--seed S] [--latency PROFILE]",
		Short:         "Reproduce the registry churn of the seed incident on a local table (no services needed)",
		Args:          cobra.NoArgs,
		SilenceErrors: true,
		SilenceUsage:  true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cfg.Ops <= 0 || cfg.Writers <= 0 {
				usage = true
				return fmt.Errorf("--ops and --writers must be positive")
			}
			var err error
			if cfg.Latency, err = objstore.ParseProfile(latency); err != nil {
				usage = true
				return fmt.Errorf("--latency: %w", err)
			}
			if noMaintain {
				cfg.Maintain = nil
			}
			cfg.Progress, cfg.ProgressOut = tty, stderr
			_, err = Run(cmd.Context(), cfg)
			return err
		},
	}
	cmd.SetArgs(args)
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	cmd.CompletionOptions.DisableDefaultCmd = true
	f := cmd.Flags()
	f.StringVar(&cfg.Dir, "dir", "demo-data/registry", "table directory (wiped at start)")
	f.IntVar(&cfg.Ops, "ops", 2000, "total writes")
	f.IntVar(&cfg.Writers, "writers", 4, "concurrent writers, each with its own table handle")
	f.Uint64Var(&cfg.Seed, "seed", 1, "random seed")
	f.BoolVar(&noMaintain, "no-maintain", false, "skip the maintenance step")
	f.StringVar(&latency, "latency", "none", "object-store latency added to every request: none, s3, s3-express, a duration, or get=20ms,put=30ms,list=40ms,delete=120ms")
	ran := false
	cmd.PreRun = func(*cobra.Command, []string) { ran = true }
	err := cmd.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	fmt.Fprintf(stderr, "tkdemo: %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
	if usage || !ran {
		return 2
	}
	return 1
}
