package lance_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// The LanceDB fixture is an npm project inside the repository
// (testdata/lancedb: package.json and package-lock.json pin
// @lancedb/lancedb). Its node_modules is installed by `npm ci` from the lock
// file the first time a test needs it (and again when the lock file
// changes), and is gitignored.

const fixtureDir = "testdata/lancedb"

var fixtureOnce struct {
	sync.Once
	err string
}

// fixture makes sure node and the fixture's npm dependencies are there. A
// machine without node or npm fails the test with how to get them.
func fixture(t testing.TB) {
	t.Helper()
	fixtureOnce.Do(func() { fixtureOnce.err = installFixture() })
	if fixtureOnce.err != "" {
		t.Fatal(fixtureOnce.err)
	}
}

func installFixture() string {
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			return tool + " not found in PATH: the Lance verification runs LanceDB itself. " +
				"Install Node.js 18 or later with npm (Debian: apt-get install nodejs npm), then rerun."
		}
	}
	lock, err := os.ReadFile(filepath.Join(fixtureDir, "package-lock.json"))
	if err != nil {
		return "read the fixture's lock file: " + err.Error()
	}
	stamp := filepath.Join(fixtureDir, "node_modules", ".tablekeep-lock")
	if old, err := os.ReadFile(stamp); err == nil && bytes.Equal(old, lock) {
		return ""
	}
	// --omit=optional: the lock pins LanceDB's native package for this
	// platform as a direct dependency; its other optional dependencies
	// (embedding providers) are not needed.
	cmd := exec.Command("npm", "ci", "--omit=optional", "--no-audit", "--no-fund", "--loglevel=error")
	cmd.Dir = fixtureDir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "npm ci in " + fixtureDir + " failed (the npm registry must be reachable the first time): " + err.Error() + "\n" + string(out)
	}
	if err := os.WriteFile(stamp, lock, 0o644); err != nil {
		return err.Error()
	}
	return ""
}

// node runs the fixture script and decodes its JSON answer into out.
func node(t testing.TB, out any, args ...string) {
	t.Helper()
	nodeEnv(t, nil, out, args...)
}

// nodeEnv is node with extra environment variables.
func nodeEnv(t testing.TB, env []string, out any, args ...string) {
	t.Helper()
	fixture(t)
	script, _ := filepath.Abs(filepath.Join(fixtureDir, "fixture.mjs"))
	cmd := exec.CommandContext(context.Background(), "node", append([]string{script}, args...)...)
	cmd.Dir = fixtureDir
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

type created struct {
	Versions []struct {
		Version uint64 `json:"version"`
		TS      int64  `json:"ts"`
	} `json:"versions"`
	Tags   map[string]uint64 `json:"tags"`
	Latest uint64            `json:"latest"`
}

type row struct {
	ID   int64   `json:"id"`
	Name string  `json:"name"`
	Val  float64 `json:"val"`
}

type dumped struct {
	Versions []uint64          `json:"versions"`
	Rows     map[string][]row  `json:"rows"`
	Tags     map[string]uint64 `json:"tags"`
}

// createDataset has LanceDB create table "t" under dir with commits rounds
// of the seed's churn; scheme "v1" asks for plain manifest names.
func createDataset(t testing.TB, dir string, commits int, scheme string) created {
	t.Helper()
	var c created
	args := []string{"create", dir, "t", strconv.Itoa(commits)}
	if scheme != "" {
		args = append(args, scheme)
	}
	node(t, &c, args...)
	return c
}

func dumpDataset(t testing.TB, dir string) dumped {
	t.Helper()
	var d dumped
	node(t, &d, "dump", dir, "t")
	return d
}

// TestMain removes the benchmarks' shared dataset (made once per process).
func TestMain(m *testing.M) {
	code := m.Run()
	if benchBase.dir != "" {
		_ = os.RemoveAll(benchBase.dir)
	}
	os.Exit(code)
}
