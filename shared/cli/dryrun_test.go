package cli

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// bookkeeping: maintenance's own objects that a run replaces (the prune
// state, the floor marker), not what the plan deletes.
func bookkeeping(key string) bool {
	// The fleet index (older objects replaced by each write) is the
	// warehouse's bookkeeping too.
	return strings.Contains(key, "_maintenance/prune-state") || strings.Contains(key, "_refs/floor/") || strings.HasPrefix(key, "_fleet/")
}

func dirKeys(t *testing.T, dir string) map[string]bool {
	t.Helper()
	keys := map[string]bool{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		keys[filepath.ToSlash(rel)] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// TestDryRunPlanIsWhatRunDeletes (local warehouse): a dry run followed by a
// real run on the unchanged warehouse deletes exactly the planned keys,
// although a compaction commits a version in between (the dry run models
// it); the report counts them; the dry run says why versions are kept.
func TestDryRunPlanIsWhatRunDeletes(t *testing.T) {
	t.Setenv(EnvAllowClockAhead, "test")
	dir := t.TempDir()
	tbl := filepath.Join(dir, "reg")
	ok(t, "", "create", "--table", tbl, "--schema", "name:utf8,uri:utf8", "--key", "name", "--table-format", "2")
	for i := range 25 {
		ok(t, fmt.Sprintf("{\"name\":\"k%d\",\"uri\":\"u%d\"}\n", i%6, i), "upsert", "--table", tbl)
	}
	ok(t, "", "tag", "--table", tbl, "keep-me", "--version", "5")
	ok(t, "", "register", "reg", "reg", "--warehouse", dir)

	// Now, without the clock offset: nothing is prunable yet, and the
	// dry run says until when the grace window keeps what.
	human := ok(t, "", "maintain", "--warehouse", dir, "--dry-run")
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^reg:\n  compact group 1: 6 fragments, .*\n  nothing to prune:\n  keep versions 1-17: grace until 20\d\d-\d\d-\d\dT\d\d:\d\d:\d\dZ\n  keep versions 18-26: keep-last 10\n`),
	} {
		if !want.MatchString(human) {
			t.Fatalf("dry run lacks %s:\n%s", want, human)
		}
	}

	out := ok(t, "", "maintain", "--warehouse", dir, "--dry-run", "--keys", "--clock-ahead", "2h", "-o", "json")
	var dry maintainOut
	if err := json.Unmarshal([]byte(out), &dry); err != nil {
		t.Fatal(err)
	}
	planned := map[string]bool{}
	for _, tj := range dry.Tables {
		for _, r := range tj.Cleanup {
			for _, k := range r.Keys {
				planned[k] = true
			}
		}
		if tj.Table == "reg" {
			kept := fmt.Sprint(tj.Kept)
			if kept != "[{5 5 tag keep-me } {18 26 keep-last 10 }]" || tj.Floor != 18 || tj.Prunable != 16 {
				t.Fatalf("dry run: kept %s, floor %d, prunable %d", kept, tj.Floor, tj.Prunable)
			}
		}
	}
	before := dirKeys(t, dir)
	out = ok(t, "", "maintain", "--warehouse", dir, "--clock-ahead", "2h", "-o", "json")
	var real maintainOut
	if err := json.Unmarshal([]byte(out), &real); err != nil {
		t.Fatal(err)
	}
	after := dirKeys(t, dir)
	deleted := map[string]bool{}
	for k := range before {
		if !after[k] && !bookkeeping(k) {
			deleted[k] = true
		}
	}
	if !maps.Equal(deleted, planned) || len(deleted) == 0 {
		t.Fatalf("planned %d keys, deleted %d:\nplanned %v\ndeleted %v", len(planned), len(deleted), planned, deleted)
	}
	if real.DeleteKeys != len(deleted) || real.VersionsPruned != 16 || real.DeleteBytes == 0 {
		t.Fatalf("report: %+v", real)
	}
	human = ok(t, "", "maintain", "--warehouse", dir, "--clock-ahead", "2h")
	if !regexp.MustCompile(`(?m)^TABLE +GROUPS +LATEST +FLOOR +PRUNED +DELETED KEYS +DELETED BYTES +NOTE\n`).MatchString(human) ||
		!strings.Contains(human, "\ndeleted 0 keys (0 B), 0 versions pruned; cleanup: 0 messages handled, 0 failed; took ") {
		t.Fatalf("second run:\n%s", human)
	}
}

// TestDryRunPlanIsWhatRunDeletesEveryPass: pass after pass on a warehouse
// with two churned tables, the real run deletes exactly the keys its dry
// run listed, the catalog's own _stats included (maintained first, so no
// stats row written during the pass precedes its plan).
func TestDryRunPlanIsWhatRunDeletesEveryPass(t *testing.T) {
	t.Setenv(EnvAllowClockAhead, "test")
	dir := t.TempDir()
	for _, name := range []string{"a", "b"} {
		ok(t, "", "create", "--table", filepath.Join(dir, name), "--schema", "name:utf8,v:utf8", "--key", "name", "--table-format", "2")
		ok(t, "", "register", name, name, "--warehouse", dir, "--keep-last", "3")
	}
	statsDeleted := 0
	for pass := range 12 { // _stats gets one version a pass (and its compactions): enough to prune it
		for _, name := range []string{"a", "b"} {
			for i := range 4 {
				ok(t, fmt.Sprintf("{\"name\":\"k%d\",\"v\":\"p%d\"}\n", i%3, pass), "upsert", "--table", filepath.Join(dir, name))
			}
		}
		var dry maintainOut
		if err := json.Unmarshal([]byte(ok(t, "", "maintain", "--warehouse", dir, "--dry-run", "--keys", "--clock-ahead", "2h", "-o", "json")), &dry); err != nil {
			t.Fatal(err)
		}
		planned := map[string]bool{}
		for _, tj := range dry.Tables {
			for _, r := range tj.Cleanup {
				for _, k := range r.Keys {
					planned[k] = true
				}
			}
			if tj.Sweep != nil {
				for _, k := range tj.Sweep.List {
					planned[k] = true
				}
			}
		}
		before := dirKeys(t, dir)
		ok(t, "", "maintain", "--warehouse", dir, "--clock-ahead", "2h")
		after := dirKeys(t, dir)
		deleted := map[string]bool{}
		for k := range before {
			if !after[k] && !bookkeeping(k) {
				deleted[k] = true
				if strings.HasPrefix(k, "_stats/") {
					statsDeleted++
				}
			}
		}
		if !maps.Equal(deleted, planned) {
			t.Fatalf("pass %d: planned %d keys, deleted %d:\nplanned %v\ndeleted %v", pass, len(planned), len(deleted), planned, deleted)
		}
	}
	if statsDeleted == 0 {
		t.Fatalf("_stats was never pruned: the test does not cover it")
	}
}
