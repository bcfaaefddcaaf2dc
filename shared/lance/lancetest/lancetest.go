package lancetest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// Release is a pinned LanceDB release (npm @lancedb/lancedb): each has its
// own fixture project under testdata/ (package.json and package-lock.json)
// and runs the same fixture.mjs.
type Release string

// The pinned releases.
const (
	// Release031 is LanceDB 0.31.0 (Lance file 2.1 by default), in
	// testdata/lancedb, where fixture.mjs lives.
	Release031 Release = "0.31.0"
	// Release039 is LanceDB 0.39.0 (Lance 12: file 2.2 by default, mixed
	// file versions with feature flag 256), in testdata/lancedb-0.39.
	Release039 Release = "0.39.0"
	// Default is the release the package-level helpers use.
	Default = Release031
)

// Releases lists every pinned release, oldest first: what the suites that
// read or write Lance files run against.
func Releases() []Release { return []Release{Release031, Release039} }

// fixtures is each release's project directory under testdata/ and
// whether `npm ci` accepts its lock file (0.39's lock lacks the platform
// packages of other systems, which the registry mirror here does not
// serve, so npm ci calls it out of sync: it is installed with npm install,
// which follows the lock, and the lock is checked unchanged afterwards).
func (r Release) fixture() (dir string, ci bool, index int) {
	switch r {
	case Release031:
		return "lancedb", true, 0
	case Release039:
		return "lancedb-0.39", false, 1
	}
	panic(fmt.Sprintf("lancetest: no fixture for LanceDB %q (pinned: %v)", string(r), Releases()))
}

func testdata() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "testdata")
}

// Dir is the release's fixture project directory.
func (r Release) Dir() string {
	d, _, _ := r.fixture()
	return filepath.Join(testdata(), d)
}

// Script is fixture.mjs as the release runs it: the file itself for the
// default release, a copy made at install in the release's directory for
// the others (node resolves @lancedb/lancedb next to the script).
func (r Release) Script() string { return filepath.Join(r.Dir(), "fixture.mjs") }

// Dir is the default release's fixture directory.
func Dir() string { return Default.Dir() }

// installs is each release's install, once per process.
var installs [2]struct {
	sync.Once
	err string
}

// Fixture makes sure node and the fixture's npm dependencies are there for
// each release given (the default release if none): installed from the
// lock file once, and again when the lock file changed.
func Fixture(t testing.TB, releases ...Release) {
	t.Helper()
	if len(releases) == 0 {
		releases = []Release{Default}
	}
	for _, r := range releases {
		r.Fixture(t)
	}
}

// Fixture makes sure node and the release's npm dependencies are there.
func (r Release) Fixture(t testing.TB) {
	t.Helper()
	_, _, i := r.fixture()
	in := &installs[i]
	in.Do(func() { in.err = r.install() })
	if in.err != "" {
		t.Fatal(in.err)
	}
}

func (r Release) install() string {
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			return tool + " not found in PATH: the Lance verification runs LanceDB itself. " +
				"Install Node.js 18 or later with npm (Debian: apt-get install nodejs npm), then rerun."
		}
	}
	dir := r.Dir()
	// Test processes of several packages install at once: one at a time.
	unlock, err := lockDir(dir)
	if err != nil {
		return "lock the fixture " + dir + ": " + err.Error()
	}
	defer unlock()
	if err := r.copyScript(); err != nil {
		return "copy fixture.mjs for LanceDB " + string(r) + ": " + err.Error()
	}
	lockFile := filepath.Join(dir, "package-lock.json")
	lock, err := os.ReadFile(lockFile)
	if err != nil {
		return "read the fixture's lock file: " + err.Error()
	}
	stamp := filepath.Join(dir, "node_modules", ".tablekeep-lock")
	if old, err := os.ReadFile(stamp); err == nil && bytes.Equal(old, lock) {
		return ""
	}
	_, ci, _ := r.fixture()
	verb := "install"
	if ci {
		verb = "ci"
	}
	cmd := exec.Command("npm", verb, "--omit=optional", "--no-audit", "--no-fund", "--loglevel=error")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return "npm " + verb + " in " + dir + " failed (the npm registry must be reachable the first time): " + err.Error() + "\n" + string(out)
	}
	if after, err := os.ReadFile(lockFile); err != nil || !bytes.Equal(after, lock) {
		_ = os.WriteFile(lockFile, lock, 0o644)
		return "npm " + verb + " in " + dir + " changed package-lock.json: the lock file does not pin what package.json asks for; " +
			"regenerate it there (npm install --omit=optional) and commit it"
	}
	if err := os.WriteFile(stamp, lock, 0o644); err != nil {
		return err.Error()
	}
	return ""
}

