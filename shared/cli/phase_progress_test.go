package cli

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
)

// runBars runs the command tree as Run does, with bars recorded as a
// terminal would show them.
func runBars(t *testing.T, bars *[]*recBar, args ...string) string {
	t.Helper()
	var out, errb bytes.Buffer
	app := &App{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Logger: slog.New(slog.DiscardHandler), bars: recBars(bars)}
	root := NewRoot(app)
	root.SetArgs(args)
	if err := root.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("%v: %v (stderr %q)", args, err, errb.String())
	}
	return out.String()
}

// TestLongPhasesTick is issue 32 section 2: on a long history, status,
// sweep --dry-run and maintain sat silent for the whole of a phase that
// reads every version (status frozen at 0% (0/3)). Each such phase now has
// its own bar, named by table, step and phase ("events: sweep: reading
// manifests"), ticking once per version and finished.
func TestLongPhasesTick(t *testing.T) {
	t.Setenv("TABLEKEEP_WAREHOUSE", "")
	dir := t.TempDir()
	tbl := "--table=" + filepath.Join(dir, "events")
	ok(t, "", "create", tbl, "--schema", "name:utf8,uri:utf8", "--key", "name")
	const versions = 300
	for i := range versions - 1 { // 200-byte rows: format 3 flushes (a change record) every few writes
		ok(t, fmt.Sprintf("{\"name\":\"k%d\",\"uri\":\"%s\"}\n", i, strings.Repeat("u", 200)), "upsert", tbl)
	}
	ok(t, "", "register", "events", "events", "--warehouse", dir)
	phase := func(bars []*recBar, desc string) *recBar {
		t.Helper()
		for _, b := range bars {
			if b.desc == desc {
				return b
			}
		}
		t.Fatalf("no bar %q among %v", desc, bars)
		return nil
	}
	for _, args := range [][]string{
		{"status", "--warehouse", dir, "--table", "events"},
		{"sweep", "--warehouse", dir, "--table", "events", "--dry-run"},
		{"maintain", "--warehouse", dir, "--table", "events", "--dry-run"},
	} {
		var bars []*recBar
		runBars(t, &bars, args...)
		b := phase(bars, "events: sweep: reading manifests")
		if b.total != versions-1 || b.added != b.total || !b.finished {
			t.Errorf("%v: %v, want %d versions read, finished", args, b, versions-1)
		}
	}
}

// TestVerboseLogsWarehouseRequests: -v logs the object-store requests a
// command made (docs/cli.md, global flags), the warehouse commands' too
// (status, maintain: they logged none).
func TestVerboseLogsWarehouseRequests(t *testing.T) {
	t.Setenv("TABLEKEEP_WAREHOUSE", "")
	dir := t.TempDir()
	ok(t, "", "create", "--table", filepath.Join(dir, "events"), "--schema", "name:utf8", "--key", "name")
	ok(t, "", "register", "events", "events", "--warehouse", dir)
	for _, cmd := range []string{"status", "maintain"} {
		r := run(t, "", cmd, "--warehouse", dir, "-v")
		if r.code != 0 || !strings.Contains(r.err, `msg="object store requests" counts="GET=`) {
			t.Errorf("%s -v: exit %d, stderr has no request counts:\n%s", cmd, r.code, r.err)
		}
	}
}
