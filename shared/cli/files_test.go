package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// readParquetRows reads a Parquet file's rows as name -> v, skipping the
// positions in deleted: what the documented DuckDB query does.
func readParquetRows(t *testing.T, path string, deleted []uint32, into map[string]int64) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tb, err := pqarrow.ReadTable(context.Background(), bytes.NewReader(data), parquet.NewReaderProperties(nil), pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	defer tb.Release()
	names, vs := tb.Column(0).Data().Chunks(), tb.Column(1).Data().Chunks()
	pos := uint32(0)
	for c := range names {
		n, v := names[c].(*array.String), vs[c].(*array.Int64)
		for i := range n.Len() {
			if !slices.Contains(deleted, pos) {
				into[n.Value(i)] = v.Value(i)
			}
			pos++
		}
	}
}

// TestFilesExportDescribe: `files -o json` lists a version's live files
// with their deleted positions, and reading those files minus those
// positions (the documented DuckDB query; DuckDB itself where installed,
// and always an equivalent Parquet reader) gives exactly the version's
// rows; `export --format parquet` writes them; describe prints the schema,
// key and registered policy.
func TestFilesExportDescribe(t *testing.T) {
	t.Chdir(t.TempDir())
	tbl := "--table=reg"
	ok(t, "", "create", tbl, "--schema", "name:utf8,v:int64", "--key", "name", "--table-format", "2")
	for i := range 12 {
		var rows strings.Builder
		for j := range 4 {
			fmt.Fprintf(&rows, "{\"name\":\"k%d\",\"v\":%d}\n", (i*3+j)%9, i*10+j)
		}
		ok(t, rows.String(), "upsert", tbl)
	}
	ok(t, "", "delete", tbl, "--key", "k4")
	for _, version := range []string{"14", "7"} {
		want := map[string]int64{}
		for _, r := range jsonLines(t, ok(t, "", "scan", tbl, "--version", version, "-o", "json")) {
			want[r["name"].(string)] = int64(r["v"].(float64))
		}
		filesOut := ok(t, "", "files", tbl, "--version", version, "-o", "json")
		got := map[string]int64{}
		deletions := 0
		for _, l := range strings.Split(strings.TrimSpace(filesOut), "\n") {
			var f fileJSON
			if err := json.Unmarshal([]byte(l), &f); err != nil {
				t.Fatal(err)
			}
			deletions += len(f.Deleted)
			readParquetRows(t, f.Path, f.Deleted, got)
		}
		if deletions == 0 || !maps.Equal(got, want) {
			t.Fatalf("version %s: files minus deleted positions give %v, scan %v (%d deletions)", version, got, want, deletions)
		}
		if duckdb, err := exec.LookPath("duckdb"); err == nil {
			if err := os.WriteFile("files.json", []byte(filesOut), 0o644); err != nil {
				t.Fatal(err)
			}
			// docs/cli.md's recipe: the listed paths themselves, so the
			// join cannot miss whatever --table's spelling.
			q := `SET VARIABLE files = (SELECT list(path) FROM read_json('files.json'));
SELECT count(*) FROM read_parquet(getvariable('files'), filename = true, file_row_number = true) t
JOIN read_json('files.json') f ON t.filename = f.path WHERE NOT list_contains(f.deleted_positions, t.file_row_number);`
			out, err := exec.Command(duckdb, "-csv", "-noheader", "-c", q).CombinedOutput()
			if err != nil || strings.TrimSpace(string(out)) != fmt.Sprint(len(want)) {
				t.Fatalf("duckdb: %v: %s (want %d rows)", err, out, len(want))
			}
			t.Logf("version %s: DuckDB's query returned the %d rows", version, len(want))
		} else {
			t.Logf("version %s: duckdb not installed; checked with the equivalent Parquet reader", version)
		}
		if version == "7" { // v.parquet exists: refused, then --force
			fails(t, 1, "export: v.parquet exists: choose another --out, or --force to overwrite it", "", "export", tbl, "--format", "parquet", "--version", version, "--out", "v.parquet")
		}
		out := ok(t, "", "export", tbl, "--format", "parquet", "--version", version, "--out", "v.parquet", "--force")
		if want := fmt.Sprintf("exported %d rows of version %s to v.parquet\n", len(want), version); out != want {
			t.Fatalf("export: %q", out)
		}
		exported := map[string]int64{}
		readParquetRows(t, "v.parquet", nil, exported)
		if !maps.Equal(exported, want) {
			t.Fatalf("exported %v, want %v", exported, want)
		}
	}
	fails(t, 2, "--format must be parquet", "", "export", tbl, "--format", "csv", "--out", "x")

	ok(t, "", "register", "reg", "reg", "--warehouse", ".", "--keep-last", "4")
	out := ok(t, "", "describe", tbl, "--warehouse", ".")
	for _, want := range []string{"schema:         name:utf8,v:int64\n", "key column:     name\n", "registered as:  reg\n",
		"policy:         keep-last 4, grace 1h, target 1048576 rows, deleted-threshold 0.1\n"} {
		if !strings.Contains(out, want) {
			t.Fatalf("describe lacks %q:\n%s", want, out)
		}
	}
	if _, err := os.Stat(filepath.Join("reg", "_versions")); err != nil {
		t.Fatal(err)
	}
}
