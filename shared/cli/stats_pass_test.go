package cli

import (
	"fmt"
	"path/filepath"
	"testing"
)

// TestStatsWrittenOncePerPass: a CLI pass over 5 tables writes their
// _stats rows in one commit, as the fleet pass does (it wrote one version
// per table, so every dry run then planned a compaction of _stats).
func TestStatsWrittenOncePerPass(t *testing.T) {
	t.Setenv("TABLEKEEP_WAREHOUSE", "")
	dir := t.TempDir()
	for i := range 5 {
		name := fmt.Sprintf("t%d", i)
		ok(t, "", "create", "--table", filepath.Join(dir, name), "--schema", "name:utf8", "--key", "name")
		ok(t, "{\"name\":\"a\"}\n", "upsert", "--table", filepath.Join(dir, name))
		ok(t, "", "register", name, name, "--warehouse", dir)
	}
	versions := func() float64 { return tableStats(t, filepath.Join(dir, "_stats"))["versions"].(float64) }
	ok(t, "", "maintain", "--warehouse", dir) // the first pass may compact _stats too
	for _, name := range []string{"t2", "t3", "t4"} {
		ok(t, "{\"name\":\"b\"}\n", "upsert", "--table", filepath.Join(dir, name))
	}
	before := versions()
	ok(t, "", "maintain", "--warehouse", dir)
	if got := versions() - before; got != 1 {
		t.Fatalf("a pass added %v versions to _stats, want 1 (one commit for every changed row)", got)
	}
}
