package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/table"
)

// TestLeaseDaysAndUnknownID (issue 32 section 5): --ttl and --grace take
// days (Go's durations stop at hours: `unknown unit "d"`), and releasing a
// lease the table does not hold names the table.
func TestLeaseDaysAndUnknownID(t *testing.T) {
	tbl, _ := newRegistry(t)
	if out := ok(t, "", "lease", "create", tbl, "--ttl", "7d"); !strings.Contains(out, "expires") {
		t.Fatalf("create --ttl 7d: %q", out)
	}
	fails(t, 2, "ttl 192h0m0s not in (0, 168h0m0s]", "", "lease", "create", tbl, "--ttl", "8d")
	loc := strings.TrimPrefix(tbl, "--table=")
	fails(t, 1, "lease 0123456789abcdef on "+loc+": lease not found", "", "lease", "release", "0123456789abcdef", tbl)
	dir := filepath.Dir(loc)
	if out := ok(t, "", "register", "reg", filepath.Base(loc), "--warehouse", dir, "--grace", "1d12h"); !strings.Contains(out, "grace 36h") {
		t.Fatalf("register --grace 1d12h: %q", out)
	}
	for in, want := range map[string]time.Duration{"7d": 7 * 24 * time.Hour, "1.5d": 36 * time.Hour, "1d30m": 24*time.Hour + 30*time.Minute, "90m": 90 * time.Minute} {
		if got, err := parseDays(in); err != nil || got != want {
			t.Errorf("parseDays(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"d", "-1d", "1d-1h", "xd", "1dd"} {
		if _, err := parseDays(in); err == nil {
			t.Errorf("parseDays(%q): no error", in)
		}
	}
}

// TestNumberFlagErrors: a numeric flag given something else says what it
// takes, not strconv's `strconv.ParseUint: parsing "-5": invalid syntax`.
func TestNumberFlagErrors(t *testing.T) {
	tbl, _ := newRegistry(t)
	fails(t, 2, "register: --target-rows -5: want a whole number >= 0; --target-rows: compaction target rows per fragment (at least 1)", "",
		"register", "x", "registry", "--warehouse", filepath.Dir(strings.TrimPrefix(tbl, "--table=")), "--target-rows", "-5")
	fails(t, 2, "scan: --limit x: want a whole number; --limit: ", "", "scan", tbl, "--limit", "x")
}

// TestReadFlagMistakes (issue 32 section 5, earlier items still open):
// each is a clear usage error now, where --columns name,name printed NAME
// twice, --version 0 silently meant the latest, --key-range z..a printed
// an empty table, and get of a missing key said "not found" twice.
func TestReadFlagMistakes(t *testing.T) {
	tbl, _ := newRegistry(t)
	ok(t, threeRows, "upsert", tbl)
	fails(t, 2, `--columns: "name" given twice`, "", "scan", tbl, "--columns", "name,name")
	for _, cmd := range [][]string{{"files"}, {"scan"}, {"get", "a"}, {"export", "--out", "x.parquet"}, {"tag", "t"}} {
		fails(t, 2, "--version 0: versions start at 1 (leave --version out for the latest)", "", append(append(cmd, tbl), "--version", "0")...)
	}
	fails(t, 2, `--key-range "z..a": no key is >= "z" and < "a" (LO must sort before HI)`, "", "scan", tbl, "--key-range", "z..a")
	fails(t, 2, `--key-range "a..a"`, "", "scan", tbl, "--key-range", "a..a")
	r := run(t, "", "get", "nope", tbl)
	if r.code != 1 || r.err != "tablekeep: key \"nope\" not found at version 2\n" {
		t.Fatalf("get nope: exit %d, %q", r.code, r.err)
	}
}

// TestTableFormatFlag: the table format has its own flag name,
// --table-format (create: 3|2; register: tablekeep|lance), where --format
// meant four things; --format still works there, deprecated, and
// `create --format lance` says what to do instead of a strconv error.
func TestTableFormatFlag(t *testing.T) {
	dir := t.TempDir()
	ok(t, "", "create", "--table", filepath.Join(dir, "t2"), "--schema", "name:utf8", "--key", "name", "--table-format", "2")
	r := run(t, "", "create", "--table", filepath.Join(dir, "old"), "--schema", "name:utf8", "--format", "2")
	if r.code != 0 || r.err != "tablekeep: warning: --format is deprecated here: use --table-format\n" {
		t.Fatalf("create --format 2: exit %d, stderr %q", r.code, r.err)
	}
	fails(t, 2, "--table-format lance: create makes tablekeep tables (3 or 2); LanceDB creates a Lance dataset", "", "create", "--table", filepath.Join(dir, "l"), "--schema", "name:utf8", "--format", "lance")
	fails(t, 2, `--table-format "4": want 3 (the default) or 2`, "", "create", "--table", filepath.Join(dir, "l"), "--schema", "name:utf8", "--table-format", "4")
	if out := ok(t, "", "describe", "--table", filepath.Join(dir, "t2")); !strings.Contains(out, "tablekeep 2") {
		t.Fatalf("describe: %q", out)
	}
	fails(t, 2, `--table-format "delta"`, "", "register", "t2", "t2", "--warehouse", dir, "--table-format", "delta")
}

// TestStatusPrunableLeases: status PRUNABLE says what a lease holds
// ("+19 held by lease ID until T"), where it counted the leased versions
// as prunable once their grace ended ("+28 at T", the lease ignored).
func TestStatusPrunableLeases(t *testing.T) {
	t.Setenv("TABLEKEEP_WAREHOUSE", "")
	t.Setenv(EnvAllowClockAhead, "test")
	dir := t.TempDir()
	tbl := "--table=" + filepath.Join(dir, "ev")
	ok(t, "", "create", tbl, "--schema", "name:utf8,v:utf8", "--key", "name")
	for i := range 30 {
		ok(t, fmt.Sprintf("{\"name\":\"k%d\",\"v\":\"%d\"}\n", i%4, i), "upsert", tbl) // v2..v31
	}
	ok(t, "", "register", "ev", "ev", "--warehouse", dir, "--keep-last", "3")
	id := strings.Fields(ok(t, "", "lease", "create", tbl, "--version", "10", "--ttl", "2h"))[1]
	type row struct {
		Now    int    `json:"prunable_versions"`
		Later  int    `json:"prunable_later"`
		Leased int    `json:"prunable_leased"`
		By     string `json:"prunable_leased_by"`
		Until  string `json:"prunable_leased_until"`
	}
	for _, c := range []struct {
		ahead            string
		now, later, held int
	}{{"0s", 0, 9, 19}, {"61m", 9, 0, 19}} { // versions 10-28 held: from the lease's to the newest 3
		var st struct{ Tables []row }
		r := run(t, "", "status", "--warehouse", dir, "--table", "ev", "--clock-ahead", c.ahead, "-o", "json")
		if err := json.Unmarshal([]byte(r.out), &st); err != nil || len(st.Tables) != 1 {
			t.Fatalf("status: %v %q", err, r.out)
		}
		g := st.Tables[0]
		if g.Now != c.now || g.Later != c.later || g.Leased != c.held || g.By != id || g.Until == "" {
			t.Errorf("clock ahead %s: %+v, want %d now, %d later, %d held by %s", c.ahead, g, c.now, c.later, c.held, id)
		}
		out := run(t, "", "status", "--warehouse", dir, "--table", "ev", "--clock-ahead", c.ahead).out
		if !strings.Contains(out, fmt.Sprintf("%d (+19 held by lease %s until ", c.now, id)) {
			t.Errorf("clock ahead %s: PRUNABLE does not say what the lease holds:\n%s", c.ahead, out)
		}
	}
}

// TestDryRunSkipsIdleSystemTables: a dry run over the warehouse prints no
// section for _stats and _registry when they have nothing to do (only why
// they keep their versions), as docs/cli.md shows; the tables' rows stay.
func TestDryRunSkipsIdleSystemTables(t *testing.T) {
	t.Setenv("TABLEKEEP_WAREHOUSE", "")
	dir := t.TempDir()
	ok(t, "", "create", "--table", filepath.Join(dir, "ev"), "--schema", "name:utf8", "--key", "name")
	ok(t, "", "register", "ev", "ev", "--warehouse", dir)
	out := ok(t, "", "maintain", "--warehouse", dir, "--dry-run")
	if strings.Contains(out, "\n_stats:\n") || strings.Contains(out, "\n_registry:\n") || !strings.Contains(out, "\nev:\n") ||
		!strings.Contains(out, "\n_stats ") || !strings.Contains(out, "\n_registry ") {
		t.Fatalf("maintain --dry-run:\n%s", out)
	}
}

// TestCorruptLatestAllowsTimeTravel: a corrupt latest manifest is an
// error for the latest, but reading an intact older version by --version
// works (scan, get, export, files), where every read failed on the latest.
func TestCorruptLatestAllowsTimeTravel(t *testing.T) {
	tbl, dir := newRegistry(t)
	ok(t, threeRows, "upsert", tbl) // v2
	ok(t, `{"name":"a","uri":"u2","created_at":"2026-01-01T00:00:00Z"}`, "upsert", tbl)
	latest := filepath.Join(dir, "registry", table.ManifestKey(3))
	if err := os.WriteFile(latest, []byte("garbage, not a manifest"), 0o644); err != nil {
		t.Fatal(err)
	}
	fails(t, 1, "corrupt manifest", "", "scan", tbl)
	if rows := jsonLines(t, ok(t, "", "scan", tbl, "--version", "2", "-o", "json")); len(rows) != 3 {
		t.Fatalf("scan --version 2: %v", rows)
	}
	if out := ok(t, "", "get", "a", tbl, "--version", "2", "-o", "json"); !strings.Contains(out, `"uri":"s3://r/a"`) {
		t.Fatalf("get --version 2: %q", out)
	}
	ok(t, "", "export", tbl, "--version", "2", "--format", "parquet", "--out", filepath.Join(dir, "v2.parquet"))
	if out := ok(t, "", "files", tbl, "--version", "2"); !strings.Contains(out, "3 rows are inline") {
		t.Fatalf("files --version 2: %q", out)
	}
}

// TestCompletion: the shells complete --table with the names registered
// in --warehouse, and the values of -o, --table-format and --format.
func TestCompletion(t *testing.T) {
	t.Setenv("TABLEKEEP_WAREHOUSE", "")
	dir := t.TempDir()
	ok(t, "", "create", "--table", filepath.Join(dir, "ev"), "--schema", "name:utf8", "--key", "name")
	ok(t, "", "register", "events", "ev", "--warehouse", dir)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"status", "--warehouse", dir, "--table", ""}, "events\n"},
		{[]string{"lease", "list", "--warehouse", dir, "--table", ""}, "events\n"},
		{[]string{"scan", "-o", ""}, "table\njson\ncsv\n"},
		{[]string{"create", "--table-format", ""}, "3\n2\n"},
		{[]string{"register", "--table-format", ""}, "tablekeep\nlance\n"},
		{[]string{"upsert", "--format", ""}, "jsonl\ncsv\n"},
		{[]string{"export", "--format", ""}, "parquet\n"},
	} {
		r := run(t, "", append([]string{"__complete"}, c.args...)...)
		if !strings.Contains(r.out, c.want) {
			t.Errorf("complete %v: %q, want %q", c.args, r.out, c.want)
		}
	}
}

