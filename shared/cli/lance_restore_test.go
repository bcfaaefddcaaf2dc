package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/lance/lancetest"
)

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

// TestLanceFormatTagsAndRestore is issue 22 High 2 and Medium 4 and 5 on a dataset
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
func TestLanceFormatTagsAndRestore(t *testing.T) {
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
	want := ds + " is a Lance dataset: table commands read tablekeep tables; read it with LanceDB (describe, files and lease take it; register --table-format lance maintains it)"
	for _, cmd := range [][]string{{"scan"}, {"versions", "--long"}, {"get", "x"}, {"stats"}, {"tags"}, {"export", "--out", filepath.Join(dir, "x.parquet")}} {
		fails(t, 1, want, "", append(cmd, "--table", ds)...)
	}
	fails(t, 1, "lance/ds.lance is a Lance dataset: register it with --table-format lance", "", "register", "ds", "lance/ds.lance", w)
	fails(t, 1, "tk is a tablekeep table, not a Lance dataset: register it without --table-format lance", "", "register", "tk", "tk", w, "--table-format", "lance")
	if out := ok(t, "", "describe", "--table", ds); !strings.Contains(out, "lance") {
		t.Fatalf("describe:\n%s", out)
	}
	// Issue 32: create on a Lance dataset says what is there (it said
	// "table already exists"), and describe -o json has no empty schema
	// and writer grace (tablekeep's notions).
	fails(t, 1, ds+" is a Lance dataset, not a place for a new table", "", "create", "--table", ds, "--schema", "name:utf8")
	if out := ok(t, "", "describe", "--table", ds, "-o", "json"); strings.Contains(out, `"schema"`) || strings.Contains(out, `"writer_grace"`) {
		t.Fatalf("describe -o json of a Lance dataset: %s", out)
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
	if out := ok(t, "", "register", "ds", "lance/ds.lance", w, "--table-format", "lance", "--grace", "1h", "--keep-last", "3", "--target-rows", "5000", "--deleted-threshold", "0.25"); !strings.HasSuffix(out, "; keep-last 3, grace 1h, target 5000 rows, deleted-threshold 0.25)\n") {
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
		!strings.Contains(r.out, "ds: behind: ") || !strings.Contains(r.out, "prunable since "+st.Tables[0].Since) {
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
		"register", "copy", "copy.lance", w, "--table-format", "lance")
}
