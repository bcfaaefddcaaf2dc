package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func tableStats(t *testing.T, tbl string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(ok(t, "", "stats", "--table", tbl, "-o", "json")), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestStepsOneTable: maintain --table NAME and the separate steps
// (compact, prune, sweep), each with --dry-run, touch only the table named
// and only do their step.
func TestStepsOneTable(t *testing.T) {
	t.Setenv(EnvAllowClockAhead, "test")
	dir := t.TempDir()
	for _, name := range []string{"a", "b"} {
		tbl := filepath.Join(dir, name)
		ok(t, "", "create", "--table", tbl, "--schema", "name:utf8,uri:utf8", "--key", "name", "--table-format", "2")
		for i := range 20 {
			ok(t, fmt.Sprintf("{\"name\":\"k%d\",\"uri\":\"u%d\"}\n", i%4, i), "upsert", "--table", tbl)
		}
		ok(t, "", "register", name, name, "--warehouse", dir)
	}
	orphan := filepath.Join(dir, "a", "data", "00000000deadbeef.parquet")
	if err := os.WriteFile(orphan, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	w := []string{"--warehouse", dir, "--clock-ahead", "2h", "--table", "a"}
	args := func(cmd string, more ...string) []string { return append(append([]string{cmd}, w...), more...) }
	unchanged := func(name string, versions, fragments float64) {
		t.Helper()
		if s := tableStats(t, filepath.Join(dir, name)); s["versions"] != versions || s["fragments"] != fragments {
			t.Fatalf("%s: %v versions, %v fragments; want %v, %v", name, s["versions"], s["fragments"], versions, fragments)
		}
	}

	// compact: groups planned, then folded; no version pruned.
	out := ok(t, "", args("compact", "--dry-run")...)
	if !strings.Contains(out, "a:\n  compact group 1: 4 fragments") || strings.Contains(out, "\nb:") || strings.Contains(out, "cleanup ") {
		t.Fatalf("compact --dry-run:\n%s", out)
	}
	unchanged("a", 21, 4)
	ok(t, "", args("compact")...)
	unchanged("a", 22, 1)
	unchanged("b", 21, 4)

	// prune: ranges planned, then versions cleaned up to keep-last; no
	// compaction (b stays as it is).
	out = ok(t, "", args("prune", "--dry-run")...)
	if !strings.Contains(out, "a:\n  cleanup 1-12: 12 versions") || strings.Contains(out, "compact group") {
		t.Fatalf("prune --dry-run:\n%s", out)
	}
	out = ok(t, "", args("prune", "-o", "json")...)
	var rep maintainOut
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Tables) != 1 || rep.Tables[0].Table != "a" || rep.Tables[0].VersionsPruned != 12 || rep.Tables[0].Groups != 0 {
		t.Fatalf("prune: %s", out)
	}
	unchanged("a", 10, 1)
	unchanged("b", 21, 4)

	// sweep: the orphan listed, then deleted.
	out = ok(t, "", args("sweep", "--dry-run", "--keys")...)
	if !strings.Contains(out, "  sweep: 1 unreferenced file (1 B)\n    a/data/00000000deadbeef.parquet\n") {
		t.Fatalf("sweep --dry-run:\n%s", out)
	}
	ok(t, "", args("sweep")...)
	if _, err := os.Stat(orphan); !os.IsNotExist(err) {
		t.Fatalf("orphan not swept: %v", err)
	}

	// maintain --table b: b alone, all steps.
	ok(t, "", "maintain", "--warehouse", dir, "--clock-ahead", "2h", "--table", "b")
	unchanged("b", 10, 1)
}
