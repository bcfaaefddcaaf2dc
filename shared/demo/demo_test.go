package demo

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tablekeep/tablekeep/shared/table"
)

func TestDemoRowsMatchModel(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "registry")
	var out bytes.Buffer
	maintained := false
	res, err := Run(context.Background(), Config{
		Dir: dir, Ops: 120, Writers: 4, Seed: 7, Out: &out, Options: table.Options{Format: 2}, // pinned: objects per write asserted
		Maintain: func(ctx context.Context, d *Demo) error {
			maintained = true
			// More churn while "maintaining": the hook can drive writers.
			return d.Churn(ctx, 20)
		},
	})
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	if !maintained || len(res.Reports) != 2 {
		t.Fatalf("maintain step not run: %d reports", len(res.Reports))
	}
	if res.Ops != 120 || res.Creates+res.Deletes+res.Retries != 120 || res.Creates == 0 || res.Deletes == 0 {
		t.Fatalf("ops: %+v", res)
	}
	for _, r := range res.Reports {
		if r.Stats.Rows != uint64(r.ModelRows) || r.ScannedRows != r.ModelRows {
			t.Fatalf("%s: table has %d rows (scan %d), model %d", r.Label, r.Stats.Rows, r.ScannedRows, r.ModelRows)
		}
	}
	churn := res.Reports[0]
	if churn.Stats.Versions != 121 || churn.Stats.Version != 121 {
		t.Fatalf("after churn: %d versions stored, latest %d; want 121 (create + one commit per op)", churn.Stats.Versions, churn.Stats.Version)
	}
	if churn.Requests.Put < 120 || churn.Objects < 240 {
		t.Fatalf("after churn: requests %v, %d objects", churn.Requests, churn.Objects)
	}
	if got := res.Reports[1].Stats.Versions; got != 141 {
		t.Fatalf("after maintain: %d versions, want 141", got)
	}
	for _, want := range []string{"== after churn ==", "versions stored:", "latest manifest:", "objects on disk:", "requests:", "GET=", "rows check:", ": OK", "elapsed:"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}

	// A second run wipes the table and starts again.
	res2, err := Run(context.Background(), Config{Dir: dir, Ops: 10, Writers: 2})
	if err != nil {
		t.Fatal(err)
	}
	if res2.Reports[0].Stats.Versions != 11 {
		t.Fatalf("rerun: %d versions", res2.Reports[0].Stats.Versions)
	}
}

func TestDemoRefusesToWipeOtherDirs(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "precious.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), Config{Dir: dir, Ops: 1}); err == nil || !strings.Contains(err.Error(), "refusing") {
		t.Fatalf("err = %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "precious.txt")); err != nil {
		t.Fatal(err)
	}
}

func TestMainExitCodes(t *testing.T) {
	var out, errb bytes.Buffer
	dir := filepath.Join(t.TempDir(), "reg")
	if code := Main(context.Background(), []string{"--dir", dir, "--ops", "8", "--writers", "2"}, &out, &errb, false); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "rows check:") || strings.Contains(out.String(), "\r") {
		t.Fatalf("output:\n%q", out.String())
	}
	errb.Reset()
	if code := Main(context.Background(), []string{"--ops", "0"}, &out, &errb, false); code != 2 || !strings.HasPrefix(errb.String(), "tkdemo: ") {
		t.Fatalf("--ops 0: exit %d, %q", code, errb.String())
	}
	errb.Reset()
	if code := Main(context.Background(), []string{"--nope"}, &out, &errb, false); code != 2 {
		t.Fatalf("--nope: exit %d, %q", code, errb.String())
	}
}

// TestDemoMaintain: the demo's maintenance step prunes versions to the
// policy, folds fragments, and every row survives (Report checks the model).
func TestDemoMaintain(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "registry")
	res, err := Run(context.Background(), Config{Dir: dir, Ops: 120, Writers: 3, Maintain: Maintain})
	if err != nil {
		t.Fatal(err)
	}
	before, after := res.Reports[0], res.Reports[1]
	// Format 3 (the default) keeps small writes inline in the manifest: how
	// many of the 120 writes fit inline depends on how the 3 writers
	// interleave (a rebase merges inline rows), so the table may hold no
	// fragment at all; maintenance folds whatever fragments there are into
	// at most one.
	if before.Stats.Versions != 121 || after.Stats.Versions != 10 || after.Stats.Fragments > 1 ||
		(before.Stats.Fragments > 1 && after.Stats.Fragments != 1) {
		t.Fatalf("versions %d -> %d, fragments %d -> %d", before.Stats.Versions, after.Stats.Versions, before.Stats.Fragments, after.Stats.Fragments)
	}
	if after.ScannedRows != before.ScannedRows || after.Requests.DeleteKeys == 0 {
		t.Fatalf("rows %d -> %d, deleted keys %d", before.ScannedRows, after.ScannedRows, after.Requests.DeleteKeys)
	}
}

// TestDemoLatency: --latency adds a profile's latency to the churn and
// maintenance (a 1 ms profile here, to stay fast) and the reports show an
// open + get by key with its requests and round trips; a bad profile is a
// usage error.
func TestDemoLatency(t *testing.T) {
	var out, errb bytes.Buffer
	dir := filepath.Join(t.TempDir(), "reg")
	if code := Main(context.Background(), []string{"--dir", dir, "--ops", "8", "--writers", "2", "--latency", "1ms"}, &out, &errb, false); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, want := range []string{"latency: custom (GET 1 ms", "open + get by key:", "LIST=1", "round trips (LIST -> GET"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	errb.Reset()
	if code := Main(context.Background(), []string{"--dir", dir, "--latency", "s4"}, &out, &errb, false); code != 2 || !strings.Contains(errb.String(), "--latency") {
		t.Fatalf("--latency s4: exit %d, %q", code, errb.String())
	}
}
