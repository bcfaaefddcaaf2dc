package cli

import (
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/progress"
)

// recBar records what a pass shows on a terminal's progress bars.
type recBar struct {
	mu       sync.Mutex // a phase's bar ticks from several goroutines
	desc     string
	total    int
	added    int
	describe []string
	finished bool
}

func (b *recBar) Add(n int) error   { b.mu.Lock(); b.added += n; b.mu.Unlock(); return nil }
func (b *recBar) Finish() error     { b.finished = true; return nil }
func (b *recBar) Describe(s string) { b.describe = append(b.describe, s) }
func (b *recBar) String() string {
	return fmt.Sprintf("%s %d/%d %v", b.desc, b.added, b.total, b.describe)
}
func recBars(bars *[]*recBar) func(string, int) progress.Bar {
	return func(desc string, total int) progress.Bar {
		b := &recBar{desc: desc, total: total}
		*bars = append(*bars, b)
		return b
	}
}

// TestDryRunShowsPlanningProgress is issue 22 Medium 9: a dry run's
// cleanup planning (reading the change records of every prunable range)
// has a bar counting the versions read, naming the table and the range,
// where it had none (a blank terminal for seconds on a long backlog).
func TestDryRunShowsPlanningProgress(t *testing.T) {
	t.Setenv("TABLEKEEP_WAREHOUSE", "")
	dir := t.TempDir()
	tbl := filepath.Join(dir, "events")
	ok(t, "", "create", "--table", tbl, "--schema", "name:utf8,uri:utf8", "--key", "name")
	for i := range 30 {
		ok(t, fmt.Sprintf("{\"name\":\"k%d\",\"uri\":\"u%d\"}\n", i%4, i), "upsert", "--table", tbl)
	}
	ok(t, "", "register", "events", "events", "--warehouse", dir, "--keep-last", "3")
	app := &App{Stdout: io.Discard, Stderr: io.Discard, Logger: slog.New(slog.DiscardHandler)}
	w, err := openWarehouse(t.Context(), app, warehouseFlags{URI: dir, ahead: 2 * time.Hour}, openMode{})
	if err != nil {
		t.Fatal(err)
	}
	var bars []*recBar
	rep, err := w.pass(t.Context(), passOptions{DryRun: true, Tables: []string{"events"}, Steps: allSteps, Progress: recBars(&bars)})
	if err != nil {
		t.Fatal(err)
	}
	var plan *recBar
	for _, b := range bars {
		if b.desc == "plan cleanup" {
			plan = b
		}
	}
	ranges := rep.Run.Tables[0].Prune.Ranges
	if plan == nil || len(ranges) == 0 {
		t.Fatalf("no planning bar (bars %v) or nothing to plan (%d ranges)", bars, len(ranges))
	}
	versions := 0
	for _, rg := range ranges {
		versions += int(rg.To - rg.From + 1)
	}
	if plan.total != versions || plan.added != versions || !plan.finished || len(plan.describe) != len(ranges) ||
		plan.describe[0] != fmt.Sprintf("plan cleanup events %d-%d", ranges[0].From, ranges[0].To) {
		t.Fatalf("planning bar %v: want %d versions over %d ranges, each named", plan, versions, len(ranges))
	}
}
