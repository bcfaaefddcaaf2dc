package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/table"
)

type result struct {
	out, err string
	code     int
}

// run runs the command tree in-process.
func run(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := Run(context.Background(), args, strings.NewReader(stdin), &out, &errb)
	return result{out.String(), errb.String(), code}
}

// ok runs a command that must succeed and returns its stdout.
func ok(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	r := run(t, stdin, args...)
	if r.code != 0 || r.err != "" {
		t.Fatalf("%v: exit %d, stderr %q", args, r.code, r.err)
	}
	return r.out
}

// fails runs a command that must fail with code and a one-line error
// containing want.
func fails(t *testing.T, code int, want string, stdin string, args ...string) {
	t.Helper()
	r := run(t, stdin, args...)
	if r.code != code {
		t.Errorf("%v: exit %d, want %d (stderr %q)", args, r.code, code, r.err)
	}
	if !strings.HasPrefix(r.err, "tablekeep: ") || strings.Count(r.err, "\n") != 1 || !strings.HasSuffix(r.err, "\n") {
		t.Errorf("%v: stderr %q is not one 'tablekeep: ' line", args, r.err)
	}
	if !strings.Contains(r.err, want) {
		t.Errorf("%v: stderr %q does not contain %q", args, r.err, want)
	}
	if r.out != "" {
		t.Errorf("%v: stdout %q, want none", args, r.out)
	}
}

