package lance_test

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/tablekeep/tablekeep/shared/lance/lancetest"
	"github.com/tablekeep/tablekeep/shared/objstore"
)

// The LanceDB fixture (testdata/lancedb: package.json and package-lock.json
// pin @lancedb/lancedb) is driven through lancetest, which the CLI, the
// embedded warehouse and the Lambda functions' tests share: it installs the
// fixture's node_modules with `npm ci` from the lock file the first time a
// test needs it (and again when the lock file changes), and fails a test on
// a machine without node or npm with how to get them.

// ldb runs the fixture against one pinned LanceDB release; the suites
// that read or write Lance files run once per release
// (lancetest.ForEach), the others against lancetest.Default. With cached,
// the datasets it creates are built once and copied
// (lancetest.Release.Dataset): only for tests that do not depend on how
// old the dataset's versions are (a reader lease on a version within the
// lease window of time.Now() does).
type ldb struct {
	r      lancetest.Release
	cached bool
}

// lanceDB is the default release's, uncached.
func lanceDB() ldb { return ldb{r: lancetest.Default} }

// releaseDB is release r's, its datasets built once and copied.
func releaseDB(r lancetest.Release) ldb { return ldb{r: r, cached: true} }

// node runs the fixture script and decodes its JSON answer into out.
func (l ldb) node(t testing.TB, out any, args ...string) {
	t.Helper()
	l.r.Node(t, nil, out, args...)
}

// nodeEnv is node with extra environment variables.
func (l ldb) nodeEnv(t testing.TB, env []string, out any, args ...string) {
	t.Helper()
	l.r.Node(t, env, out, args...)
}

// create has LanceDB create table "t" under dir with commits rounds of
// the seed's churn; scheme "v1" asks for plain manifest names.
func (l ldb) create(t testing.TB, dir string, commits int, scheme string) created {
	t.Helper()
	if !l.cached {
		return l.r.Create(t, dir, "t", commits, scheme)
	}
	var c created
	args := []string{"t", strconv.Itoa(commits)}
	if scheme != "" {
		args = append(args, scheme)
	}
	l.r.Dataset(t, dir, nil, &c, "create", args...)
	return c
}

func (l ldb) dump(t testing.TB, dir string) dumped {
	t.Helper()
	return l.r.Dump(t, dir, "t")
}

// verify is what the fixture's verify reports of the latest version; it
// fails the test if LanceDB's index queries disagree with its scan.
func (l ldb) verify(t testing.TB, dir string) verified {
	t.Helper()
	var v verified
	l.node(t, &v, "verify", dir, "t")
	if len(v.Bad) > 0 {
		t.Fatalf("LanceDB %s: its index queries disagree with its scan: %v", l.r, v.Bad)
	}
	return v
}

// write has LanceDB upsert and delete once more; the new latest version.
func (l ldb) write(t testing.TB, dir string) uint64 {
	t.Helper()
	return l.r.Write(t, dir, "t")
}

// mixed has LanceDB build a table of 10 rows with a btree index on id,
// then rounds of one-row upserts (mergeInsert), delete+add, deletes and
// adds, without optimize: a fragment per write, most with deletions. The
// data storage version is version ("" is the release's default: 2.1 for
// 0.31, 2.2 for 0.39); a "-v1" suffix asks for plain manifest names.
func (l ldb) mixed(t testing.TB, rounds int, version string) (dir string, store objstore.Store) {
	t.Helper()
	var env []string
	if v, ok := strings.CutSuffix(version, "-v1"); ok { // plain manifest names
		version, env = v, []string{"LANCE_MANIFEST_NAMES=v1"}
	}
	return l.dataset(t, env, version, "mixed", strconv.Itoa(rounds))
}

// deletes has LanceDB write 10 indexed rows, then adds of per rows each,
// then delete half of every added fragment's rows, in a data storage
// version (deletesDataset).
func (l ldb) deletes(t testing.TB, adds, per int, version string) (dir string, store objstore.Store) {
	t.Helper()
	return l.dataset(t, nil, version, "deletes", strconv.Itoa(adds), strconv.Itoa(per))
}

// dataset runs a fixture command that creates table "t" in a new
// directory, in data storage version version ("": the release's default).
func (l ldb) dataset(t testing.TB, env []string, version, cmd string, args ...string) (dir string, store objstore.Store) {
	t.Helper()
	dir = t.TempDir()
	if version != "" {
		env = append(env, "LANCE_FILE_VERSION="+version)
	}
	if l.cached {
		l.r.Dataset(t, dir, env, nil, cmd, append([]string{"t"}, args...)...)
	} else {
		l.nodeEnv(t, env, nil, append([]string{cmd, dir, "t"}, args...)...)
	}
	d, err := objstore.NewDisk(dir)
	if err != nil {
		t.Fatal(err)
	}
	return dir, d
}

// node, nodeEnv, createDataset and dumpDataset are the default release's.
func node(t testing.TB, out any, args ...string) {
	t.Helper()
	lanceDB().node(t, out, args...)
}

func nodeEnv(t testing.TB, env []string, out any, args ...string) {
	t.Helper()
	lanceDB().nodeEnv(t, env, out, args...)
}

func createDataset(t testing.TB, dir string, commits int, scheme string) created {
	t.Helper()
	return lanceDB().create(t, dir, commits, scheme)
}

func dumpDataset(t testing.TB, dir string) dumped {
	t.Helper()
	return lanceDB().dump(t, dir)
}

// The fixture's answers (lancetest's types).
type (
	created = lancetest.Created
	row     = lancetest.Row
	dumped  = lancetest.Dumped
)

// TestMain removes the benchmarks' shared dataset (made once per process).
func TestMain(m *testing.M) {
	code := m.Run()
	if benchBase.dir != "" {
		_ = os.RemoveAll(benchBase.dir)
	}
	os.Exit(code)
}
