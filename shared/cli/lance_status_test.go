package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tablekeep/tablekeep/shared/lance/lancetest"
)

// TestStatusLanceBacklogCLI: a LanceDB dataset of many one-row fragments
// (the mixed churn, no optimize): status shows its compactable fragments
// ("44 of 45", not "-") and the fragments kept and why, -o json a non-zero
// compactable_fragments, and health "behind" once the latest version is
// older than --max-lag with at least the policy's CompactMinFragments
// (36) compactable; after maintain it is "ok" with none.
func TestStatusLanceBacklogCLI(t *testing.T) {
	dir := t.TempDir()
	dbdir := filepath.Join(dir, "lance")
	lancetest.Node(t, nil, nil, "mixed", dbdir, "ds", "96")
	ok(t, "", "register", "ds", "lance/ds.lance", "--warehouse", dir, "--table-format", "lance", "--grace", "1h")
	t.Setenv(EnvAllowClockAhead, "test")
	type js struct {
		Tables []struct {
			Health      string         `json:"health"`
			Reason      string         `json:"reason"`
			Compactable int            `json:"compactable_fragments"`
			Fragments   int            `json:"fragments"`
			Kept        map[string]int `json:"kept_fragments"`
			Share       float64        `json:"deleted_row_share"`
			Bound       int            `json:"compactable_bound"`
		} `json:"tables"`
	}
	status := func(args ...string) (js, string) {
		r := run(t, "", append([]string{"status", "--warehouse", dir, "--table", "ds", "-o", "json"}, args...)...)
		var s js
		if err := json.Unmarshal([]byte(r.out), &s); err != nil || len(s.Tables) != 1 {
			t.Fatalf("status -o json: %v %s %s", err, r.out, r.err)
		}
		return s, run(t, "", append([]string{"status", "--warehouse", dir, "--table", "ds"}, args...)...).out
	}
	// Just written: the backlog is not older than the lag.
	s, text := status()
	got := s.Tables[0]
	if got.Health != "ok" || got.Compactable < 36 || got.Bound != 36 || got.Kept["covered by an index"] < 1 || got.Share <= 0 {
		t.Fatalf("status now: %+v", got)
	}
	if !strings.Contains(text, " of ") || !strings.Contains(text, "ds: fragments kept: ") || !strings.Contains(text, "covered by an index") {
		t.Fatalf("status text:\n%s", text)
	}
	// The status page shows the same figure (its row is status's).
	page := filepath.Join(dir, "status.html")
	ok(t, "", "status", "--warehouse", dir, "--table", "ds", "--html", page)
	if b, err := os.ReadFile(page); err != nil || !strings.Contains(string(b), strconv.Itoa(got.Compactable)+" compactable") {
		t.Fatalf("status --html: %v, no %d compactable", err, got.Compactable)
	}
	// 2 h later, --max-lag 1h: behind.
	s, text = status("--clock-ahead", "2h", "--max-lag", "1h")
	if got := s.Tables[0]; got.Health != "behind" || !strings.Contains(got.Reason, "fragments compactable since") {
		t.Fatalf("status 2 h later: %+v", got)
	}
	if !strings.Contains(text, "behind") {
		t.Fatalf("status text 2 h later:\n%s", text)
	}
	ok(t, "", "maintain", "--warehouse", dir, "--table", "ds", "--clock-ahead", "2h")
	s, _ = status("--clock-ahead", "2h", "--max-lag", "1h")
	if got := s.Tables[0]; got.Health != "ok" || got.Compactable != 0 {
		t.Fatalf("status after maintain: %+v", got)
	}
}
