package cli

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tablekeep/tablekeep/shared/lance/lancetest"
)

// TestLeaseCLI: lease create / renew / list / release on a tablekeep table
// (text and -o json), and the bad input each refuses with a clear error.
func TestLeaseCLI(t *testing.T) {
	tbl, _ := newRegistry(t)
	ok(t, threeRows, "upsert", tbl) // v2
	out := ok(t, "", "lease", "create", tbl, "--ttl", "2h")
	m := regexp.MustCompile(`^lease ([0-9a-f]{16}) on version 2 of .*registry, expires \S+Z\n$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("create: %q", out)
	}
	id := m[1]
	var got struct {
		ID      string `json:"id"`
		Version uint64 `json:"version"`
	}
	if err := json.Unmarshal([]byte(ok(t, "", "lease", "renew", id, tbl, "--ttl", "3h", "-o", "json")), &got); err != nil || got.ID != id || got.Version != 2 {
		t.Fatalf("renew -o json: %+v %v", got, err)
	}
	if out := ok(t, "", "lease", "list", tbl); !strings.Contains(out, id+"  version 2") || !strings.Contains(out, "live, pins the floor at or below 2") {
		t.Fatalf("list: %q", out)
	}
	var list struct {
		Leases []struct {
			ID   string `json:"id"`
			Live bool   `json:"live"`
			Pins bool   `json:"pins_floor"`
		} `json:"leases"`
	}
	if err := json.Unmarshal([]byte(ok(t, "", "lease", "list", tbl, "-o", "json")), &list); err != nil || len(list.Leases) != 1 || !list.Leases[0].Pins {
		t.Fatalf("list -o json: %+v %v", list, err)
	}
	fails(t, 2, "ttl 192h0m0s not in (0, 168h0m0s]", "", "lease", "create", tbl, "--ttl", "192h")
	fails(t, 2, "--ttl is required", "", "lease", "create", tbl)
	fails(t, 2, "version 9 is in the future (latest 2)", "", "lease", "create", tbl, "--ttl", "1h", "--version", "9")
	fails(t, 2, "is not 16 lowercase hex digits", "", "lease", "release", "XYZ", tbl)
	fails(t, 1, "lease not found", "", "lease", "release", "0000000000000001", tbl)
	if out := ok(t, "", "lease", "release", id, tbl); out != "released lease "+id+" on version 2\n" {
		t.Fatalf("release: %q", out)
	}
	if out := ok(t, "", "lease", "list", tbl); !strings.HasPrefix(out, "no leases on ") {
		t.Fatalf("list after release: %q", out)
	}
}

// TestLeaseCLILance: the same commands on a Lance dataset, by location and
// by its registered name.
func TestLeaseCLILance(t *testing.T) {
	dir := t.TempDir()
	dbdir := filepath.Join(dir, "lance")
	c := lancetest.Create(t, dbdir, "ds", 3, "")
	ds := "--table=" + filepath.Join(dbdir, "ds.lance")
	out := ok(t, "", "lease", "create", ds, "--ttl", "1h")
	m := regexp.MustCompile(`^lease ([0-9a-f]{16}) on version (\d+) of `).FindStringSubmatch(out)
	if m == nil || m[2] != strings.TrimSpace(jsonNum(c.Latest)) {
		t.Fatalf("create on a Lance dataset (latest %d): %q", c.Latest, out)
	}
	ok(t, "", "register", "ds", "lance/ds.lance", "--warehouse", dir, "--table-format", "lance", "--grace", "1h")
	if out := ok(t, "", "lease", "list", "--warehouse", dir, "--table", "ds"); !strings.Contains(out, m[1]) {
		t.Fatalf("list by registered name: %q", out)
	}
	ok(t, "", "lease", "release", m[1], "--warehouse", dir, "--table", "ds")
	if out := ok(t, "", "lease", "list", ds); !strings.HasPrefix(out, "no leases") {
		t.Fatalf("after release: %q", out)
	}
}

func jsonNum(v uint64) string { b, _ := json.Marshal(v); return string(b) }

// TestLeaseStatusAndDryRun: a lease on an old version shows in status
// (with what it pins), makes HEALTH "behind" once it has held pruning back
// past --max-lag, and maintain --dry-run names it as the reason versions
// are kept; the real run keeps them.
func TestLeaseStatusAndDryRun(t *testing.T) {
	t.Setenv(EnvAllowClockAhead, "test")
	dir := t.TempDir()
	tbl := filepath.Join(dir, "reg")
	ok(t, "", "create", "--table", tbl, "--schema", "name:utf8,uri:utf8", "--key", "name")
	for i := range 4 {
		ok(t, fmt.Sprintf("{\"name\":\"k%d\",\"uri\":\"u%d\"}\n", i, i), "upsert", "--table", tbl)
	}
	out := ok(t, "", "lease", "create", "--table", tbl, "--ttl", "6h") // on v5
	id := regexp.MustCompile(`^lease ([0-9a-f]{16}) on version 5 `).FindStringSubmatch(out)
	if id == nil {
		t.Fatalf("create: %q", out)
	}
	for i := range 20 {
		ok(t, fmt.Sprintf("{\"name\":\"k%d\",\"uri\":\"v%d\"}\n", i%6, i), "upsert", "--table", tbl)
	}
	ok(t, "", "register", "reg", "reg", "--warehouse", dir)
	r := run(t, "", "status", "--warehouse", dir, "--clock-ahead", "3h", "--max-lag", "30m")
	if r.code != 1 || !strings.Contains(r.out, "lease "+id[1]+" on version 5 holds back pruning of") ||
		!strings.Contains(r.out, "reg: 1 leases (1 live); lease "+id[1]+" pins the floor at 5 (would be 16)") {
		t.Fatalf("status: exit %d\n%s%s", r.code, r.out, r.err)
	}
	if r := run(t, "", "status", "--warehouse", dir, "--clock-ahead", "3h", "--max-lag", "5h"); strings.Contains(r.out, "holds back") {
		t.Fatalf("status within --max-lag:\n%s", r.out)
	}
	human := ok(t, "", "maintain", "--warehouse", dir, "--dry-run", "--clock-ahead", "3h")
	if !regexp.MustCompile(`keep versions 5-1\d: lease ` + id[1] + ` on version 5 until 20\d\d-`).MatchString(human) {
		t.Fatalf("dry run does not name the lease:\n%s", human)
	}
	ok(t, "", "maintain", "--warehouse", dir, "--clock-ahead", "3h")
	ok(t, "", "scan", "--table", tbl, "--version", "5")
	fails(t, 1, "version 4 was pruned", "", "scan", "--table", tbl, "--version", "4")
}
