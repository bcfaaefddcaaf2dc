package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/lance/lancetest"
	"github.com/tablekeep/tablekeep/shared/progress"
)

// dirTree lists every path under dir (files and directories), relative.
func dirTree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out = append(out, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestReadOnlyCommandsNeverCreateAWarehouse is issue 22 High 1 (local):
// status, tables, unregister, maintain (dry or not), compact, prune,
// sweep and describe --warehouse on a directory without _registry write
// nothing and say so in one line, exit 1; register creates the warehouse.
func TestReadOnlyCommandsNeverCreateAWarehouse(t *testing.T) {
	for _, k := range []string{"TABLEKEEP_WAREHOUSE", "TABLEKEEP_LOCK_TABLE", "TABLEKEEP_TABLE"} {
		t.Setenv(k, "")
	}
	dir := t.TempDir()
	ok(t, "", "create", "--table", filepath.Join(dir, "t"), "--schema", "name:utf8", "--key", "name")
	empty := filepath.Join(dir, "typo")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	w := "--warehouse=" + empty
	want := "no warehouse at " + empty + " (no _registry): `tablekeep register` creates one"
	for _, args := range [][]string{
		{"status", w}, {"status", w, "-o", "json"}, {"tables", w}, {"tables", w, "-o", "json"},
		{"maintain", w, "--dry-run"}, {"maintain", w}, {"compact", w}, {"prune", w, "--dry-run"}, {"sweep", w},
		{"unregister", "x", w}, {"describe", "--table", filepath.Join(dir, "t"), w},
	} {
		fails(t, 1, want, "", args...)
	}
	if got := dirTree(t, empty); len(got) != 1 {
		t.Fatalf("read-only commands wrote into %s: %v", empty, got)
	}
	// status --warehouse . in a directory that is not a warehouse.
	t.Chdir(empty)
	fails(t, 1, "no warehouse at . (no _registry)", "", "status", "--warehouse", ".")
	if got := dirTree(t, empty); len(got) != 1 {
		t.Fatalf("status --warehouse . wrote: %v", got)
	}
	// register creates it; then the read-only commands work.
	ok(t, "", "create", "--table", filepath.Join(empty, "t"), "--schema", "name:utf8", "--key", "name")
	ok(t, "", "register", "t", "t", w)
	if out := ok(t, "", "status", w); !regexpMatch(`(?m)^t +tablekeep +ok `, out) {
		t.Fatalf("status after register:\n%s", out)
	}
}

// TestRegisterRefusesSecondNameSystemAndNestedRoots is issue 22 High 3
// (local): a root registered under another name, a system directory, a
// root inside a registered root or holding one are refused with one line;
// registering a name again at its own root still updates its policy.
func TestRegisterRefusesSecondNameSystemAndNestedRoots(t *testing.T) {
	for _, k := range []string{"TABLEKEEP_WAREHOUSE", "TABLEKEEP_LOCK_TABLE"} {
		t.Setenv(k, "")
	}
	dir := t.TempDir()
	for _, p := range []string{"t", "outer", "outer/inner", "box/x"} {
		ok(t, "", "create", "--table", filepath.Join(dir, p), "--schema", "name:utf8", "--key", "name")
	}
	w := "--warehouse=" + dir
	ok(t, "", "register", "prod", "t", w, "--keep-last", "10")
	fails(t, 1, "t is already registered as prod", "", "register", "scratch", "t", w, "--keep-last", "2")
	fails(t, 1, "t is already registered as prod", "", "register", "scratch", "t/", w)
	for _, sys := range []string{"_registry", "_stats", "_locks", "_fleet", "_stats/x"} {
		fails(t, 2, "system table: "+sys+" is the warehouse's own", "", "register", "x", sys, w)
	}
	ok(t, "", "register", "outer", "outer", w)
	fails(t, 1, "nested table roots: outer/inner lies inside outer, registered as outer", "", "register", "inner", "outer/inner", w)
	ok(t, "", "register", "x", "box/x", w)
	ok(t, "", "unregister", "outer", w)
	fails(t, 1, "nested table roots: box holds box/x, registered as x", "", "register", "y", "box", w)
	// prod again at t: allowed, the policy changes.
	if out := ok(t, "", "register", "prod", "t", w, "--keep-last", "5"); !strings.Contains(out, "keep-last 5") {
		t.Fatalf("re-register: %s", out)
	}
	out := ok(t, "", "tables", w)
	if strings.Contains(out, "scratch") || strings.Contains(out, "inner") || !regexpMatch(`(?m)^prod +tablekeep +t/ +5 `, out) {
		t.Fatalf("tables:\n%s", out)
	}
}

// TestDeletedThresholdNonsenseRefused is issue 22 Medium 6: NaN, Inf,
// negatives, 0, values above 1 and below 0.001 are refused (exit 2, one
// line), nothing stored, and tables -o json keeps working.
func TestDeletedThresholdNonsenseRefused(t *testing.T) {
	t.Setenv("TABLEKEEP_WAREHOUSE", "")
	dir := t.TempDir()
	ok(t, "", "create", "--table", filepath.Join(dir, "t"), "--schema", "name:utf8", "--key", "name")
	w := "--warehouse=" + dir
	for v, want := range map[string]string{
		"NaN":    "deleted threshold NaN is not a number",
		"nan":    "deleted threshold NaN is not a number",
		"Inf":    "deleted threshold +Inf is not a number",
		"-0.5":   "deleted threshold -0.5 must be in (0, 1]",
		"0":      "deleted threshold 0 must be in (0, 1]",
		"1.5":    "deleted threshold 1.5 must be in (0, 1]",
		"1e-300": "deleted threshold 1e-300 is below 0.001: it would rewrite a fragment for a single deleted row",
	} {
		fails(t, 2, want, "", "register", "t", "t", w, "--deleted-threshold", v)
		fails(t, 2, want, "", "register", "t", "t", w, "--format", "lance", "--deleted-threshold", v)
	}
	ok(t, "", "register", "t", "t", w, "--deleted-threshold", "0.001")
	if js := jsonLines(t, ok(t, "", "tables", w, "-o", "json")); len(js) != 3 {
		t.Fatalf("tables -o json: %v", js)
	}
}

// lanceRestore has LanceDB restore version v of dbdir/name (a new latest
// version whose commit is a restore) and returns the new latest.
func lanceRestore(t *testing.T, dbdir, name string, v uint64) uint64 {
	t.Helper()
	lancetest.Fixture(t)
	script, err := filepath.Abs(filepath.Join("testdata", "restore.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", script, lancetest.Dir(), dbdir, name, strconv.FormatUint(v, 10))
	cmd.Env = append(os.Environ(), "RUST_LOG=error", "LANCE_LOG=error")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node restore.mjs: %v\n%s", err, out)
	}
	var r struct {
		Latest uint64 `json:"latest"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("restore.mjs: %q: %v", out, err)
	}
	return r.Latest
}

// TestLanceRound3 is issue 22 High 2 and Medium 4 and 5 on a dataset
// LanceDB writes (local):
//   - table commands on a Lance dataset, register without --format lance,
//     and --format lance on a tablekeep table name the format (not
//     "corrupt manifest"), exit 1; describe reads the dataset;
//   - after a prune leaves tagged versions below the floor (untimed in the
//     sidecar), status reports the real waiting time: no year-1 timestamp
//     in text or JSON;
//   - after a LanceDB restore, status says the dataset is not pruned, why
//     and what to do (exit 1), maintain's note says the same, and
//     register refuses a dataset whose latest version is a restore.
func TestLanceRound3(t *testing.T) {
	t.Setenv(EnvAllowClockAhead, "test")
	for _, k := range []string{"TABLEKEEP_WAREHOUSE", "TABLEKEEP_TABLE"} {
		t.Setenv(k, "")
	}
	dir := t.TempDir()
	dbdir := filepath.Join(dir, "lance")
	c := lancetest.Create(t, dbdir, "ds", 20, "")
	ds := filepath.Join(dbdir, "ds.lance")
	ok(t, "", "create", "--table", filepath.Join(dir, "tk"), "--schema", "name:utf8", "--key", "name")
	w := "--warehouse=" + dir

	// Medium 4.
	want := ds + " is a Lance dataset: register it with --format lance; table commands read tablekeep tables (use LanceDB)"
	for _, cmd := range [][]string{{"scan"}, {"versions", "--long"}, {"get", "x"}, {"stats"}, {"tags"}, {"export", "--out", filepath.Join(dir, "x.parquet")}} {
		fails(t, 1, want, "", append(cmd, "--table", ds)...)
	}
	fails(t, 1, "lance/ds.lance is a Lance dataset: register it with --format lance", "", "register", "ds", "lance/ds.lance", w)
	fails(t, 1, "tk is a tablekeep table, not a Lance dataset: register it without --format lance", "", "register", "tk", "tk", w, "--format", "lance")
	if out := ok(t, "", "describe", "--table", ds); !strings.Contains(out, "lance") {
		t.Fatalf("describe:\n%s", out)
	}
	// files lists the latest version's data files; their live rows are
	// the dataset's rows.
	var desc struct {
		Rows uint64 `json:"rows"`
	}
	if err := json.Unmarshal([]byte(ok(t, "", "describe", "--table", ds, "-o", "json")), &desc); err != nil {
		t.Fatal(err)
	}
	live := uint64(0)
	for _, f := range jsonLines(t, ok(t, "", "files", "--table", ds, "-o", "json")) {
		if _, err := os.Stat(f["path"].(string)); err != nil {
			t.Fatalf("files lists %v: %v", f["path"], err)
		}
		live += uint64(f["live_rows"].(float64))
	}
	if live != desc.Rows || desc.Rows == 0 {
		t.Fatalf("files: %d live rows, describe: %d", live, desc.Rows)
	}
	fails(t, 1, "version 9999 is not stored (the Lance dataset has versions", "", "files", "--table", ds, "--version", "9999")
	// versions reads the dataset's listing and tags.
	vj := jsonLines(t, ok(t, "", "versions", "--table", ds, "-o", "json"))
	tagged := 0
	for _, v := range vj {
		tagged += len(v["tags"].([]any))
	}
	if len(vj) != len(c.Versions) || uint64(vj[len(vj)-1]["version"].(float64)) != c.Latest || tagged != len(c.Tags) {
		t.Fatalf("versions on a Lance dataset: %d rows, %d tags; want %d versions (latest %d), %d tags", len(vj), tagged, len(c.Versions), c.Latest, len(c.Tags))
	}

	// High 2.
	// Compaction settings apply to a Lance dataset (its compaction folds
	// fragments of fewer live rows than --target-rows and drops the deleted
	// rows of a group past --deleted-threshold): accepted, printed, listed.
	if out := ok(t, "", "register", "ds", "lance/ds.lance", w, "--format", "lance", "--keep-last", "3", "--target-rows", "5000", "--deleted-threshold", "0.25"); !strings.HasSuffix(out, "; keep-last 3, grace 1h, target 5000 rows, deleted-threshold 0.25)\n") {
		t.Fatalf("register --format lance: %q", out)
	}
	if out := ok(t, "", "tables", w); !regexpMatch(`(?m)^ds +lance +lance/ds\.lance/ +3 +1h +5000 +0\.25$`, out) {
		t.Fatalf("tables:\n%s", out)
	}
	if js := ok(t, "", "tables", w, "-o", "json"); !strings.Contains(js, `"table":"ds","root":"lance/ds.lance/","format":"lance","keep_last":3,"grace":"1h","target_rows":5000,"deleted_threshold":0.25`) {
		t.Fatalf("tables -o json does not list the Lance dataset's compaction settings:\n%s", js)
	}
	// Its cleanup counts keys, not bytes: "-", not "0 B".
	if out := ok(t, "", "maintain", w, "--table", "ds", "--clock-ahead", "2h"); !regexpMatch(`(?m)^ds +\d+ +\d+ +\d+ +\d+ +\d+ +- +lance: \d+ fragments? folded`, out) ||
		!strings.Contains(out, "; not measured for lance)") {
		t.Fatalf("maintain:\n%s", out)
	}
	start := time.Now().UTC().Add(-time.Minute)
	lancetest.Write(t, dbdir, "ds")
	latest := lancetest.Write(t, dbdir, "ds")
	r := run(t, "", "status", w, "--table", "ds", "--clock-ahead", "2h", "--max-lag", "30m", "-o", "json")
	if r.code != 1 || strings.Contains(r.out, "0001-") {
		t.Fatalf("status -o json: exit %d, a year-1 time or not behind:\n%s%s", r.code, r.out, r.err)
	}
	var st struct {
		Tables []struct {
			Health   string `json:"health"`
			Since    string `json:"prunable_since"`
			Prunable int    `json:"prunable_versions"`
		} `json:"tables"`
	}
	if err := json.Unmarshal([]byte(r.out), &st); err != nil || len(st.Tables) != 1 {
		t.Fatalf("status: %v\n%s", err, r.out)
	}
	since, err := time.Parse(time.RFC3339, st.Tables[0].Since)
	if err != nil || since.Before(start.Add(time.Hour)) || since.After(time.Now().Add(time.Hour+time.Minute)) || st.Tables[0].Health != "behind" || st.Tables[0].Prunable == 0 {
		t.Fatalf("status: since %s (want the writes' time plus 1h grace, after %s): %+v", st.Tables[0].Since, start.Add(time.Hour), st.Tables[0])
	}
	r = run(t, "", "status", w, "--table", "ds", "--clock-ahead", "2h", "--max-lag", "30m")
	if r.code != 1 || strings.Contains(r.out, "0001-") || !regexpMatch(`(?m)^ds +lance +behind +`, r.out) ||
		!strings.Contains(r.out, "ds: behind: ") || !strings.Contains(r.out, "waiting since "+st.Tables[0].Since) {
		t.Fatalf("status: exit %d\n%s", r.code, r.out)
	}
	if dry := ok(t, "", "maintain", w, "--table", "ds", "--dry-run", "--clock-ahead", "2h", "-o", "json"); strings.Contains(dry, "0001-") {
		t.Fatalf("maintain --dry-run: a year-1 time:\n%s", dry)
	}

	// Medium 5: LanceDB restores a version.
	restored := lanceRestore(t, dbdir, "ds", latest-1)
	r = run(t, "", "status", w, "--table", "ds", "--clock-ahead", "2h")
	wantWhy := fmt.Sprintf("version %d is a LanceDB restore (or clone), and tablekeep does not prune across one", restored)
	if r.code != 1 || !regexpMatch(`(?m)^ds +lance +not pruned `, r.out) || !strings.Contains(r.out, "ds: not pruned: "+wantWhy) ||
		!strings.Contains(r.out, "LanceDB's own cleanup") || !strings.Contains(r.out, "the dataset has 2 tags") || !strings.Contains(r.out, "until they are deleted") {
		t.Fatalf("status after a restore: exit %d\n%s%s", r.code, r.out, r.err)
	}
	r = run(t, "", "maintain", w, "--table", "ds", "--clock-ahead", "2h")
	if r.code != 1 || !strings.Contains(r.out, wantWhy) {
		t.Fatalf("maintain after a restore: exit %d\n%s%s", r.code, r.out, r.err)
	}
	copyDir := filepath.Join(dir, "copy.lance")
	if err := os.CopyFS(copyDir, os.DirFS(ds)); err != nil {
		t.Fatal(err)
	}
	fails(t, 1, fmt.Sprintf("copy.lance: refused, nothing registered: the latest version is a restore, version %d is a LanceDB restore", restored), "",
		"register", "copy", "copy.lance", w, "--format", "lance")
}

// recBar records what a pass shows on a terminal's progress bars.
type recBar struct {
	desc     string
	total    int
	added    int
	describe []string
	finished bool
}

func (b *recBar) Add(n int) error   { b.added += n; return nil }
func (b *recBar) Finish() error     { b.finished = true; return nil }
func (b *recBar) Describe(s string) { b.describe = append(b.describe, s) }
func (b *recBar) String() string {
	return fmt.Sprintf("%s %d/%d %v", b.desc, b.added, b.total, b.describe)
}
func recBars(bars *[]*recBar) func(string, int) progress.Bar {
	return func(desc string, total int) progress.Bar {
		b := &recBar{desc: desc, total: total}
		*bars = append(*bars, b)
		return b
	}
}

// TestDryRunShowsPlanningProgress is issue 22 Medium 9: a dry run's
// cleanup planning (reading the change records of every prunable range)
// has a bar counting the versions read, naming the table and the range,
// where it had none (a blank terminal for seconds on a long backlog).
func TestDryRunShowsPlanningProgress(t *testing.T) {
	t.Setenv("TABLEKEEP_WAREHOUSE", "")
	dir := t.TempDir()
	tbl := filepath.Join(dir, "events")
	ok(t, "", "create", "--table", tbl, "--schema", "name:utf8,uri:utf8", "--key", "name")
	for i := range 30 {
		ok(t, fmt.Sprintf("{\"name\":\"k%d\",\"uri\":\"u%d\"}\n", i%4, i), "upsert", "--table", tbl)
	}
	ok(t, "", "register", "events", "events", "--warehouse", dir, "--keep-last", "3")
	app := &App{Stdout: io.Discard, Stderr: io.Discard, Logger: slog.New(slog.DiscardHandler)}
	w, err := openWarehouse(t.Context(), app, warehouseFlags{URI: dir, ahead: 2 * time.Hour}, openMode{})
	if err != nil {
		t.Fatal(err)
	}
	var bars []*recBar
	rep, err := w.pass(t.Context(), passOptions{DryRun: true, Tables: []string{"events"}, Steps: allSteps, Progress: recBars(&bars)})
	if err != nil {
		t.Fatal(err)
	}
	var plan *recBar
	for _, b := range bars {
		if b.desc == "plan cleanup" {
			plan = b
		}
	}
	ranges := rep.Run.Tables[0].Prune.Ranges
	if plan == nil || len(ranges) == 0 {
		t.Fatalf("no planning bar (bars %v) or nothing to plan (%d ranges)", bars, len(ranges))
	}
	versions := 0
	for _, rg := range ranges {
		versions += int(rg.To - rg.From + 1)
	}
	if plan.total != versions || plan.added != versions || !plan.finished || len(plan.describe) != len(ranges) ||
		plan.describe[0] != fmt.Sprintf("plan cleanup events %d-%d", ranges[0].From, ranges[0].To) {
		t.Fatalf("planning bar %v: want %d versions over %d ranges, each named", plan, versions, len(ranges))
	}
}

// TestRound3Lows: issue 22's Lows that are flags, plurals and wording:
// --parallel 0 and -3, --lock-table / --queue-url on a local warehouse,
// --key-range a..b..c, completion tcsh are usage errors (exit 2); schema
// suggests describe; unregister -o json prints JSON; one of a thing is
// singular; sweep rows show no LATEST or FLOOR; the sweep's files are
// "unreferenced", not "orphans"; a sweep dry run prints no empty sections.
func TestRound3Lows(t *testing.T) {
	for _, k := range []string{"TABLEKEEP_WAREHOUSE", "TABLEKEEP_LOCK_TABLE", "TABLEKEEP_TABLE"} {
		t.Setenv(k, "")
	}
	t.Setenv(EnvAllowClockAhead, "test")
	dir := t.TempDir()
	tbl := filepath.Join(dir, "t")
	ok(t, "", "create", "--table", tbl, "--schema", "name:utf8", "--key", "name", "--format", "2")
	ok(t, "{\"name\":\"a\"}\n", "upsert", "--table", tbl)
	if err := os.WriteFile(filepath.Join(tbl, "data", "00000000deadbeef.parquet"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	w := "--warehouse=" + dir
	ok(t, "", "register", "t", "t", w)
	for _, c := range []struct {
		want string
		args []string
	}{
		{"--parallel 0: read at least 1 table at once", []string{"status", w, "--parallel", "0"}},
		{"--parallel -3: read at least 1 table at once", []string{"status", w, "--parallel", "-3"}},
		{"--lock-table and --queue-url are for s3:// warehouses", []string{"maintain", w, "--lock-table", "locks"}},
		{"--lock-table and --queue-url are for s3:// warehouses", []string{"prune", w, "--queue-url", "https://sqs.us-east-1.amazonaws.com/1/q"}},
		{`--key-range "a..b..c": want LO..HI`, []string{"scan", "--table", tbl, "--key-range", "a..b..c"}},
		{"completion tcsh: unknown shell: want bash, zsh, fish or powershell", []string{"completion", "tcsh"}},
		{`unknown command "schema" for "tablekeep": did you mean describe?`, []string{"schema"}},
	} {
		fails(t, 2, c.want, "", c.args...)
	}
	var u map[string]any
	if err := json.Unmarshal([]byte(ok(t, "", "unregister", "t", w, "-o", "json")), &u); err != nil || u["unregistered"] != "t" {
		t.Fatalf("unregister -o json: %v %v", u, err)
	}
	ok(t, "", "register", "t", "t", w)
	out := ok(t, "", "sweep", w, "--dry-run", "--clock-ahead", "2h")
	if !regexpMatch(`(?m)^t +0 +- +- +0 +0 +1 +1 B`, out) || !strings.Contains(out, "  sweep: 1 unreferenced file (1 B)") ||
		!strings.Contains(out, "would delete 1 key,") || strings.Contains(out, "_stats:") || strings.Contains(out, "_registry:") {
		t.Fatalf("sweep --dry-run:\n%s", out)
	}
	// A corrupt manifest: the table's path and the version, not only the
	// inverted key.
	bad := filepath.Join(dir, "bad")
	ok(t, "", "create", "--table", bad, "--schema", "name:utf8", "--key", "name")
	ok(t, "{\"name\":\"a\"}\n", "upsert", "--table", bad)
	if err := os.WriteFile(filepath.Join(bad, "_versions", "18446744073709551613.manifest"), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	fails(t, 1, bad+": _versions/18446744073709551613.manifest (version 2): corrupt manifest", "", "scan", "--table", bad)
	out = ok(t, "", "sweep", w, "--clock-ahead", "2h")
	if !regexpMatch(`(?m)^t +0 +- +- +0 +1 +1 B +1 unreferenced file swept$`, out) || strings.Contains(out, "orphan") ||
		!strings.Contains(out, "deleted 1 key (1 B), 0 versions pruned; cleanup: 0 messages handled") {
		t.Fatalf("sweep:\n%s", out)
	}
	// compact plans no pruning: no kept versions (it said keep-last
	// 2147483647), and its note says nothing about a sweep.
	if out := ok(t, "", "compact", w, "--dry-run"); strings.Contains(out, "2147483647") || strings.Contains(out, "keep ") {
		t.Fatalf("compact --dry-run:\n%s", out)
	}
	if out := ok(t, "", "compact", w); strings.Contains(out, "swept") || !strings.Contains(out, "fragments rewritten") {
		t.Fatalf("compact:\n%s", out)
	}
}

// TestVersionStamp: without Go's VCS stamp (go test has none, nor a build
// with GOFLAGS=-buildvcs=false), --version shows the commit make build
// stamps in (Makefile VERSION_STAMP).
func TestVersionStamp(t *testing.T) {
	old := buildStamp
	t.Cleanup(func() { buildStamp = old })
	buildStamp = "commit 0123456789ab+dirty, 2026-12-01T21:00:00Z"
	if v := buildVersion(); !strings.Contains(v, "(commit 0123456789ab") {
		t.Fatalf("buildVersion %q lacks the stamp", v)
	}
}

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
