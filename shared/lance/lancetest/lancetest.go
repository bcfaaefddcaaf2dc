package lancetest

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Dir is the fixture's directory (found from this file's path).
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "testdata", "lancedb")
}

var once struct {
	sync.Once
	err string
}

// Fixture makes sure node and the fixture's npm dependencies are there
// (`npm ci` from the lock file, once, when the lock file changed).
func Fixture(t testing.TB) {
	t.Helper()
	once.Do(func() { once.err = install() })
	if once.err != "" {
		t.Fatal(once.err)
	}
}

func install() string {
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			return tool + " not found in PATH: the Lance verification runs LanceDB itself. " +
				"Install Node.js 18 or later with npm (Debian: apt-get install nodejs npm), then rerun."
		}
	}
	dir := Dir()
	lock, err := os.ReadFile(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		return "read the fixture's lock file: " + err.Error()
	}
	stamp := filepath.Join(dir, "node_modules", ".tablekeep-lock")
	if old, err := os.ReadFile(stamp); err == nil && bytes.Equal(old, lock) {
		return ""
	}
	cmd := exec.Command("npm", "ci", "--omit=optional", "--no-audit", "--no-fund", "--loglevel=error")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return "npm ci in " + dir + " failed (the npm registry must be reachable the first time): " + err.Error() + "\n" + string(out)
	}
	if err := os.WriteFile(stamp, lock, 0o644); err != nil {
		return err.Error()
	}
	return ""
}

// Node runs the fixture script with extra environment variables and
// decodes its JSON answer into out (if not nil).
func Node(t testing.TB, env []string, out any, args ...string) {
	t.Helper()
	Fixture(t)
	dir := Dir()
	cmd := exec.CommandContext(context.Background(), "node", append([]string{filepath.Join(dir, "fixture.mjs")}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "RUST_LOG=error", "LANCE_LOG=error"), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node fixture.mjs %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	if out != nil {
		if err := json.Unmarshal(stdout.Bytes(), out); err != nil {
			t.Fatalf("node fixture.mjs %s: decode %q: %v", strings.Join(args, " "), stdout.String(), err)
		}
	}
}

// Created is what `create` reports.
type Created struct {
	Versions []struct {
		Version uint64 `json:"version"`
		TS      int64  `json:"ts"`
	} `json:"versions"`
	Tags   map[string]uint64 `json:"tags"`
	Latest uint64            `json:"latest"`
}

// Row is one row of the fixture's table.
type Row struct {
	ID   int64   `json:"id"`
	Name string  `json:"name"`
	Val  float64 `json:"val"`
}

// Dumped is what `dump` reports: every listed version checked out and read.
type Dumped struct {
	Versions []uint64          `json:"versions"`
	Rows     map[string][]Row  `json:"rows"`
	Tags     map[string]uint64 `json:"tags"`
}

// Create has LanceDB create table name under dbdir (<dbdir>/<name>.lance)
// with commits rounds of the seed's churn (delete+add, mergeInsert,
// deletions, a btree index, two tags); scheme "v1" asks for plain manifest
// names, "" for the inverted ones LanceDB 0.31 writes.
func Create(t testing.TB, dbdir, name string, commits int, scheme string) Created {
	t.Helper()
	var c Created
	args := []string{"create", dbdir, name, strconv.Itoa(commits)}
	if scheme != "" {
		args = append(args, scheme)
	}
	Node(t, nil, &c, args...)
	return c
}

// Dump has LanceDB check out every listed version of the table and read it.
func Dump(t testing.TB, dbdir, name string) Dumped {
	t.Helper()
	var d Dumped
	Node(t, nil, &d, "dump", dbdir, name)
	return d
}

// Write has LanceDB upsert once more on the latest version; it returns the
// new latest version.
func Write(t testing.TB, dbdir, name string) uint64 {
	t.Helper()
	var w struct {
		Latest uint64 `json:"latest"`
	}
	Node(t, nil, &w, "write", dbdir, name)
	return w.Latest
}

// Restore has LanceDB restore version v (checkout(v).restore()): a new
// latest version with v's data. It returns the new latest version.
func Restore(t testing.TB, dbdir, name string, v uint64) uint64 {
	t.Helper()
	var r struct {
		Latest uint64 `json:"latest"`
	}
	Node(t, nil, &r, "restore", dbdir, name, strconv.FormatUint(v, 10))
	return r.Latest
}

// CheckRetained checks a dataset after maintenance against before: LanceDB
// lists exactly the versions of before that keep keeps, and each of them
// reads exactly the rows it read before.
func CheckRetained(t testing.TB, before, after Dumped, keep func(v uint64) bool) {
	t.Helper()
	var want []uint64
	for _, v := range before.Versions {
		if keep(v) {
			want = append(want, v)
		}
	}
	if !slices.Equal(after.Versions, want) {
		t.Fatalf("LanceDB lists versions %v, want %v (of %v before)", after.Versions, want, before.Versions)
	}
	for _, v := range after.Versions {
		k := strconv.FormatUint(v, 10)
		if !slices.Equal(after.Rows[k], before.Rows[k]) {
			t.Errorf("version %d reads %d rows, %d before", v, len(after.Rows[k]), len(before.Rows[k]))
		}
	}
}

// AtOrAbove keeps the versions at or above floor and the tagged ones.
func AtOrAbove(floor uint64, tags map[string]uint64) func(uint64) bool {
	return func(v uint64) bool {
		if v >= floor {
			return true
		}
		for _, tv := range tags {
			if tv == v {
				return true
			}
		}
		return false
	}
}
