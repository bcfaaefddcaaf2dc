package cli

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestSmallThings: issue 12's item 7 (the part built): --version,
// completion, TABLEKEEP_TABLE, scan --key-prefix/--key-range and -o csv,
// an empty --prefix refused unless --all, JSON arrays in .json files,
// timestamps without a zone read as UTC.
func TestSmallThings(t *testing.T) {
	if out := ok(t, "", "--version"); !strings.HasPrefix(out, "tablekeep ") || !strings.Contains(out, "go1.") {
		t.Fatalf("--version: %q", out)
	}
	if out := ok(t, "", "completion", "bash"); !strings.Contains(out, "bash completion") {
		t.Fatalf("completion bash: %.80q", out)
	}
	dir := t.TempDir()
	tbl := filepath.Join(dir, "reg")
	t.Setenv(EnvTable, tbl) // every command below finds the table through it
	ok(t, "", "create", "--schema", "name:utf8,at:timestamp?,note:utf8?", "--key", "name")
	arr := writeFile(t, dir, "rows.json", `[
  {"name": "app/a", "at": "2026-01-02T03:04:05"},
  {"name": "app/b", "at": "2026-01-02 03:04:05.5", "note": "x, \"y\""},
  {"name": "db/c", "at": "2026-01-02"}
]`)
	if out := ok(t, "", "upsert", "--file", arr); out != "upserted 3 rows (0 replaced): version 2\n" {
		t.Fatalf("upsert .json array: %q", out)
	}
	fails(t, 1, "array element 2: not a JSON object", "", "upsert", "--file", writeFile(t, dir, "bad.json", `[{"name":"x"}, 5]`))

	csvOut := ok(t, "", "scan", "-o", "csv", "--key-prefix", "app/")
	if want := "name,at,note\napp/a,2026-01-02T03:04:05Z,\napp/b,2026-01-02T03:04:05.5Z,\"x, \"\"y\"\"\"\n"; csvOut != want {
		t.Fatalf("scan -o csv --key-prefix:\n%s\nwant:\n%s", csvOut, want)
	}
	if out := ok(t, "", "scan", "--key-range", "app/b..db/c", "--columns", "at", "-o", "json"); out != "{\"at\":\"2026-01-02T03:04:05.5Z\"}\n" {
		t.Fatalf("scan --key-range: %q", out)
	}
	if out := ok(t, "", "scan", "--key-range", "db/..", "--columns", "name"); out != "NAME\ndb/c\n" {
		t.Fatalf("scan --key-range open: %q", out)
	}
	fails(t, 2, "want LO..HI", "", "scan", "--key-range", "a")
	fails(t, 2, "--output csv is for scan and get", "", "stats", "-o", "csv")
	// CSV output reads back.
	ok(t, "", "upsert", "--file", writeFile(t, dir, "back.csv", csvOut))

	fails(t, 2, `--prefix "" matches every row: pass --all`, "", "delete", "--prefix", "")
	if out := ok(t, "", "delete", "--all"); out != "deleted 3 rows: version 4\n" {
		t.Fatalf("delete --all: %q", out)
	}
}
