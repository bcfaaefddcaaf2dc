package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestRegisterBadInput: every bad input of register, unregister, tables,
// status and maintain gets a one-line error with the right exit code, and
// nothing is stored.
func TestRegisterBadInput(t *testing.T) {
	dir := t.TempDir()
	ok(t, "", "create", "--table", filepath.Join(dir, "reg"), "--schema", "name:utf8", "--key", "name")
	file := writeFile(t, dir, "notes.txt", "x")
	for k := range map[string]bool{"TABLEKEEP_WAREHOUSE": true, "TABLEKEEP_LOCK_TABLE": true} {
		t.Setenv(k, "")
	}
	w := "--warehouse=" + dir
	cases := []struct {
		name string
		code int
		want string
		args []string
	}{
		{"keep-last negative", 2, "keep-last -1 must be at least 1", []string{"register", "x", "reg", w, "--keep-last", "-1"}},
		{"keep-last zero", 2, "keep-last 0 must be at least 1", []string{"register", "x", "reg", w, "--keep-last", "0"}},
		{"grace zero", 2, "grace 0s is shorter than the writers' grace window", []string{"register", "x", "reg", w, "--grace", "0"}},
		{"grace short", 2, "grace 10m0s is shorter", []string{"register", "x", "reg", w, "--grace", "10m"}},
		{"target rows zero", 2, "target rows must be at least 1", []string{"register", "x", "reg", w, "--target-rows", "0"}},
		{"deleted threshold zero", 2, "deleted threshold 0 must be in (0, 1]", []string{"register", "x", "reg", w, "--deleted-threshold", "0"}},
		{"deleted threshold high", 2, "deleted threshold 1.5 must be in (0, 1]", []string{"register", "x", "reg", w, "--deleted-threshold", "1.5"}},
		{"name with space", 2, `invalid table name "my table": use 1 to 128 letters`, []string{"register", "my table", "reg", w}},
		{"name dot", 2, "invalid table name", []string{"register", ".x", "reg", w}},
		{"system name", 2, "system table _registry", []string{"register", "_registry", "reg", w}},
		{"missing table", 1, "nope: not a tablekeep table (no manifests under nope/_versions/)", []string{"register", "x", "nope", w}},
		{"a file as table", 1, "notes.txt: not a tablekeep table: it is a file", []string{"register", "x", "notes.txt", w}},
		{"absolute path", 2, "an absolute path; want a path relative to the warehouse", []string{"register", "x", filepath.Join(dir, "reg"), w}},
		{"uri", 2, "a URI; want a path relative to the warehouse", []string{"register", "x", "s3://bucket/reg", w}},
		{"dot dot", 2, "'..' leaves the warehouse", []string{"register", "x", "../reg", w}},
		{"dot segment", 2, "empty or '.' segment", []string{"register", "x", "./reg", w}},
		{"empty path", 2, "empty (want a path relative to the warehouse", []string{"register", "x", "", w}},
		{"no warehouse", 2, "--warehouse is required", []string{"register", "x", "reg"}},
		{"missing warehouse", 1, "no such directory", []string{"register", "x", "reg", "--warehouse", filepath.Join(dir, "nope")}},
		{"file warehouse", 1, "is a file, not a directory", []string{"register", "x", "reg", "--warehouse", file}},
		{"bad bucket", 2, "invalid bucket name", []string{"register", "x", "reg", "--warehouse", "s3://Bad_Bucket/w"}},
		{"one argument", 2, "accepts 2 arg(s), received 1", []string{"register", "x", w}},
		{"unregister unknown", 1, `unknown table "nope" in warehouse`, []string{"unregister", "nope", w}},
		{"unregister system", 2, "system table _stats", []string{"unregister", "_stats", w}},
		{"unregister bad name", 2, "invalid table name", []string{"unregister", "a b", w}},
		{"maintain unknown table", 1, `unknown table "nope" in warehouse`, []string{"maintain", w, "--table", "nope"}},
		{"maintain keys without dry run", 2, "use it with --dry-run", []string{"maintain", w, "--keys"}},
		{"s3 maintain without lock table", 2, "needs the DynamoDB lock table", []string{"maintain", "--warehouse", "s3://bucket/w"}},
		{"s3 compact without lock table", 2, "--lock-table NAME or set TABLEKEEP_LOCK_TABLE", []string{"compact", "--warehouse", "s3://bucket/w"}},
		{"bad queue url", 2, `--queue-url "queue" is not a queue URL`, []string{"maintain", "--warehouse", "s3://bucket/w", "--lock-table", "l", "--queue-url", "queue"}},
		{"status negative lag", 2, "--max-lag -1s must not be negative", []string{"status", w, "--max-lag", "-1s"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { fails(t, c.code, c.want, "", c.args...) })
	}
	// Nothing was stored.
	if out := ok(t, "", "tables", w); strings.Count(out, "\n") != 3 || strings.Contains(out, "\nx ") {
		t.Fatalf("tables after bad input:\n%s", out)
	}
}

// TestRegisterStoresWhatItPrints: the policy printed is the one stored
// (listed by tables), unregister removes the entry and leaves the data,
// and a table that disappears after registration gets a report row with
// its error and exit 1 from maintain and status.
func TestRegisterStoresWhatItPrints(t *testing.T) {
	dir := t.TempDir()
	ok(t, "", "create", "--table", filepath.Join(dir, "tables", "a"), "--schema", "name:utf8", "--key", "name")
	ok(t, "", "create", "--table", filepath.Join(dir, "tables", "b"), "--schema", "name:utf8", "--key", "name")
	w := "--warehouse=" + dir
	out := ok(t, "", "register", "a", "tables/a", w, "--keep-last", "3", "--grace", "2h", "--target-rows", "5000")
	if want := "registered a at tables/a in " + dir + " (keep-last 3, grace 2h, target 5000 rows, deleted-threshold 0.1)\n"; out != want {
		t.Fatalf("register: %q, want %q", out, want)
	}
	var pj policyJSON
	if err := json.Unmarshal([]byte(ok(t, "", "register", "b", "tables/b/", w, "-o", "json")), &pj); err != nil {
		t.Fatal(err)
	}
	if pj.Table != "b" || pj.Root != "tables/b/" || pj.KeepLast != 10 || pj.Grace != "1h" || pj.TargetRows != 1<<20 {
		t.Fatalf("register -o json: %+v", pj)
	}
	out = ok(t, "", "tables", w)
	if !regexp.MustCompile(`(?m)^a +tablekeep +tables/a/ +3 +2h +5000 +0.1$`).MatchString(out) || !regexp.MustCompile(`(?m)^b +tablekeep +tables/b/ +10 +1h +1048576 +0.1$`).MatchString(out) {
		t.Fatalf("tables:\n%s", out)
	}
	// TABLEKEEP_WAREHOUSE stands for --warehouse.
	t.Setenv("TABLEKEEP_WAREHOUSE", dir)
	if out := ok(t, "", "unregister", "b"); out != "unregistered b from "+dir+" (its data is untouched)\n" {
		t.Fatalf("unregister: %q", out)
	}
	if out := ok(t, "", "tables"); strings.Contains(out, "\nb ") {
		t.Fatalf("b still listed:\n%s", out)
	}
	ok(t, "", "stats", "--table", filepath.Join(dir, "tables", "b")) // data untouched

	// A registered table that disappears: a row with the error, exit 1.
	if err := os.RemoveAll(filepath.Join(dir, "tables", "a")); err != nil {
		t.Fatal(err)
	}
	r := run(t, "", "maintain")
	if r.code != 1 || !regexp.MustCompile(`(?m)^a +0 +- +- +0 +0 +0 B +error: .*not a table`).MatchString(r.out) ||
		!strings.Contains(r.err, "maintenance failed for some tables: a:") {
		t.Fatalf("maintain with a lost table: exit %d\n%s\nstderr %s", r.code, r.out, r.err)
	}
	r = run(t, "", "status")
	if r.code != 1 || !regexp.MustCompile(`(?m)^a +tablekeep +unreadable +\n`).MatchString(r.out) ||
		!regexp.MustCompile(`(?m)^a: unreadable: .*not a table`).MatchString(r.out) || r.err != "tablekeep: unhealthy tables: a\n" {
		t.Fatalf("status with a lost table: exit %d\n%s\nstderr %s", r.code, r.out, r.err)
	}
}