// TestNotS3Endpoint: an endpoint that answers, but not as S3 (a web
// server), says so with its address and the variable to check, instead of
// the SDK's "error while deserializing xml error response : XML syntax
// error on line 6".
func TestNotS3Endpoint(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, "<html><head><meta charset=utf-8></head><body>not here</body></html>")
	}))
	defer srv.Close()
	for k, v := range map[string]string{"AWS_ENDPOINT_URL_S3": srv.URL, "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "y", "AWS_REGION": "us-east-1", EnvStackS3Endpoint: "", "TABLEKEEP_WAREHOUSE": ""} {
		t.Setenv(k, v)
	}
	want := "the endpoint " + srv.URL + " does not answer as S3 (HTTP 404, a reply that is not S3's XML): check AWS_ENDPOINT_URL_S3"
	fails(t, 1, "s3://bucket/t: "+want, "", "scan", "--table", "s3://bucket/t")
	fails(t, 1, want, "", "status", "--warehouse", "s3://bucket/wh")
}

// TestNoCredentialsOneLine: with no credentials and an instance metadata
// service that refuses tokens, the one line says so, with no SDK warning
// ("WARN falling back to IMDSv1") before it.
func TestNoCredentialsOneLine(t *testing.T) {
	imds := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusForbidden)
	}))
	defer imds.Close()
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_ENDPOINT_URL_S3", EnvStackS3Endpoint, "TABLEKEEP_WAREHOUSE"} {
		t.Setenv(k, "")
	}
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", imds.URL)
	// The SDK's default logger writes to the process's stderr.
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := os.Stderr
	os.Stderr = pw
	fails(t, 1, "s3://bucket/t: no AWS credentials found", "", "scan", "--table", "s3://bucket/t")
	os.Stderr = stderr
	pw.Close()
	if sdk, _ := io.ReadAll(pr); len(sdk) > 0 {
		t.Fatalf("the SDK wrote to stderr before the error line: %q", sdk)
	}
}
