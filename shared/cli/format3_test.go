package cli

import (
	"encoding/json"
	"fmt"
	"maps"
	"os/exec"
	"strings"
	"testing"
)

// TestFormat3Readers: on a table created without --format (format 3), rows
// written since the last flush live in the manifest, and every reader sees
// them: scan, get, time travel, describe's row count, export (the Parquet
// file DuckDB reads on format 3, docs/cli.md), and files, whose data files
// minus their deleted positions (inline deletions included) plus the
// inline rows are scan's rows. describe counted fragment rows only before
// (rows 0 for a table of inline rows).
func TestFormat3Readers(t *testing.T) {
	t.Chdir(t.TempDir())
	tbl := "--table=reg"
	ok(t, "", "create", tbl, "--schema", "name:utf8,v:int64", "--key", "name")
	var bulk strings.Builder
	for i := range 120 { // beyond the inline bound (2 KiB): one data file
		fmt.Fprintf(&bulk, "{\"name\":\"k%03d\",\"v\":%d}\n", i, i)
	}
	ok(t, bulk.String(), "upsert", tbl)                     // v2: data file
	ok(t, "{\"name\":\"k003\",\"v\":300}\n", "upsert", tbl) // v3: inline row, inline deletion
	ok(t, "{\"name\":\"new\",\"v\":-1}\n", "upsert", tbl)   // v4: inline row
	ok(t, "", "delete", tbl, "--key", "k007")               // v5: inline deletion
	ok(t, "{\"name\":\"gone\",\"v\":9}\n", "upsert", tbl)   // v6
	ok(t, "", "delete", tbl, "--key", "gone")               // v7: an inline row deleted
	var d describeJSON
	if err := json.Unmarshal([]byte(ok(t, "", "describe", tbl, "-o", "json")), &d); err != nil {
		t.Fatal(err)
	}
	if d.Fragments != 1 || d.Rows != 120 {
		t.Fatalf("describe: %d fragments, %d rows; want 1 and 120 (118 live in the file, k003 and new inline)", d.Fragments, d.Rows)
	}
	for _, version := range []string{"7", "4", "3"} {
		want := map[string]int64{}
		for _, r := range jsonLines(t, ok(t, "", "scan", tbl, "--version", version, "-o", "json")) {
			want[r["name"].(string)] = int64(r["v"].(float64))
		}
		// files: the data file minus its deleted positions (k003's old row
		// and, from v5, k007), then the inline rows (scan's others).
		got := map[string]int64{}
		for _, l := range strings.Split(strings.TrimSpace(ok(t, "", "files", tbl, "--version", version, "-o", "json")), "\n") {
			var f fileJSON
			if err := json.Unmarshal([]byte(l), &f); err != nil {
				t.Fatal(err)
			}
			if len(f.Deleted) == 0 {
				t.Fatalf("version %s: no deleted positions listed for %s", version, f.Path)
			}
			readParquetRows(t, f.Path, f.Deleted, got)
		}
		for k, v := range got {
			if want[k] != v {
				t.Fatalf("version %s: file row %s=%d, scan has %d", version, k, v, want[k])
			}
		}
		if _, hasNew := want["new"]; want["k003"] != 300 || hasNew != (version != "3") {
			t.Fatalf("version %s: scan misses inline rows: %v", version, want)
		}
		out := ok(t, "", "export", tbl, "--format", "parquet", "--version", version, "--out", "v"+version+".parquet")
		if w := fmt.Sprintf("exported %d rows of version %s to v%s.parquet\n", len(want), version, version); out != w {
			t.Fatalf("export: %q, want %q", out, w)
		}
		exported := map[string]int64{}
		readParquetRows(t, "v"+version+".parquet", nil, exported)
		if !maps.Equal(exported, want) {
			t.Fatalf("version %s: exported %v, scan %v", version, exported, want)
		}
		if duckdb, err := exec.LookPath("duckdb"); err == nil {
			q := fmt.Sprintf("SELECT count(*) FROM 'v%s.parquet';", version)
			if out, err := exec.Command(duckdb, "-csv", "-noheader", "-c", q).CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != fmt.Sprint(len(want)) {
				t.Fatalf("duckdb: %v: %s (want %d rows)", err, out, len(want))
			}
		}
	}
	if out := ok(t, "", "get", tbl, "new", "-o", "json"); !strings.Contains(out, `"v":-1`) {
		t.Fatalf("get of an inline row: %q", out)
	}
	if out := ok(t, "", "get", tbl, "k003", "--version", "2", "-o", "json"); !strings.Contains(out, `"v":3`) {
		t.Fatalf("time travel to version 2: %q", out)
	}
}
