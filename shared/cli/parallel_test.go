package cli

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
)

// TestVersionsLongOrderedWhenParallel: versions --long reads the manifests
// at once, and still prints them in version order with each one's own op
// and counts.
func TestVersionsLongOrderedWhenParallel(t *testing.T) {
	tbl, _ := newRegistry(t)
	const n = 40
	for i := range n {
		row := fmt.Sprintf(`{"name":"n%02d","uri":"u","created_at":"2026-01-01T00:00:00Z"}`, i)
		ok(t, row, "upsert", tbl) // version i+2 holds i+1 rows
	}
	vs := jsonLines(t, ok(t, "", "versions", tbl, "-o", "json", "--long"))
	if len(vs) != n+1 {
		t.Fatalf("versions: %d", len(vs))
	}
	for i, v := range vs {
		wantOp, wantRows := "upsert", float64(i)
		if i == 0 {
			wantOp = "create"
		}
		if v["version"] != float64(i+1) || v["op"] != wantOp || v["rows"] != wantRows {
			t.Fatalf("row %d: %v (want version %d, op %s, rows %v)", i, v, i+1, wantOp, wantRows)
		}
	}
}

// TestStatusTablesInRegistryOrder: status reads tables at once and prints
// them in the registry's order, each with its own figures: the output is
// the same with any --parallel.
func TestStatusTablesInRegistryOrder(t *testing.T) {
	dir := t.TempDir()
	const tables = 7
	var names []string
	for i := range tables {
		name := fmt.Sprintf("t%d", i)
		tbl := filepath.Join(dir, name)
		ok(t, "", "create", "--table", tbl, "--schema", "name:utf8,uri:utf8", "--key", "name")
		for j := range i {
			ok(t, fmt.Sprintf("{\"name\":\"k%d\",\"uri\":\"u\"}\n", j), "upsert", "--table", tbl, "--format", "jsonl")
		}
		ok(t, "", "register", name, name, "--warehouse", dir)
		names = append(names, name)
	}
	var want string
	for _, parallel := range []string{"1", "3", "16"} {
		out := ok(t, "", "status", "--warehouse", dir, "-o", "json", "--parallel", parallel)
		var doc statusDoc
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		byName := map[string]tableStatus{}
		for _, r := range doc.Tables {
			byName[r.Table] = r
		}
		for i, name := range names {
			if r, found := byName[name]; !found || r.Error != "" || r.Versions != i+1 || r.Rows != uint64(i) {
				t.Fatalf("--parallel %s: %s: %+v", parallel, name, r)
			}
		}
		if want == "" {
			want = out
		} else if out != want {
			t.Fatalf("--parallel %s output differs:\n%s\nwant\n%s", parallel, out, want)
		}
	}
}
