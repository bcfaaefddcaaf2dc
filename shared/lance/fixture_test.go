package lance_test

import (
	"os"
	"strconv"
	"testing"

	"github.com/tablekeep/tablekeep/shared/lance/lancetest"
)

// The LanceDB fixture (testdata/lancedb: package.json and package-lock.json
// pin @lancedb/lancedb) is driven through lancetest, which the CLI, the
// embedded warehouse and the Lambda functions' tests share: it installs the
// fixture's node_modules with `npm ci` from the lock file the first time a
// test needs it (and again when the lock file changes), and fails a test on
// a machine without node or npm with how to get them.

// node runs the fixture script and decodes its JSON answer into out.
func node(t testing.TB, out any, args ...string) {
	t.Helper()
	lancetest.Node(t, nil, out, args...)
}

// nodeEnv is node with extra environment variables.
func nodeEnv(t testing.TB, env []string, out any, args ...string) {
	t.Helper()
	lancetest.Node(t, env, out, args...)
}

// The fixture's answers (lancetest's types).
type (
	created = lancetest.Created
	row     = lancetest.Row
	dumped  = lancetest.Dumped
)

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
