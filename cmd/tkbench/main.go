package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tablekeep/tablekeep/shared/bench"
	"github.com/tablekeep/tablekeep/shared/objstore"
)

func main() {
	quick := flag.Bool("quick", false, "tiny sizes (seconds; figures not meaningful)")
	docs := flag.String("docs", "docs", "directory for benchmarks.md and the plot")
	work := flag.String("work", "", "scratch directory (default: a temporary directory, removed at the end)")
	ops := flag.Int("churn-ops", 0, "writes per churn run (default 10000; quick 150)")
	scales := flag.String("scales", "", "history sizes, comma-separated (default 10,1000,20000)")
	repeat := flag.Int("repeat", 0, "timed repetitions per figure (default 20)")
	latency := flag.String("latency", "none", "object-store latency added to every measured request: none, s3, s3-express, a duration, or get=20ms,put=30ms,list=40ms,delete=120ms")
	only := flag.String("only", "", "measure one section only and print it instead of writing the docs: latency, fleet, goals")
	fleetTables := flag.Int("fleet-tables", 0, "tables in the fleet simulation (default 10000; quick 300; -1 skips it)")
	fleetHours := flag.Float64("fleet-hours", 0, "simulated hours of the fleet simulation (default 24)")
	goalFleet := flag.Int("goal-fleet-tables", 0, "tables in each of the goals section's fleet simulations, one per format (default: -fleet-tables)")
	backlog := flag.Int("backlog", 0, "versions in the latency section's cleanup backlog (default bench.BacklogFull; quick 60)")
	flag.Parse()
	cfg := bench.Defaults(*quick)
	prof, err := objstore.ParseProfile(*latency)
	if err != nil {
		fmt.Fprintln(os.Stderr, "tkbench: -latency:", err)
		os.Exit(2)
	}
	cfg.Latency = prof
	cfg.DocsDir, cfg.Log = *docs, os.Stderr
	if *ops > 0 {
		cfg.ChurnOps = *ops
	}
	if *repeat > 0 {
		cfg.Repeat = *repeat
	}
	if *scales != "" {
		cfg.Scales = nil
		for _, s := range strings.Split(*scales, ",") {
			v, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil || v < 2 {
				fmt.Fprintf(os.Stderr, "tkbench: -scales: %q is not a size of at least 2\n", s)
				os.Exit(2)
			}
			cfg.Scales = append(cfg.Scales, v)
		}
	}
	if *goalFleet > 0 {
		cfg.GoalFleetTables = *goalFleet
	}
	if *backlog > 0 {
		cfg.BacklogVersions = *backlog
	}
	switch *only {
	case "", "latency", "fleet", "goals":
		cfg.Only = *only
	default:
		fmt.Fprintf(os.Stderr, "tkbench: -only: unknown section %q (want latency, fleet or goals)\n", *only)
		os.Exit(2)
	}
	switch {
	case *fleetTables < 0:
		cfg.Fleet.Tables = 0
	case *fleetTables > 0:
		cfg.Fleet.Tables = *fleetTables
	}
	if *fleetHours > 0 {
		cfg.Fleet.Duration = time.Duration(*fleetHours * float64(time.Hour))
	}
	if !prof.IsZero() {
		cfg.Fleet.Profile = prof
	}
	cfg.WorkDir = *work
	if cfg.WorkDir == "" {
		dir, err := os.MkdirTemp("", "tkbench-")
		if err != nil {
			fmt.Fprintln(os.Stderr, "tkbench:", err)
			os.Exit(1)
		}
		defer os.RemoveAll(dir)
		cfg.WorkDir = dir
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	res, err := bench.Run(ctx, cfg)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "tkbench:", err)
		if *work == "" {
			os.RemoveAll(cfg.WorkDir)
		}
		os.Exit(1)
	}
	if cfg.Only == "fleet" {
		fmt.Print(bench.MarkdownFleet(*res.Fleet))
		fmt.Printf("(section measured in %s; nothing written to %s)\n", res.Elapsed.Round(1e9), cfg.DocsDir)
		return
	}
	if cfg.Only == "goals" {
		fmt.Print(bench.MarkdownGoals(*res.Goals))
		fmt.Printf("(section measured in %s; nothing written to %s)\n", res.Elapsed.Round(1e9), cfg.DocsDir)
		return
	}
	if cfg.Only == "latency" {
		fmt.Print(bench.MarkdownLatency(res.Latency))
		fmt.Printf("(section measured in %s; nothing written to %s)\n", res.Elapsed.Round(1e9), cfg.DocsDir)
		return
	}
	fmt.Printf("wrote %s/benchmarks.md and %s/%s in %s\n", cfg.DocsDir, cfg.DocsDir, bench.PlotName, res.Elapsed.Round(1e9))
}
