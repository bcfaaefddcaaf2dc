package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// dirTree lists every path under dir (files and directories), relative.
func dirTree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out = append(out, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestReadOnlyCommandsNeverCreateAWarehouse is issue 22 High 1 (local):
// status, tables, unregister, maintain (dry or not), compact, prune,
// sweep and describe --warehouse on a directory without _registry write
// nothing and say so in one line, exit 1; register creates the warehouse.
func TestReadOnlyCommandsNeverCreateAWarehouse(t *testing.T) {
	for _, k := range []string{"TABLEKEEP_WAREHOUSE", "TABLEKEEP_LOCK_TABLE", "TABLEKEEP_TABLE"} {
		t.Setenv(k, "")
	}
	dir := t.TempDir()
	ok(t, "", "create", "--table", filepath.Join(dir, "t"), "--schema", "name:utf8", "--key", "name")
	empty := filepath.Join(dir, "typo")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	w := "--warehouse=" + empty
	want := "no warehouse at " + empty + " (no _registry): `tablekeep register` creates one"
	for _, args := range [][]string{
		{"status", w}, {"status", w, "-o", "json"}, {"tables", w}, {"tables", w, "-o", "json"},
		{"maintain", w, "--dry-run"}, {"maintain", w}, {"compact", w}, {"prune", w, "--dry-run"}, {"sweep", w},
		{"unregister", "x", w}, {"describe", "--table", filepath.Join(dir, "t"), w},
	} {
		fails(t, 1, want, "", args...)
	}
	if got := dirTree(t, empty); len(got) != 1 {
		t.Fatalf("read-only commands wrote into %s: %v", empty, got)
	}
	// status --warehouse . in a directory that is not a warehouse.
	t.Chdir(empty)
	fails(t, 1, "no warehouse at . (no _registry)", "", "status", "--warehouse", ".")
	if got := dirTree(t, empty); len(got) != 1 {
		t.Fatalf("status --warehouse . wrote: %v", got)
	}
	// register creates it; then the read-only commands work.
	ok(t, "", "create", "--table", filepath.Join(empty, "t"), "--schema", "name:utf8", "--key", "name")
	ok(t, "", "register", "t", "t", w)
	if out := ok(t, "", "status", w); !regexpMatch(`(?m)^t +tablekeep +ok `, out) {
		t.Fatalf("status after register:\n%s", out)
	}
}

// TestRegisterRefusesSecondNameSystemAndNestedRoots is issue 22 High 3
// (local): a root registered under another name, a system directory, a
// root inside a registered root or holding one are refused with one line;
// registering a name again at its own root still updates its policy.
func TestRegisterRefusesSecondNameSystemAndNestedRoots(t *testing.T) {
	for _, k := range []string{"TABLEKEEP_WAREHOUSE", "TABLEKEEP_LOCK_TABLE"} {
		t.Setenv(k, "")
	}
	dir := t.TempDir()
	for _, p := range []string{"t", "outer", "outer/inner", "box/x"} {
		ok(t, "", "create", "--table", filepath.Join(dir, p), "--schema", "name:utf8", "--key", "name")
	}
	w := "--warehouse=" + dir
	ok(t, "", "register", "prod", "t", w, "--keep-last", "10")
	fails(t, 1, "t is already registered as prod", "", "register", "scratch", "t", w, "--keep-last", "2")
	fails(t, 1, "t is already registered as prod", "", "register", "scratch", "t/", w)
	for _, sys := range []string{"_registry", "_stats", "_locks", "_fleet", "_stats/x"} {
		fails(t, 2, "system table: "+sys+" is the warehouse's own", "", "register", "x", sys, w)
	}
	ok(t, "", "register", "outer", "outer", w)
	fails(t, 1, "nested table roots: outer/inner lies inside outer, registered as outer", "", "register", "inner", "outer/inner", w)
	ok(t, "", "register", "x", "box/x", w)
	ok(t, "", "unregister", "outer", w)
	fails(t, 1, "nested table roots: box holds box/x, registered as x", "", "register", "y", "box", w)
	// prod again at t: allowed, the policy changes.
	if out := ok(t, "", "register", "prod", "t", w, "--keep-last", "5"); !strings.Contains(out, "keep-last 5") {
		t.Fatalf("re-register: %s", out)
	}
	out := ok(t, "", "tables", w)
	if strings.Contains(out, "scratch") || strings.Contains(out, "inner") || !regexpMatch(`(?m)^prod +tablekeep +t/ +5 `, out) {
		t.Fatalf("tables:\n%s", out)
	}
}

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
		fails(t, 2, want, "", "register", "t", "t", w, "--format", "lance", "--deleted-threshold", v)
	}
	ok(t, "", "register", "t", "t", w, "--deleted-threshold", "0.001")
	if js := jsonLines(t, ok(t, "", "tables", w, "-o", "json")); len(js) != 3 {
		t.Fatalf("tables -o json: %v", js)
	}
}
