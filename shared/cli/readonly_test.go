package cli

import (
	"os"
	"path/filepath"
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