// copyScript writes the default release's fixture.mjs into another
// release's directory when it differs (through a rename: a process
// running the old copy keeps reading it).
func (r Release) copyScript() error {
	if r == Default {
		return nil
	}
	src, err := os.ReadFile(Default.Script())
	if err != nil {
		return err
	}
	if old, err := os.ReadFile(r.Script()); err == nil && bytes.Equal(old, src) {
		return nil
	}
	tmp := r.Script() + ".tmp"
	if err := os.WriteFile(tmp, src, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, r.Script())
}

// lockDir holds an exclusive flock on dir/.install.lock until unlock.
func lockDir(dir string) (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(dir, ".install.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
}

// Command is the release's fixture script as a command with extra
// environment variables, not started (for a writer running beside a test).
func (r Release) Command(t testing.TB, env []string, args ...string) *exec.Cmd {
	t.Helper()
	r.Fixture(t)
	cmd := exec.CommandContext(context.Background(), "node", append([]string{r.Script()}, args...)...)
	cmd.Dir = r.Dir()
	cmd.Env = append(append(os.Environ(), "RUST_LOG=error", "LANCE_LOG=error"), env...)
	return cmd
}

// Node runs the release's fixture script with extra environment variables
// and decodes its JSON answer into out (if not nil).
func (r Release) Node(t testing.TB, env []string, out any, args ...string) {
	t.Helper()
	cmd := r.Command(t, env, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("LanceDB %s: node fixture.mjs %s: %v\n%s", r, strings.Join(args, " "), err, stderr.String())
	}
	if out != nil {
		if err := json.Unmarshal(stdout.Bytes(), out); err != nil {
			t.Fatalf("LanceDB %s: node fixture.mjs %s: decode %q: %v", r, strings.Join(args, " "), stdout.String(), err)
		}
	}
}

// Node runs the default release's fixture script.
func Node(t testing.TB, env []string, out any, args ...string) {
	t.Helper()
	Default.Node(t, env, out, args...)
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
func (r Release) Create(t testing.TB, dbdir, name string, commits int, scheme string) Created {
	t.Helper()
	var c Created
	args := []string{"create", dbdir, name, strconv.Itoa(commits)}
	if scheme != "" {
		args = append(args, scheme)
	}
	r.Node(t, nil, &c, args...)
	return c
}

// Dump has LanceDB check out every listed version of the table and read it.
func (r Release) Dump(t testing.TB, dbdir, name string) Dumped {
	t.Helper()
	var d Dumped
	r.Node(t, nil, &d, "dump", dbdir, name)
	return d
}

// Write has LanceDB upsert once more on the latest version; it returns the
// new latest version.
func (r Release) Write(t testing.TB, dbdir, name string) uint64 {
	t.Helper()
	var w struct {
		Latest uint64 `json:"latest"`
	}
	r.Node(t, nil, &w, "write", dbdir, name)
	return w.Latest
}

// Restore has LanceDB restore version v (checkout(v).restore()): a new
// latest version with v's data. It returns the new latest version.
func (r Release) Restore(t testing.TB, dbdir, name string, v uint64) uint64 {
	t.Helper()
	var res struct {
		Latest uint64 `json:"latest"`
	}
	r.Node(t, nil, &res, "restore", dbdir, name, strconv.FormatUint(v, 10))
	return res.Latest
}

// Create is Default.Create.
func Create(t testing.TB, dbdir, name string, commits int, scheme string) Created {
	t.Helper()
	return Default.Create(t, dbdir, name, commits, scheme)
}

// Dump is Default.Dump.
func Dump(t testing.TB, dbdir, name string) Dumped {
	t.Helper()
	return Default.Dump(t, dbdir, name)
}

// Write is Default.Write.
func Write(t testing.TB, dbdir, name string) uint64 {
	t.Helper()
	return Default.Write(t, dbdir, name)
}

// Restore is Default.Restore.
func Restore(t testing.TB, dbdir, name string, v uint64) uint64 {
	t.Helper()
	return Default.Restore(t, dbdir, name, v)
}

// ForEach runs f as a subtest per pinned release, named by the release
// ("0.31.0", "0.39.0").
func ForEach(t *testing.T, f func(t *testing.T, r Release)) {
	t.Helper()
	for _, r := range Releases() {
		t.Run(string(r), func(t *testing.T) { f(t, r) })
	}
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
