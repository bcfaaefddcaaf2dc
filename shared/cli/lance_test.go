package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/lance/lancetest"
)

// withoutSidecar drops tablekeep's sidecar (_tablekeep/) from a listing.
func withoutSidecar(m map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for p, n := range m {
		if !strings.Contains(filepath.ToSlash(p), "/_tablekeep/") {
			out[p] = n
		}
	}
	return out
}

func dirListing(t *testing.T, dir string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		out[p] = fi.Size()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestLanceDatasetCLI: LanceDB writes a dataset (the seed's churn,
// deletions, an index, two tags) into a local warehouse; `register --format
// lance` checks it (a path that is not a dataset, an unknown format and a
// refused dataset are errors that store nothing) and records the format;
// tables, status and describe show it; compact finds nothing to fold
// (LanceDB optimized it); sweep --dry-run lists the old orphan file and sweep deletes only it; maintain --dry-run lists what maintain then deletes, key
// for key; maintain prunes it and LanceDB reads every retained version
// exactly as before, and the latest accepts a write.
func TestLanceDatasetCLI(t *testing.T) {
	t.Setenv(EnvAllowClockAhead, "test")
	dir := t.TempDir()
	dbdir := filepath.Join(dir, "lance")
	c := lancetest.Create(t, dbdir, "ds", 20, "")
	before := lancetest.Dump(t, dbdir, "ds")
	ds := filepath.Join(dbdir, "ds.lance")

	fails(t, 1, "lance/nope: not a Lance dataset (no manifests under lance/nope/_versions/)", "", "register", "ds", "lance/nope", "--warehouse", dir, "--table-format", "lance")
	fails(t, 2, `--table-format "delta": want tablekeep`, "", "register", "ds", "lance/ds.lance", "--warehouse", dir, "--table-format", "delta")
	fails(t, 2, "system table", "", "register", "_stats", "lance/ds.lance", "--warehouse", dir, "--table-format", "lance")
	// A dataset the reader refuses (a branch) is refused with the reason.
	bad := filepath.Join(dir, "bad.lance")
	if err := os.CopyFS(bad, os.DirFS(ds)); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(bad, "_refs", "branches"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bad, "_refs", "branches", "dev.json"), []byte(`{}`), 0o644); err != nil {
		t.Fatal(err)
	}
	fails(t, 1, "refused, nothing registered", "", "register", "bad", "bad.lance", "--warehouse", dir, "--table-format", "lance")
	if out := ok(t, "", "tables", "--warehouse", dir); strings.Contains(out, "bad") {
		t.Fatalf("a refused dataset was registered:\n%s", out)
	}

	out := ok(t, "", "register", "ds", "lance/ds.lance", "--warehouse", dir, "--table-format", "lance", "--grace", "1h", "--keep-last", "3")
	if !strings.Contains(out, "as a lance dataset ("+strconv.Itoa(len(c.Versions))+" versions, latest "+strconv.FormatUint(c.Latest, 10)+", 2 tags;") {
		t.Fatalf("register: %s", out)
	}
	if out := ok(t, "", "tables", "--warehouse", dir); !regexpMatch(`(?m)^ds +lance +lance/ds\.lance/ +3 `, out) || !regexpMatch(`(?m)^_stats +tablekeep `, out) {
		t.Fatalf("tables:\n%s", out)
	}
	if out := ok(t, "", "describe", "--table", ds, "--warehouse", dir); !strings.Contains(out, "format:") || !strings.Contains(out, "lance") ||
		!strings.Contains(out, "registered as:  ds") {
		t.Fatalf("describe:\n%s", out)
	}

	// sweep: an orphan data file 8 days old (past Lance's 7 days) goes,
	// a younger one stays; the dry run lists exactly it.
	files := dirListing(t, ds)
	orphan := func(name string, age time.Duration) {
		p := filepath.Join(ds, "data", name)
		if err := os.WriteFile(p, []byte("orphan"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, time.Now().Add(-age), time.Now().Add(-age)); err != nil {
			t.Fatal(err)
		}
	}
	orphan("0a0a0a0a-old-orphan.lance", 8*24*time.Hour)
	orphan("0b0b0b0b-young-orphan.lance", 6*24*time.Hour)
	withOrphans := dirListing(t, ds)
	if out := ok(t, "", "sweep", "--warehouse", dir, "--table", "ds", "--dry-run", "--keys"); !strings.Contains(out, "data/0a0a0a0a-old-orphan.lance") ||
		strings.Contains(out, "young-orphan") {
		t.Fatalf("sweep --dry-run:\n%s", out)
	}
	if got := dirListing(t, ds); !sameSizes(got, withOrphans) {
		t.Fatalf("sweep --dry-run changed the dataset")
	}
	if out := ok(t, "", "sweep", "--warehouse", dir, "--table", "ds"); !strings.Contains(out, "lance: 1 unreferenced file swept") {
		t.Fatalf("sweep:\n%s", out)
	}
	if err := os.Remove(filepath.Join(ds, "data", "0b0b0b0b-young-orphan.lance")); err != nil {
		t.Fatal(err)
	}
	// compact: LanceDB's optimize folded every fragment (the fixture ends
	// with it) and the index covers them: nothing to fold, no new version
	// (tablekeep's sidecar, which Lance never reads, is written).
	if out := ok(t, "", "compact", "--warehouse", dir, "--table", "ds"); !strings.Contains(out, "lance: 0 fragments folded") {
		t.Fatalf("compact:\n%s", out)
	}
	if got := withoutSidecar(dirListing(t, ds)); !sameSizes(got, files) {
		t.Fatalf("compact or sweep changed the dataset beyond the old orphan")
	}

	// status: the backlog, read-only.
	st := ok(t, "", "status", "--warehouse", dir, "--table", "ds", "--clock-ahead", "2h", "-o", "json")
	var status struct {
		Tables []struct {
			Versions int    `json:"versions"`
			Prunable int    `json:"prunable_versions"`
			Rows     uint64 `json:"rows"`
			Policy   struct {
				Format string `json:"format"`
			} `json:"policy"`
		} `json:"tables"`
	}
	if err := json.Unmarshal([]byte(st), &status); err != nil || len(status.Tables) != 1 {
		t.Fatalf("status: %v %s", err, st)
	}
	floor := c.Latest - 3 + 1
	latestRows := len(before.Rows[strconv.FormatUint(c.Latest, 10)])
	if s := status.Tables[0]; s.Policy.Format != "lance" || s.Versions != len(c.Versions) || s.Prunable != int(floor-1)-countBelow(c.Tags, floor) || s.Rows != uint64(latestRows) {
		t.Fatalf("status %+v (floor %d, tags %v, %d rows)", s, floor, c.Tags, latestRows)
	}
	if out := ok(t, "", "status", "--warehouse", dir, "--table", "ds", "--clock-ahead", "2h"); !regexpMatch(`(?m)^ds +lance +ok `, out) {
		t.Fatalf("status:\n%s", out)
	}
	if got := withoutSidecar(dirListing(t, ds)); !sameSizes(got, files) {
		t.Fatalf("status changed the dataset")
	}

	// maintain --dry-run lists the keys; maintain deletes exactly those.
	dj := ok(t, "", "maintain", "--warehouse", dir, "--table", "ds", "--dry-run", "--keys", "--clock-ahead", "2h", "-o", "json")
	var dry struct {
		Tables []struct {
			Format  string `json:"format"`
			Floor   uint64 `json:"floor"`
			Cleanup []struct {
				Keys []string `json:"keys"`
			} `json:"cleanup"`
		} `json:"tables"`
		DeleteKeys int `json:"delete_keys"`
	}
	if err := json.Unmarshal([]byte(dj), &dry); err != nil || len(dry.Tables) != 1 {
		t.Fatalf("dry run: %v %s", err, dj)
	}
	if dry.Tables[0].Format != "lance" || dry.Tables[0].Floor != floor || dry.DeleteKeys == 0 {
		t.Fatalf("dry run plan: %s", dj)
	}
	if got := withoutSidecar(dirListing(t, ds)); !sameSizes(got, files) {
		t.Fatalf("the dry run changed the dataset")
	}
	var listed []string
	for _, r := range dry.Tables[0].Cleanup {
		listed = append(listed, r.Keys...)
	}
	out = ok(t, "", "maintain", "--warehouse", dir, "--table", "ds", "--clock-ahead", "2h")
	if !strings.Contains(out, "lance: 0 fragments folded") {
		t.Fatalf("maintain:\n%s", out)
	}
	var deleted []string
	now := dirListing(t, ds)
	for p := range files {
		if _, ok := now[p]; !ok {
			rel, _ := filepath.Rel(dir, p)
			deleted = append(deleted, filepath.ToSlash(rel))
		}
	}
	slices.Sort(deleted)
	var listedFiles []string
	for _, k := range listed {
		if strings.HasSuffix(k, "/") || strings.Contains(k, "/_tablekeep/") {
			// An index directory (its files are listed too); the change
			// records the dry run derived in memory, which the run writes
			// and deletes.
			continue
		}
		listedFiles = append(listedFiles, k)
	}
	slices.Sort(listedFiles)
	if !slices.Equal(deleted, listedFiles) {
		t.Fatalf("maintain deleted %d files, the dry run listed %d:\n deleted %v\n listed  %v", len(deleted), len(listedFiles), deleted, listedFiles)
	}

	lancetest.CheckRetained(t, before, lancetest.Dump(t, dbdir, "ds"), lancetest.AtOrAbove(floor, c.Tags))
	latest := lancetest.Write(t, dbdir, "ds")
	written := lancetest.Dump(t, dbdir, "ds")
	if written.Versions[len(written.Versions)-1] != latest {
		t.Fatalf("LanceDB versions after a write: %v", written.Versions)
	}
	// prune alone: the versions the write pushed out of keep-last go; the
	// tagged ones and the newest 3 stay and read as before.
	snap := dirListing(t, ds)
	dp := ok(t, "", "prune", "--warehouse", dir, "--table", "ds", "--dry-run", "--clock-ahead", "2h")
	if !regexpMatch(`(?m)^ds +0 +`+strconv.FormatUint(latest, 10)+` +`+strconv.FormatUint(latest-2, 10)+` +2 +1 `, dp) ||
		!strings.Contains(dp, "keep versions "+strconv.FormatUint(latest-2, 10)+"-"+strconv.FormatUint(latest, 10)+": keep-last 3") {
		t.Fatalf("prune --dry-run:\n%s", dp)
	}
	if !sameSizes(dirListing(t, ds), snap) {
		t.Fatal("prune --dry-run changed the dataset")
	}
	ok(t, "", "prune", "--warehouse", dir, "--table", "ds", "--clock-ahead", "2h")
	lancetest.CheckRetained(t, written, lancetest.Dump(t, dbdir, "ds"), lancetest.AtOrAbove(latest-2, c.Tags))
}

func countBelow(tags map[string]uint64, floor uint64) int {
	seen := map[uint64]bool{}
	for _, v := range tags {
		if v < floor {
			seen[v] = true
		}
	}
	return len(seen)
}

func sameSizes(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func regexpMatch(re, s string) bool { return regexp.MustCompile(re).MatchString(s) }

// TestLanceCompactCLI: on a dataset of LanceDB's one-row writes (a btree
// index, upserts, deletes), `compact --dry-run` lists the groups and
// changes nothing; `compact` folds them in one new version; LanceDB reads
// every version as before, its index queries agree with its scan, and a
// prune-only pass compacts nothing; maintain then prunes the versions the
// compaction superseded and LanceDB reads the latest as before.
func TestLanceCompactCLI(t *testing.T) {
	dir := t.TempDir()
	dbdir := filepath.Join(dir, "lance")
	var m struct {
		Latest uint64 `json:"latest"`
	}
	lancetest.Node(t, nil, &m, "mixed", dbdir, "ds", "16")
	before := lancetest.Dump(t, dbdir, "ds")
	ds := filepath.Join(dbdir, "ds.lance")
	ok(t, "", "register", "ds", "lance/ds.lance", "--warehouse", dir, "--table-format", "lance", "--grace", "1h")
	files := dirListing(t, ds)
	dj := ok(t, "", "compact", "--warehouse", dir, "--table", "ds", "--dry-run", "-o", "json")
	var dry struct {
		Tables []struct {
			Groups int      `json:"compaction_groups"`
			Plan   []string `json:"compaction_plan"`
		} `json:"tables"`
	}
	if err := json.Unmarshal([]byte(dj), &dry); err != nil || len(dry.Tables) != 1 || dry.Tables[0].Groups != 1 || len(dry.Tables[0].Plan) != 1 {
		t.Fatalf("compact --dry-run: %v %s", err, dj)
	}
	if out := ok(t, "", "compact", "--warehouse", dir, "--table", "ds", "--dry-run"); !strings.Contains(out, "compact group 1: fragments ") {
		t.Fatalf("compact --dry-run:\n%s", out)
	}
	if got := dirListing(t, ds); !sameSizes(got, files) {
		t.Fatalf("compact --dry-run changed the dataset")
	}
	if out := ok(t, "", "prune", "--warehouse", dir, "--table", "ds"); strings.Contains(out, "fragments folded") && !strings.Contains(out, "0 fragments folded") {
		t.Fatalf("prune compacted:\n%s", out)
	}
	out := ok(t, "", "compact", "--warehouse", dir, "--table", "ds")
	if !regexpMatch(`lance: [1-9][0-9]* fragments folded`, out) {
		t.Fatalf("compact:\n%s", out)
	}
	after := lancetest.Dump(t, dbdir, "ds")
	if len(after.Versions) != len(before.Versions)+1 {
		t.Fatalf("versions %v after, %v before", after.Versions, before.Versions)
	}
	last := func(d lancetest.Dumped) []lancetest.Row {
		return d.Rows[strconv.FormatUint(d.Versions[len(d.Versions)-1], 10)]
	}
	if !slices.Equal(last(after), last(before)) {
		t.Fatalf("latest reads %v, before %v", last(after), last(before))
	}
	for _, v := range before.Versions {
		k := strconv.FormatUint(v, 10)
		if !slices.Equal(after.Rows[k], before.Rows[k]) {
			t.Fatalf("version %d changed", v)
		}
	}
	var ver struct {
		Bad       []any `json:"bad"`
		Fragments int   `json:"fragments"`
	}
	lancetest.Node(t, nil, &ver, "verify", dbdir, "ds")
	if len(ver.Bad) > 0 || ver.Fragments > 2 {
		t.Fatalf("LanceDB after compact: %+v", ver)
	}
	// The prune pipeline diffs the compaction's version like any other:
	// with the clock 2 h ahead every version but the latest goes, and
	// LanceDB reads the latest as before.
	t.Setenv(EnvAllowClockAhead, "test")
	ok(t, "", "maintain", "--warehouse", dir, "--table", "ds", "--clock-ahead", "2h")
	pruned := lancetest.Dump(t, dbdir, "ds")
	if len(pruned.Versions) >= len(after.Versions) || !slices.Equal(last(pruned), last(before)) {
		t.Fatalf("after maintain: versions %v, latest %v", pruned.Versions, last(pruned))
	}
	lancetest.Node(t, nil, &ver, "verify", dbdir, "ds")
	if len(ver.Bad) > 0 {
		t.Fatalf("LanceDB after maintain: %+v", ver)
	}
}

// TestLanceKeptDeletionsCLI is issue 30 point 1: a LanceDB dataset with a
// FixedSizeList vector column and every tenth row deleted. The first
// maintain folds its two fragments and says it kept the deleted rows and
// why (text and -o json); the second commits nothing (no new version, no
// new file under data/) and says why again.
func TestLanceKeptDeletionsCLI(t *testing.T) {
	dir := t.TempDir()
	dbdir := filepath.Join(dir, "lance")
	lancetest.Node(t, nil, nil, "vecdel", dbdir, "ds", "100", "2")
	ok(t, "", "register", "ds", "lance/ds.lance", "--warehouse", dir, "--table-format", "lance", "--deleted-threshold", "0.05")
	out := ok(t, "", "maintain", "--warehouse", dir, "--table", "ds")
	if !strings.Contains(out, "lance: 2 fragments folded, deleted rows kept: ") {
		t.Fatalf("first maintain:\n%s", out)
	}
	data := filepath.Join(dbdir, "ds.lance", "data")
	versions := filepath.Join(dbdir, "ds.lance", "_versions")
	dataBefore, versionsBefore := dirListing(t, data), dirListing(t, versions)
	var j struct {
		Tables []struct {
			Groups     int    `json:"compaction_groups"`
			Kept       uint64 `json:"deleted_rows_kept"`
			KeptReason string `json:"deleted_rows_kept_reason"`
		} `json:"tables"`
	}
	if err := json.Unmarshal([]byte(ok(t, "", "maintain", "--warehouse", dir, "--table", "ds", "-o", "json")), &j); err != nil {
		t.Fatal(err)
	}
	if len(j.Tables) != 1 || j.Tables[0].Groups != 0 || j.Tables[0].Kept != 20 || !strings.Contains(j.Tables[0].KeptReason, "cannot be dropped") {
		t.Fatalf("second maintain: %+v", j)
	}
	if !sameSizes(dirListing(t, data), dataBefore) || !sameSizes(dirListing(t, versions), versionsBefore) {
		t.Fatalf("the second maintain wrote a data file or a version")
	}
	if out := ok(t, "", "compact", "--warehouse", dir, "--table", "ds"); !strings.Contains(out, "lance: 0 fragments folded, deleted rows kept: ") {
		t.Fatalf("compact:\n%s", out)
	}
}