func jsonLines(t *testing.T, s string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("bad JSON line %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

func writeFile(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const regSpec = "name:utf8,uri:utf8,created_at:timestamp,note:utf8?"

// newRegistry creates a registry-shaped table and returns its --table flag.
func newRegistry(t *testing.T) (tbl string, dir string) {
	t.Helper()
	dir = t.TempDir()
	tbl = "--table=" + filepath.Join(dir, "registry")
	out := ok(t, "", "create", tbl, "--schema", regSpec, "--key", "name")
	if !strings.Contains(out, "version 1") {
		t.Fatalf("create: %q", out)
	}
	return tbl, dir
}

const threeRows = `{"name":"a","uri":"s3://r/a","created_at":"2026-01-02T03:04:05Z"}
{"name":"b","uri":"s3://r/b","created_at":"2026-01-02T05:04:05.5+02:00","note":"hello"}

{"name":"c","uri":"s3://r/c","created_at":1767323045000000,"note":null}
`

func TestUpsertGetScan(t *testing.T) {
	tbl, dir := newRegistry(t)
	jl := writeFile(t, dir, "rows.jsonl", threeRows)
	out := ok(t, "", "upsert", tbl, "--file", jl)
	if want := "upserted 3 rows (0 replaced): version 2\n"; out != want {
		t.Fatalf("upsert: %q, want %q", out, want)
	}
	csvFile := writeFile(t, dir, "more.csv", "name,uri,created_at,note\nb,s3://r/b2,2026-03-01T00:00:00Z,\nd,s3://r/d,2026-03-02T00:00:00Z,\"x, y\"\n")
	out = ok(t, "", "upsert", tbl, "-f", csvFile, "--output", "json")
	var res map[string]any
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if res["version"] != 3.0 || res["rows_added"] != 2.0 || res["rows_deleted"] != 1.0 || res["committed"] != true {
		t.Fatalf("upsert csv: %v", res)
	}

	// get: JSON, latest and an older version.
	rows := jsonLines(t, ok(t, "", "get", tbl, "b", "-o", "json"))
	want := map[string]any{"name": "b", "uri": "s3://r/b2", "created_at": "2026-03-01T00:00:00Z", "note": nil}
	if len(rows) != 1 || !equalRow(rows[0], want) {
		t.Fatalf("get b: %v, want %v", rows, want)
	}
	rows = jsonLines(t, ok(t, "", "get", tbl, "b", "--version", "2", "-o", "json"))
	want = map[string]any{"name": "b", "uri": "s3://r/b", "created_at": "2026-01-02T03:04:05.5Z", "note": "hello"}
	if len(rows) != 1 || !equalRow(rows[0], want) {
		t.Fatalf("get b@2: %v, want %v", rows, want)
	}
	// The key order of a JSON row is the schema's.
	if line := ok(t, "", "get", tbl, "c", "-o", "json"); !strings.HasPrefix(line, `{"name":"c","uri":"s3://r/c","created_at":"2026-01-02T03:04:05Z","note":null}`) {
		t.Fatalf("get c: %q", line)
	}

	// scan JSON: every live row once.
	rows = jsonLines(t, ok(t, "", "scan", tbl, "-o", "json"))
	got := map[string]string{}
	for _, r := range rows {
		got[r["name"].(string)] = r["uri"].(string)
	}
	if len(rows) != 4 || got["a"] != "s3://r/a" || got["b"] != "s3://r/b2" || got["c"] != "s3://r/c" || got["d"] != "s3://r/d" {
		t.Fatalf("scan: %v", rows)
	}
	// scan table: header, aligned columns, NULL for nulls.
	out = ok(t, "", "scan", tbl, "--columns", "name,note")
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 5 || !strings.HasPrefix(lines[0], "NAME") || !strings.Contains(lines[0], "NOTE") {
		t.Fatalf("scan table:\n%s", out)
	}
	col := strings.Index(lines[0], "NOTE")
	for _, l := range lines[1:] {
		if len(l) < col || l[col-1] != ' ' || l[col] == ' ' {
			t.Fatalf("scan table not aligned:\n%s", out)
		}
	}
	if !strings.Contains(out, "x, y") || !strings.Contains(out, "NULL") {
		t.Fatalf("scan table:\n%s", out)
	}
	// --limit and --version.
	if rows := jsonLines(t, ok(t, "", "scan", tbl, "-o", "json", "--limit", "2")); len(rows) != 2 {
		t.Fatalf("scan --limit 2: %d rows", len(rows))
	}
	if rows := jsonLines(t, ok(t, "", "scan", tbl, "-o", "json", "--version", "1")); len(rows) != 0 {
		t.Fatalf("scan v1: %d rows", len(rows))
	}
	// stdin defaults to JSON lines.
	out = ok(t, `{"name":"e","uri":"u","created_at":"2026-01-01T00:00:00Z"}`, "upsert", tbl)
	if !strings.Contains(out, "version 4") {
		t.Fatalf("upsert stdin: %q", out)
	}
	// Empty input commits nothing.
	if out := ok(t, "", "upsert", tbl); !strings.Contains(out, "nothing committed (version 4)") {
		t.Fatalf("empty upsert: %q", out)
	}
}

func equalRow(a, b map[string]any) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range b {
		if a[k] != v {
			return false
		}
	}
	return true
}

func TestAppendNoKeyAndTypes(t *testing.T) {
	tbl := "--table=" + filepath.Join(t.TempDir(), "events")
	ok(t, "", "create", tbl, "--schema", "id:int64, n:int32?, x:float64:nullable, ok:bool, blob:binary?, at:timestamp?")
	in := `{"id":1,"n":7,"x":1.5,"ok":true,"blob":"aGk=","at":"2026-05-01T00:00:00.000001Z"}
{"id":1,"ok":false}
{"id":3e0,"n":null,"x":-2,"ok":true}
`
	if out := ok(t, in, "append", tbl); out != "appended 3 rows: version 2\n" {
		t.Fatalf("append: %q", out)
	}
	rows := jsonLines(t, ok(t, "", "scan", tbl, "-o", "json"))
	if len(rows) != 3 || rows[0]["blob"] != "aGk=" || rows[0]["at"] != "2026-05-01T00:00:00.000001Z" || rows[1]["n"] != nil || rows[2]["id"] != 3.0 || rows[2]["x"] != -2.0 {
		t.Fatalf("scan: %v", rows)
	}
	// CSV: an empty field is null in a nullable column.
	dir := t.TempDir()
	f := writeFile(t, dir, "ev.csv", "ok,id,x\ntrue,4,\n")
	ok(t, "", "append", tbl, "--file", f)
	rows = jsonLines(t, ok(t, "", "scan", tbl, "-o", "json", "--columns", "id,x"))
	if len(rows) != 4 || rows[3]["id"] != 4.0 || rows[3]["x"] != nil {
		t.Fatalf("scan after csv: %v", rows)
	}
	// Key commands need a key column.
	fails(t, 1, "no key column", "", "get", tbl, "1")
	fails(t, 1, "no key column", in, "upsert", tbl)
}

func TestIntKeys(t *testing.T) {
	tbl := "--table=" + filepath.Join(t.TempDir(), "t")
	ok(t, "", "create", tbl, "--schema", "id:int64,v:utf8", "--key", "id")
	ok(t, "id,v\n1,one\n2,two\n-3,minus three\n", "upsert", tbl, "--format", "csv")
	if rows := jsonLines(t, ok(t, "", "get", tbl, "-o", "json", "--", "-3")); rows[0]["v"] != "minus three" {
		t.Fatalf("get -3: %v", rows)
	}
	if out := ok(t, "", "delete", tbl, "--key", "1", "--key", "2"); out != "deleted 2 rows: version 3\n" {
		t.Fatalf("delete: %q", out)
	}
	fails(t, 2, `key "x" is not an int64`, "", "delete", tbl, "--key", "x")
	fails(t, 2, "--prefix needs a utf8 key column", "", "delete", tbl, "--prefix", "1")
}

func TestDelete(t *testing.T) {
	tbl, _ := newRegistry(t)
	ok(t, threeRows, "upsert", tbl)
	ok(t, `{"name":"ab","uri":"u","created_at":"2026-01-01T00:00:00Z"}`, "upsert", tbl)
	if out := ok(t, "", "delete", tbl, "--key", "c"); out != "deleted 1 row: version 4\n" {
		t.Fatalf("delete c: %q", out)
	}
	if out := ok(t, "", "delete", tbl, "--key", "c", "--key", "zz"); out != "no rows matched; nothing committed (version 4)\n" {
		t.Fatalf("delete again: %q", out)
	}
	if out := ok(t, "", "delete", tbl, "--prefix", "a"); out != "deleted 2 rows: version 5\n" {
		t.Fatalf("delete prefix: %q", out)
	}
	rows := jsonLines(t, ok(t, "", "scan", tbl, "-o", "json"))
	if len(rows) != 1 || rows[0]["name"] != "b" {
		t.Fatalf("scan: %v", rows)
	}
	fails(t, 1, `key "a" not found at version 5`, "", "get", tbl, "a")
	fails(t, 2, "either --key", "", "delete", tbl)
	fails(t, 2, "either --key", "", "delete", tbl, "--key", "a", "--prefix", "a")
}

func TestVersionsTagsRestore(t *testing.T) {
	tbl, _ := newRegistry(t)
	ok(t, threeRows, "upsert", tbl)     // v2
	ok(t, "", "delete", tbl, "--key=a") // v3

	out := ok(t, "", "tag", tbl, "before-a-gone", "--version", "2")
	if out != "tagged version 2 as before-a-gone\n" {
		t.Fatalf("tag: %q", out)
	}
	if out := ok(t, "", "tag", tbl, "head"); out != "tagged version 3 as head\n" {
		t.Fatalf("tag latest: %q", out)
	}
	fails(t, 1, "tag already exists", "", "tag", tbl, "head")
	fails(t, 2, "invalid tag name", "", "tag", tbl, "bad/name")
	fails(t, 1, "version 9 not found", "", "tag", tbl, "nine", "--version", "9")

	out = ok(t, "", "tags", tbl)
	if out != "TAG            VERSION\nbefore-a-gone  2\nhead           3\n" {
		t.Fatalf("tags:\n%s", out)
	}
	tags := jsonLines(t, ok(t, "", "tags", tbl, "-o", "json"))
	if len(tags) != 2 || tags[0]["name"] != "before-a-gone" || tags[0]["version"] != 2.0 {
		t.Fatalf("tags json: %v", tags)
	}

	out = ok(t, "", "restore", tbl, "2")
	if out != "restored version 2 as version 4 (3 rows)\n" {
		t.Fatalf("restore: %q", out)
	}
	rows := jsonLines(t, ok(t, "", "get", tbl, "a", "-o", "json"))
	if rows[0]["uri"] != "s3://r/a" {
		t.Fatalf("get a after restore: %v", rows)
	}

	vs := jsonLines(t, ok(t, "", "versions", tbl, "-o", "json", "--long"))
	if len(vs) != 4 {
		t.Fatalf("versions: %v", vs)
	}
	wantOps := []string{"create", "upsert", "delete", "restore(2)"}
	for i, v := range vs {
		if v["version"] != float64(i+1) || v["op"] != wantOps[i] || v["manifest_bytes"].(float64) <= 0 {
			t.Fatalf("version %d: %v", i+1, v)
		}
	}
	if tags := vs[1]["tags"].([]any); len(tags) != 1 || tags[0] != "before-a-gone" {
		t.Fatalf("version 2 tags: %v", vs[1]["tags"])
	}
	out = ok(t, "", "versions", tbl, "--limit", "2")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "VERSION") || !strings.HasPrefix(lines[1], "3 ") || !strings.HasSuffix(lines[1], "head") {
		t.Fatalf("versions --limit 2:\n%s", out)
	}

	if out := ok(t, "", "tag", tbl, "--delete", "head"); out != "deleted tag head\n" {
		t.Fatalf("untag: %q", out)
	}
	fails(t, 1, `tag "head": tag not found`, "", "tag", tbl, "--delete", "head")
	fails(t, 1, "version 7 not found", "", "restore", tbl, "7")
	fails(t, 2, `version "x" is not a positive integer`, "", "restore", tbl, "x")
}

func TestStats(t *testing.T) {
	tbl := "--table=" + filepath.Join(t.TempDir(), "registry")
	ok(t, "", "create", tbl, "--schema", regSpec, "--key", "name", "--table-format", "2") // format-2 layout asserted
	ok(t, threeRows, "upsert", tbl)
	ok(t, `{"name":"a","uri":"u2","created_at":"2026-01-01T00:00:00Z"}`, "upsert", tbl)
	var s map[string]any
	if err := json.Unmarshal([]byte(ok(t, "", "stats", tbl, "-o", "json")), &s); err != nil {
		t.Fatal(err)
	}
	if s["version"] != 3.0 || s["versions"] != 3.0 || s["fragments"] != 2.0 || s["rows"] != 3.0 || s["deleted_rows"] != 1.0 ||
		s["manifest_bytes"].(float64) <= s["latest_manifest_bytes"].(float64) || s["data_bytes"].(float64) <= 0 {
		t.Fatalf("stats: %v", s)
	}
	out := ok(t, "", "stats", tbl)
	for _, want := range []string{"latest version:   3", "versions stored:  3", "fragments:        2", "rows:             3", "deleted rows:     1", "manifest bytes:", "data bytes:"} {
		if !strings.Contains(out, want) {
			t.Errorf("stats output lacks %q:\n%s", want, out)
		}
	}
}

func TestErrors(t *testing.T) {
	tbl, dir := newRegistry(t)
	ok(t, threeRows, "upsert", tbl)
	notTable := filepath.Join(dir, "empty")
	if err := os.Mkdir(notTable, 0o755); err != nil {
		t.Fatal(err)
	}
	txt := writeFile(t, dir, "rows.txt", threeRows)
	cases := []struct {
		name  string
		code  int
		want  string
		stdin string
		args  []string
	}{
		{"bad schema type", 2, `unknown type "utf9"`, "", []string{"create", "--table", filepath.Join(dir, "n1"), "--schema", "a:utf9"}},
		{"bad schema syntax", 2, "want name:type", "", []string{"create", "--table", filepath.Join(dir, "n2"), "--schema", "a"}},
		{"duplicate column", 2, `duplicate column "a"`, "", []string{"create", "--table", filepath.Join(dir, "n3"), "--schema", "a:int64,a:utf8"}},
		{"nullable key", 2, "must not be nullable", "", []string{"create", "--table", filepath.Join(dir, "n4"), "--schema", "a:utf8?", "--key", "a"}},
		{"key not in schema", 2, `--key "b" is not a column`, "", []string{"create", "--table", filepath.Join(dir, "n5"), "--schema", "a:utf8", "--key", "b"}},
		{"missing schema", 2, `"schema" not set`, "", []string{"create", "--table", filepath.Join(dir, "n6")}},
		{"table exists", 1, "table already exists", "", []string{"create", tbl, "--schema", "a:utf8"}},
		{"unknown column", 1, `stdin: line 2: unknown column "url"`, "{\"name\":\"x\",\"uri\":\"u\",\"created_at\":\"2026-01-01T00:00:00Z\"}\n{\"name\":\"y\",\"url\":\"u\"}\n", []string{"upsert", tbl}},
		{"unknown csv column", 1, `line 1: unknown column "url"`, "name,url\n", []string{"upsert", tbl, "--format", "csv"}},
		{"wrong type", 1, `line 1: column "uri": want a string, got 5`, `{"name":"x","uri":5,"created_at":"2026-01-01T00:00:00Z"}`, []string{"upsert", tbl}},
		{"bad timestamp csv", 1, `line 3: column "created_at": want an RFC 3339 timestamp`, "name,uri,created_at\nx,u,2026-01-01T00:00:00Z\ny,u,yesterday\n", []string{"append", tbl, "--format", "csv"}},
		{"missing required", 1, `line 1: missing value for required column "uri"`, `{"name":"x","created_at":"2026-01-01T00:00:00Z"}`, []string{"upsert", tbl}},
		{"null required", 1, `column "uri" is not nullable but is null`, `{"name":"x","uri":null,"created_at":"2026-01-01T00:00:00Z"}`, []string{"upsert", tbl}},
		{"duplicate upsert key", 1, `line 2: key "x" repeats line 1`, "{\"name\":\"x\",\"uri\":\"u\",\"created_at\":\"2026-01-01T00:00:00Z\"}\n{\"name\":\"x\",\"uri\":\"u\",\"created_at\":\"2026-01-01T00:00:00Z\"}\n", []string{"upsert", tbl}},
		{"bad json", 1, "line 1: invalid JSON", "{nope", []string{"upsert", tbl}},
		{"csv field count", 1, "line 2: wrong number of fields", "name,uri,created_at\nx,u\n", []string{"upsert", tbl, "--format", "csv"}},
		{"unknown extension", 2, "pass --format", "", []string{"upsert", tbl, "--file", txt}},
		{"bad format", 2, "--format must be jsonl or csv", "", []string{"upsert", tbl, "--format", "xml"}},
		{"missing file", 1, "no such file", "", []string{"upsert", tbl, "--file", filepath.Join(dir, "nope.jsonl")}},
		{"missing --table", 2, "--table is required", "", []string{"scan"}},
		{"not a table (no dir)", 1, "not a tablekeep table", "", []string{"scan", "--table", filepath.Join(dir, "nope")}},
		{"not a table (empty dir)", 1, "not a tablekeep table", "", []string{"stats", "--table", notTable}},
		{"bad uri", 2, "unsupported store URI scheme", "", []string{"scan", "--table", "gs://b/p"}},
		{"unknown version", 1, "version 99 not found", "", []string{"scan", tbl, "--version", "99"}},
		{"unknown version get", 1, "version 99 not found", "", []string{"get", tbl, "a", "--version", "99"}},
		{"unknown scan column", 2, `unknown column "zz"`, "", []string{"scan", tbl, "--columns", "name,zz"}},
		{"bad output", 2, "--output must be table, json or csv", "", []string{"scan", tbl, "-o", "yaml"}},
		{"unknown command", 2, `unknown command "frobnicate"`, "", []string{"frobnicate"}},
		{"unknown flag", 2, "unknown flag: --bogus", "", []string{"scan", tbl, "--bogus"}},
		{"bad flag value", 2, `scan: --limit x: want a whole number; --limit: print at most N rows`, "", []string{"scan", tbl, "--limit", "x"}},
		{"missing arg", 2, "accepts 1 arg(s), received 0", "", []string{"get", tbl}},
		{"extra arg", 2, "unknown command", "", []string{"scan", tbl, "extra"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { fails(t, c.code, c.want, c.stdin, c.args...) })
	}
	// Nothing above committed a version, and a missing directory was not created.
	if rows := jsonLines(t, ok(t, "", "versions", tbl, "-o", "json")); len(rows) != 2 {
		t.Fatalf("versions after errors: %d", len(rows))
	}
	if _, err := os.Stat(filepath.Join(dir, "nope")); !os.IsNotExist(err) {
		t.Fatalf("scan of a missing table created its directory: %v", err)
	}
}

func TestParseSchemaSpec(t *testing.T) {
	s, err := ParseSchemaSpec(" name:utf8 , n:INT? ,at:timestamp:nullable,b:bytes")
	if err != nil {
		t.Fatal(err)
	}
	if got := FormatSchemaSpec(s); got != "name:utf8,n:int64?,at:timestamp?,b:binary" {
		t.Fatalf("spec round trip: %q", got)
	}
	for _, bad := range []string{"", "a:", ":utf8", "a:utf8:maybe", "a:utf8?:nullable", "a:utf8,,b:int64", "a:decimal"} {
		if _, err := ParseSchemaSpec(bad); err == nil {
			t.Errorf("ParseSchemaSpec(%q) accepted", bad)
		}
	}
}

func TestRegisterAndMaintain(t *testing.T) {
	t.Setenv(EnvAllowClockAhead, "test") // --clock-ahead below
	dir := t.TempDir()
	tbl := filepath.Join(dir, "reg")
	ok(t, "", "create", "--table", tbl, "--schema", "name:utf8,uri:utf8", "--key", "name", "--table-format", "2")
	for i := range 25 {
		ok(t, fmt.Sprintf("{\"name\":\"k%d\",\"uri\":\"u%d\"}\n", i%6, i), "upsert", "--table", tbl, "--format", "jsonl")
	}
	ok(t, "", "register", "reg", "reg", "--warehouse", dir)
	fails(t, 2, "--warehouse is required", "", "maintain")
	fails(t, 1, "no such directory", "", "maintain", "--warehouse", filepath.Join(dir, "nope"))

	// Dry run: a plan, nothing changed.
	out := ok(t, "", "maintain", "--warehouse", dir, "--dry-run", "--clock-ahead", "2h", "-o", "json")
	var plan struct {
		DryRun bool `json:"dry_run"`
		Tables []struct {
			Table  string   `json:"table"`
			Groups int      `json:"compaction_groups"`
			Floor  uint64   `json:"floor"`
			Ranges []string `json:"ranges"`
		} `json:"tables"`
	}
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	found := false
	for _, tp := range plan.Tables {
		if tp.Table == "reg" {
			found = true
			if !plan.DryRun || tp.Groups != 1 || tp.Floor != 18 || len(tp.Ranges) != 1 || tp.Ranges[0] != "1-17" {
				t.Fatalf("plan %+v", tp)
			}
		}
	}
	if !found {
		t.Fatalf("no plan for reg: %s", out)
	}
	if s := ok(t, "", "stats", "--table", tbl, "-o", "json"); !strings.Contains(s, `"versions":26`) {
		t.Fatalf("dry run changed the table: %s", s)
	}

	// For real: versions pruned to keep-last, fragments folded, rows kept.
	ok(t, "", "maintain", "--warehouse", dir, "--clock-ahead", "2h")
	s := ok(t, "", "stats", "--table", tbl, "-o", "json")
	for _, want := range []string{`"versions":10`, `"fragments":1`, `"rows":6`} {
		if !strings.Contains(s, want) {
			t.Fatalf("after maintain, want %s: %s", want, s)
		}
	}
}

// TestClockAheadGated: --clock-ahead bypasses the grace window, so it is
// refused unless TABLEKEEP_ALLOW_CLOCK_OFFSET=test, and hidden from help.
func TestClockAheadGated(t *testing.T) {
	dir := t.TempDir()
	tbl := filepath.Join(dir, "reg")
	ok(t, "", "create", "--table", tbl, "--schema", "name:utf8", "--key", "name")
	ok(t, "", "register", "reg", "reg", "--warehouse", dir)
	t.Setenv(EnvAllowClockAhead, "")
	fails(t, 2, "for tests only", "", "maintain", "--warehouse", dir, "--clock-ahead", "2h")
	fails(t, 2, "for tests only", "", "status", "--warehouse", dir, "--clock-ahead", "2h")
	t.Setenv(EnvAllowClockAhead, "yes")
	fails(t, 2, "TABLEKEEP_ALLOW_CLOCK_OFFSET=test", "", "maintain", "--warehouse", dir, "--dry-run", "--clock-ahead", "2h")
	for _, cmd := range []string{"maintain", "status"} {
		if help := ok(t, "", cmd, "--help"); strings.Contains(help, "clock-ahead") {
			t.Fatalf("%s --help shows --clock-ahead:\n%s", cmd, help)
		}
	}
	t.Setenv(EnvAllowClockAhead, "test")
	ok(t, "", "maintain", "--warehouse", dir, "--dry-run", "--clock-ahead", "2h")
	ok(t, "", "maintain", "--warehouse", dir) // without the flag, no variable needed
}

// TestVersionsLongListsPruned: versions --long lists a stored version below
// the retention floor as pruned instead of failing.
func TestVersionsLongListsPruned(t *testing.T) {
	dir := t.TempDir()
	tbl := filepath.Join(dir, "reg")
	ok(t, "", "create", "--table", tbl, "--schema", "name:utf8,uri:utf8", "--key", "name")
	for i := range 4 {
		ok(t, fmt.Sprintf("{\"name\":\"k%d\",\"uri\":\"u\"}\n", i), "upsert", "--table", tbl, "--format", "jsonl")
	}
	ctx := context.Background()
	st, err := objstore.NewDisk(tbl)
	if err != nil {
		t.Fatal(err)
	}
	h, err := table.Open(ctx, st, "", table.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.SetFloor(ctx, 4); err != nil {
		t.Fatal(err)
	}
	vs := jsonLines(t, ok(t, "", "versions", "--table", tbl, "-o", "json", "--long"))
	if len(vs) != 5 {
		t.Fatalf("versions: %v", vs)
	}
	for i, v := range vs {
		pruned := i+1 < 4
		if got, _ := v["pruned"].(bool); got != pruned || (pruned && v["op"] != "pruned") || (!pruned && v["op"] != "upsert") {
			t.Fatalf("version %d: %v", i+1, v)
		}
	}
	out := ok(t, "", "versions", "--table", tbl, "--long")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 6 || !strings.Contains(lines[1], "pruned") || !strings.Contains(lines[5], "upsert") {
		t.Fatalf("versions --long:\n%s", out)
	}
}
