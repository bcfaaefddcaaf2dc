package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

type statusDoc struct {
	Tables []tableStatus `json:"tables"`
}

func statusOfTable(t *testing.T, dir, name string, args ...string) tableStatus {
	t.Helper()
	var doc statusDoc
	out := ok(t, "", append([]string{"status", "--warehouse", dir, "-o", "json"}, args...)...)
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for _, r := range doc.Tables {
		if r.Table == name {
			return r
		}
	}
	t.Fatalf("no %s in %s", name, out)
	return tableStatus{}
}

// A table with 26 versions (25 upserts over 6 names): status before and
// after maintenance, and the dry-run plan with its keys and bytes.
func TestStatusAndDryRunPlan(t *testing.T) {
	t.Setenv(EnvAllowClockAhead, "test") // --clock-ahead below
	dir := t.TempDir()
	tbl := filepath.Join(dir, "reg")
	ok(t, "", "create", "--table", tbl, "--schema", "name:utf8,uri:utf8", "--key", "name", "--table-format", "2")
	for i := range 25 {
		ok(t, fmt.Sprintf("{\"name\":\"k%d\",\"uri\":\"u%d\"}\n", i%6, i), "upsert", "--table", tbl, "--format", "jsonl")
	}
	ok(t, "", "register", "reg", "reg", "--warehouse", dir)
	fails(t, 2, "--warehouse is required", "", "status")

	// An orphan data file: garbage once older than the grace window.
	orphan := filepath.Join(tbl, "data", "00000000deadbeef.parquet")
	if err := os.WriteFile(orphan, make([]byte, 123), 0o644); err != nil {
		t.Fatal(err)
	}
	st := statusOfTable(t, dir, "reg")
	if st.Versions != 26 || st.Unreclaimed != 0 || st.Fragments != 6 || st.SmallFrags != 6 || st.SmallRatio != 1 ||
		st.GarbageBytes != 0 || st.LastCompaction != "" || st.LastCleanup != "" || st.Rows != 6 {
		t.Fatalf("status before: %+v", st)
	}
	if st.PrunableNow != 0 || st.PrunableLater != 16 || st.PrunableAt == "" || st.Compactable != 6 || st.CompactGroups != 1 ||
		st.Health != "ok" || st.Policy.KeepLast != 10 || st.Policy.Grace != "1h" {
		t.Fatalf("status before, backlog: %+v", st)
	}
	if st := statusOfTable(t, dir, "reg", "--clock-ahead", "2h"); st.GarbageFiles != 1 || st.GarbageBytes != 123 ||
		st.PrunableNow != 16 || st.PrunableLater != 0 || st.Health != "ok" {
		t.Fatalf("garbage: %+v", st)
	}
	human := ok(t, "", "status", "--warehouse", dir, "--clock-ahead", "2h")
	lines := strings.Split(strings.TrimSpace(human), "\n")
	if !regexp.MustCompile(`^TABLE +FORMAT +HEALTH +VERSIONS +PRUNABLE +COMPACTABLE +GARBAGE +LAST COMPACTION +LAST CLEANUP +POLICY$`).MatchString(lines[0]) {
		t.Fatalf("header: %q", lines[0])
	}
	var regLine string
	for _, l := range lines {
		if strings.HasPrefix(l, "reg ") {
			regLine = l
		}
	}
	if !regexp.MustCompile(`^reg +tablekeep +ok +26 +16 +6 of 6 +123 B +never +never +keep 10, grace 1h$`).MatchString(regLine) {
		t.Fatalf("status line: %q\n%s", regLine, human)
	}
	col := strings.Index(lines[0], "VERSIONS")
	for _, l := range lines[1:] {
		if l[col-1] != ' ' || l[col] == ' ' {
			t.Fatalf("columns not aligned:\n%s", human)
		}
	}

	// Dry run, JSON with keys: every key listed exists, and the bytes are
	// the files' sizes on disk.
	out := ok(t, "", "maintain", "--warehouse", dir, "--dry-run", "--clock-ahead", "2h", "--keys", "-o", "json")
	var plan maintainOut
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	var reg *tableJSON
	for i := range plan.Tables {
		if plan.Tables[i].Table == "reg" {
			reg = &plan.Tables[i]
		}
	}
	if reg == nil || len(reg.Cleanup) != 1 || reg.Sweep == nil {
		t.Fatalf("plan: %s", out)
	}
	r := reg.Cleanup[0]
	// The plan models the compaction's commit (version 27): keep-last 10
	// keeps 18-27. Range 1-17 reads change records 2-18; versions 8-18
	// replaced a row, each removing one one-row data file. Manifests 1-17,
	// change records 1-18.
	if r.From != 1 || r.To != 17 || r.Versions != 17 || r.DataKeys != 11 || r.MetaKeys != 35 || len(r.Keys) != 46 {
		t.Fatalf("cleanup range %+v", r)
	}
	var size int64
	for _, k := range r.Keys {
		fi, err := os.Stat(filepath.Join(dir, k))
		if err != nil {
			t.Fatalf("planned key %s: %v", k, err)
		}
		size += fi.Size()
	}
	if r.DataBytes+r.MetaBytes != size {
		t.Fatalf("planned bytes %d+%d, on disk %d", r.DataBytes, r.MetaBytes, size)
	}
	if reg.Sweep.Keys != 1 || reg.Sweep.Bytes != 123 || len(reg.Sweep.List) != 1 || reg.Sweep.List[0] != "reg/data/00000000deadbeef.parquet" {
		t.Fatalf("sweep plan %+v", reg.Sweep)
	}
	if reg.DeleteKeys != 47 || reg.DeleteBytes != size+123 {
		t.Fatalf("totals %d keys %d bytes", reg.DeleteKeys, reg.DeleteBytes)
	}

	// Dry run, human.
	human = ok(t, "", "maintain", "--warehouse", dir, "--dry-run", "--clock-ahead", "2h")
	for _, want := range []string{
		"DELETE KEYS", "\nreg:\n", "  compact group 1: 6 fragments,",
		fmt.Sprintf("  cleanup 1-17: 17 versions; 11 data/deletion files (%s), 35 manifests and change records (%s)",
			shortBytes(r.DataBytes), shortBytes(r.MetaBytes)),
		"  sweep: 1 unreferenced file (123 B)", "dry run: would delete 47 keys",
	} {
		if !strings.Contains(human, want) {
			t.Fatalf("dry-run output lacks %q:\n%s", want, human)
		}
	}
	if !regexp.MustCompile(`(?m)^reg +1 +27 +18 +17 +1 +47 +`).MatchString(human) {
		t.Fatalf("dry-run table row:\n%s", human)
	}
	if st := statusOfTable(t, dir, "reg"); st.Versions != 26 {
		t.Fatalf("dry run changed the table: %+v", st)
	}

	// Maintained: versions to keep-last, one fragment, orphan swept, and
	// both timestamps set.
	ok(t, "", "maintain", "--warehouse", dir, "--clock-ahead", "2h")
	st = statusOfTable(t, dir, "reg", "--clock-ahead", "2h")
	if st.Versions != 10 || st.Unreclaimed != 0 || st.Fragments != 1 || st.GarbageBytes != 0 || st.LastCompaction == "" || st.LastCleanup == "" {
		t.Fatalf("status after: %+v", st)
	}
}
