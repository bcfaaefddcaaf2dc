package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDeletedThresholdNonsenseRefused is issue 22 Medium 6: NaN, Inf,
// negatives, 0, values above 1 and below 0.001 are refused (exit 2, one
// line), nothing stored, and tables -o json keeps working.
func TestDeletedThresholdNonsenseRefused(t *testing.T) {
	t.Setenv("TABLEKEEP_WAREHOUSE", "")
	dir := t.TempDir()
	ok(t, "", "create", "--table", filepath.Join(dir, "t"), "--schema", "name:utf8", "--key", "name")
	w := "--warehouse=" + dir
	for v, want := range map[string]string{
		"NaN":    "deleted threshold NaN is not a number",
		"nan":    "deleted threshold NaN is not a number",
		"Inf":    "deleted threshold +Inf is not a number",
		"-0.5":   "deleted threshold -0.5 must be in (0, 1]",
		"0":      "deleted threshold 0 must be in (0, 1]",
		"1.5":    "deleted threshold 1.5 must be in (0, 1]",
		"1e-300": "deleted threshold 1e-300 is below 0.001: it would rewrite a fragment for a single deleted row",
	} {
		fails(t, 2, want, "", "register", "t", "t", w, "--deleted-threshold", v)
		fails(t, 2, want, "", "register", "t", "t", w, "--table-format", "lance", "--deleted-threshold", v)
	}
	ok(t, "", "register", "t", "t", w, "--deleted-threshold", "0.001")
	if js := jsonLines(t, ok(t, "", "tables", w, "-o", "json")); len(js) != 3 {
		t.Fatalf("tables -o json: %v", js)
	}
}

// TestUsageErrorsPluralsAndWording: issue 22's Lows that are flags, plurals and wording:
// --parallel 0 and -3, --lock-table / --queue-url on a local warehouse,
// --key-range a..b..c, completion tcsh are usage errors (exit 2); schema
// suggests describe; unregister -o json prints JSON; one of a thing is
// singular; sweep rows show no LATEST or FLOOR; the sweep's files are
// "unreferenced", not "orphans"; a sweep dry run prints no empty sections.
func TestUsageErrorsPluralsAndWording(t *testing.T) {
	for _, k := range []string{"TABLEKEEP_WAREHOUSE", "TABLEKEEP_LOCK_TABLE", "TABLEKEEP_TABLE"} {
		t.Setenv(k, "")
	}
	t.Setenv(EnvAllowClockAhead, "test")
	dir := t.TempDir()
	tbl := filepath.Join(dir, "t")
	ok(t, "", "create", "--table", tbl, "--schema", "name:utf8", "--key", "name", "--table-format", "2")
	ok(t, "{\"name\":\"a\"}\n", "upsert", "--table", tbl)
	if err := os.WriteFile(filepath.Join(tbl, "data", "00000000deadbeef.parquet"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	w := "--warehouse=" + dir
	ok(t, "", "register", "t", "t", w)
	for _, c := range []struct {
		want string
		args []string
	}{
		{"--parallel 0: read at least 1 table at once", []string{"status", w, "--parallel", "0"}},
		{"--parallel -3: read at least 1 table at once", []string{"status", w, "--parallel", "-3"}},
		{"--lock-table and --queue-url are for s3:// warehouses", []string{"maintain", w, "--lock-table", "locks"}},
		{"--lock-table and --queue-url are for s3:// warehouses", []string{"prune", w, "--queue-url", "https://sqs.us-east-1.amazonaws.com/1/q"}},
		{`--key-range "a..b..c": want LO..HI`, []string{"scan", "--table", tbl, "--key-range", "a..b..c"}},
		{"completion tcsh: unknown shell: want bash, zsh, fish or powershell", []string{"completion", "tcsh"}},
		{`unknown command "schema" for "tablekeep": did you mean describe?`, []string{"schema"}},
	} {
		fails(t, 2, c.want, "", c.args...)
	}
	var u map[string]any
	if err := json.Unmarshal([]byte(ok(t, "", "unregister", "t", w, "-o", "json")), &u); err != nil || u["unregistered"] != "t" {
		t.Fatalf("unregister -o json: %v %v", u, err)
	}
	ok(t, "", "register", "t", "t", w)
	out := ok(t, "", "sweep", w, "--dry-run", "--clock-ahead", "2h")
	if !regexpMatch(`(?m)^t +0 +- +- +0 +0 +1 +1 B`, out) || !strings.Contains(out, "  sweep: 1 unreferenced file (1 B)") ||
		!strings.Contains(out, "would delete 1 key,") || strings.Contains(out, "_stats:") || strings.Contains(out, "_registry:") {
		t.Fatalf("sweep --dry-run:\n%s", out)
	}
	// A corrupt manifest: the table's path and the version, not only the
	// inverted key.
	bad := filepath.Join(dir, "bad")
	ok(t, "", "create", "--table", bad, "--schema", "name:utf8", "--key", "name")
	ok(t, "{\"name\":\"a\"}\n", "upsert", "--table", bad)
	if err := os.WriteFile(filepath.Join(bad, "_versions", "18446744073709551613.manifest"), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	fails(t, 1, bad+": _versions/18446744073709551613.manifest (version 2): corrupt manifest", "", "scan", "--table", bad)
	out = ok(t, "", "sweep", w, "--clock-ahead", "2h")
	if !regexpMatch(`(?m)^t +0 +- +- +0 +1 +1 B +1 unreferenced file swept$`, out) || strings.Contains(out, "orphan") ||
		!strings.Contains(out, "deleted 1 key (1 B), 0 versions pruned; cleanup: 0 messages handled") {
		t.Fatalf("sweep:\n%s", out)
	}
	// compact plans no pruning: no kept versions (it said keep-last
	// 2147483647), and its note says nothing about a sweep.
	if out := ok(t, "", "compact", w, "--dry-run"); strings.Contains(out, "2147483647") || strings.Contains(out, "keep ") {
		t.Fatalf("compact --dry-run:\n%s", out)
	}
	if out := ok(t, "", "compact", w); strings.Contains(out, "swept") || !strings.Contains(out, "fragments rewritten") {
		t.Fatalf("compact:\n%s", out)
	}
}
