package lancetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io/fs"
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
	"time"
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

// CacheTTL is how long a dataset Dataset built is reused. Under a day, so
// that no cached file is near the 7 days after which LanceDB's own cleanup
// treats unreferenced files differently.
const CacheTTL = 20 * time.Hour

// Dataset has the release's fixture script create a dataset in dir (an
// empty directory): `node fixture.mjs cmd dir args...` with extra
// environment variables, its JSON answer decoded into out (if not nil).
// The result is built once and kept in a cache directory
// (os.UserCacheDir()/tablekeep/lancedb/{key}: the key hashes the release,
// its lock file, fixture.mjs, cmd, args and env) for CacheTTL; each call
// copies it into dir, keeping the files' modification times (LanceDB's
// cleanup compares them with the manifests' timestamps). With
// TABLEKEEP_LANCEDB_CACHE=off, or no cache directory, it runs the script
// into dir every time.
func (r Release) Dataset(t testing.TB, dir string, env []string, out any, cmd string, args ...string) {
	t.Helper()
	r.Fixture(t)
	runArgs := append([]string{cmd, dir}, args...)
	root, err := os.UserCacheDir()
	if err != nil || os.Getenv("TABLEKEEP_LANCEDB_CACHE") == "off" {
		r.Node(t, env, out, runArgs...)
		return
	}
	key, err := r.cacheKey(cmd, args, env)
	if err != nil {
		t.Fatal(err)
	}
	root = filepath.Join(root, "tablekeep", "lancedb")
	entry := filepath.Join(root, key)
	answer, err := os.ReadFile(filepath.Join(entry, "answer.json"))
	if info, serr := os.Stat(filepath.Join(entry, "answer.json")); err != nil || serr != nil || time.Since(info.ModTime()) >= CacheTTL {
		answer = r.buildCached(t, root, entry, env, cmd, args)
	}
	if err := CopyTree(filepath.Join(entry, "db"), dir); err != nil {
		t.Fatalf("copy the cached LanceDB %s dataset %s: %v", r, entry, err)
	}
	if out != nil {
		if err := json.Unmarshal(answer, out); err != nil {
			t.Fatalf("LanceDB %s: cached fixture.mjs %s: decode %q: %v", r, cmd, answer, err)
		}
	}
}

// cacheKey hashes what a dataset built by cmd depends on.
func (r Release) cacheKey(cmd string, args, env []string) (string, error) {
	h := sha256.New()
	for _, f := range []string{filepath.Join(r.Dir(), "package-lock.json"), r.Script()} {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%d:", len(b))
		h.Write(b)
	}
	env = slices.Sorted(slices.Values(env))
	for _, part := range [][]string{{string(r), cmd}, args, env} {
		fmt.Fprintf(h, "%q;", part)
	}
	return fmt.Sprintf("%s-%s-%x", r, cmd, h.Sum(nil)[:12]), nil
}

// buildCached runs the script into a new directory under root and renames
// it to entry (replacing an expired one); a process that built the same
// entry first wins, its copy is as good.
func (r Release) buildCached(t testing.TB, root, entry string, env []string, cmd string, args []string) []byte {
	t.Helper()
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	tmp, err := os.MkdirTemp(root, ".build-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	db := filepath.Join(tmp, "db")
	if err := os.Mkdir(db, 0o755); err != nil {
		t.Fatal(err)
	}
	var answer json.RawMessage
	r.Node(t, env, &answer, append([]string{cmd, db}, args...)...)
	if err := os.WriteFile(filepath.Join(tmp, "answer.json"), answer, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(entry); err == nil {
		// Expired: move it aside first (a rename of a directory does not
		// replace a non-empty one).
		old := entry + ".old-" + filepath.Base(tmp)
		if os.Rename(entry, old) == nil {
			defer os.RemoveAll(old)
		}
	}
	if err := os.Rename(tmp, entry); err != nil {
		if b, rerr := os.ReadFile(filepath.Join(entry, "answer.json")); rerr == nil {
			return b // built by another process meanwhile
		}
		t.Fatalf("cache the LanceDB dataset: %v", err)
	}
	removeExpired(root)
	return answer
}

// removeExpired removes, best effort, the cache entries built more than
// twice CacheTTL ago (entries of older lock files or scripts are never
// used again).
func removeExpired(root string) {
	ents, _ := os.ReadDir(root)
	for _, e := range ents {
		dir := filepath.Join(root, e.Name())
		if info, err := os.Stat(filepath.Join(dir, "answer.json")); err == nil && time.Since(info.ModTime()) > 2*CacheTTL {
			_ = os.RemoveAll(dir)
		}
	}
}

// CopyTree copies the directory tree src into dst, keeping each file's
// modification time (LanceDB's cleanup compares them with the manifests'
// timestamps).
func CopyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := os.WriteFile(target, b, 0o644); err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		return os.Chtimes(target, info.ModTime(), info.ModTime())
	})
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
