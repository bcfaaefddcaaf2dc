package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tablekeep/tablekeep/shared/lance/lancetest"
)

// TestRegisterLanceDefaultGrace: `register --table-format lance` without --grace
// stores LanceDB's own 7 days (168h: cleanup_old_versions' older_than
// default) and says so; the versions a newer one superseded are then kept
// at 167h past their manifests' time and prunable at 169h. --grace 1h
// stores 1h and prints no such line; a tablekeep table still defaults to
// the writers' 1h.
func TestRegisterLanceDefaultGrace(t *testing.T) {
	t.Setenv(EnvAllowClockAhead, "test")
	dir := t.TempDir()
	lancetest.Node(t, nil, nil, "mixed", filepath.Join(dir, "lancedb"), "items", "8") // 12 versions
	w := "--warehouse=" + dir
	out := ok(t, "", "register", "items", "lancedb/items.lance", w, "--table-format", "lance")
	if !strings.Contains(out, "; keep-last 10, grace 168h, ") || !strings.Contains(out, "\ngrace 168h: LanceDB's own cleanup default (older_than 7 days)") {
		t.Fatalf("register without --grace:\n%s", out)
	}
	var pj policyJSON
	found := false
	for _, line := range strings.Split(strings.TrimSpace(ok(t, "", "tables", w, "-o", "json")), "\n") {
		if err := json.Unmarshal([]byte(line), &pj); err != nil {
			t.Fatal(err)
		}
		if pj.Table == "items" {
			if found = true; pj.Grace != "168h" {
				t.Fatalf("tables: %s", line)
			}
		}
	}
	if !found {
		t.Fatal("tables does not list items")
	}
	floor := func(ahead string) uint64 {
		var dry struct {
			Tables []struct {
				Floor uint64 `json:"floor"`
			} `json:"tables"`
		}
		js := ok(t, "", "maintain", w, "--table", "items", "--dry-run", "--clock-ahead", ahead, "-o", "json")
		if err := json.Unmarshal([]byte(js), &dry); err != nil || len(dry.Tables) != 1 {
			t.Fatalf("dry run: %v %s", err, js)
		}
		return dry.Tables[0].Floor
	}
	if f := floor("167h"); f != 1 {
		t.Fatalf("at 167h the floor is %d: versions younger than the 7 days would be pruned", f)
	}
	if f := floor("169h"); f != 3 { // keep-last 10 of 12
		t.Fatalf("at 169h the floor is %d, want 3", f)
	}

	out = ok(t, "", "register", "items", "lancedb/items.lance", w, "--table-format", "lance", "--grace", "1h")
	if !strings.Contains(out, "; keep-last 10, grace 1h, ") || strings.Contains(out, "LanceDB's own cleanup default") {
		t.Fatalf("register --grace 1h:\n%s", out)
	}
	if f := floor("2h"); f != 3 {
		t.Fatalf("with --grace 1h, at 2h the floor is %d, want 3", f)
	}
	ok(t, "", "create", "--table", filepath.Join(dir, "tk"), "--schema", "name:utf8", "--key", "name")
	if out := ok(t, "", "register", "tk", "tk", w); !strings.Contains(out, "grace 1h,") || strings.Contains(out, "168h") {
		t.Fatalf("a tablekeep table:\n%s", out)
	}
}
