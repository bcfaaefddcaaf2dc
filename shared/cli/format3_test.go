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
// (rows 0 for a table of inline rows). describe, stats and files name the
// format version and the inline rows (files: "N rows are inline in the
// manifest and not in these files", "inline_rows" in JSON).
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
	if d.Fragments != 1 || d.Rows != 120 || d.FormatVer != 3 || d.InlineRows != 2 {
		t.Fatalf("describe: %d fragments, %d rows (%d inline), format %d; want 1 and 120 (118 live in the file, k003 and new inline), format 3", d.Fragments, d.Rows, d.InlineRows, d.FormatVer)
	}
	if out := ok(t, "", "describe", tbl); !strings.Contains(out, "format:        tablekeep 3\n") || !strings.Contains(out, "rows:          120 (2 inline in the manifest)\n") {
		t.Fatalf("describe does not show the format version and inline rows:\n%s", out)
	}
	var st struct {
		FormatVersion uint64 `json:"format_version"`
		Rows          uint64 `json:"rows"`
		InlineRows    uint64 `json:"inline_rows"`
	}
	if err := json.Unmarshal([]byte(ok(t, "", "stats", tbl, "-o", "json")), &st); err != nil || st.FormatVersion != 3 || st.Rows != 120 || st.InlineRows != 2 {
		t.Fatalf("stats -o json: %+v (%v), want format 3, 120 rows, 2 inline", st, err)
	}
	if out := ok(t, "", "stats", tbl); !strings.Contains(out, "format version:   3\n") || !strings.Contains(out, "rows:             120 (2 inline in the manifest)\n") {
		t.Fatalf("stats does not show the format version and inline rows:\n%s", out)
	}
	// files says that the inline rows are in none of its files: after the
	// table, and with -o json on stderr and in every line.
	note := "2 rows are inline in the manifest and not in these files: use `export`"
	if out := ok(t, "", "files", tbl); !strings.Contains(out, "\n"+note) {
		t.Fatalf("files does not name the inline rows:\n%s", out)
	}
	for _, version := range []string{"7", "4", "3"} {
		want := map[string]int64{}
		for _, r := range jsonLines(t, ok(t, "", "scan", tbl, "--version", version, "-o", "json")) {
			want[r["name"].(string)] = int64(r["v"].(float64))
		}
		// files: the data file minus its deleted positions (k003's old row
		// and, from v5, k007), then the inline rows (scan's others).
		got := map[string]int64{}
		r := run(t, "", "files", tbl, "--version", version, "-o", "json")
		inline := map[string]uint64{"7": 2, "4": 2, "3": 1}[version]
		if wantNote := fmt.Sprintf("tablekeep: note: %s inline", areRows(inline)); r.code != 0 || !strings.HasPrefix(r.err, wantNote) {
			t.Fatalf("files --version %s -o json: exit %d, stderr %q, want %q", version, r.code, r.err, wantNote)
		}
		for _, l := range strings.Split(strings.TrimSpace(r.out), "\n") {
			var f fileJSON
			if err := json.Unmarshal([]byte(l), &f); err != nil {
				t.Fatal(err)
			}
			if f.InlineRows != inline {
				t.Fatalf("version %s: inline_rows %d, want %d", version, f.InlineRows, inline)
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
