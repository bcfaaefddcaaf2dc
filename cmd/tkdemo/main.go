package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/tablekeep/tablekeep/shared/demo"
	"github.com/tablekeep/tablekeep/shared/progress"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// The churn's progress bar goes to stderr, and only if it is a terminal.
	code := demo.Main(ctx, os.Args[1:], os.Stdout, os.Stderr, progress.IsTerminal(os.Stderr))
	stop()
	os.Exit(code)
}
