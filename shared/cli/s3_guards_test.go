package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/internal/testenv"
	"github.com/tablekeep/tablekeep/shared/lance/lancetest"
	"github.com/tablekeep/tablekeep/shared/objstore"
)

// uploadNew puts every file under dir not in sent to st at prefix/<rel>
// (a one-way sync of what LanceDB wrote locally since the last call; files
// tablekeep deleted on S3 are not brought back).
func uploadNew(t *testing.T, st objstore.Store, dir, prefix string, sent map[string]bool) {
	t.Helper()
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		key := prefix + "/" + filepath.ToSlash(rel)
		if sent[key] {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sent[key] = true
		return st.Put(context.Background(), key, b)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestS3ReadOnlyRootsLanceAndRestore is issue 22's High 1, 2, 3 and Medium 4, 5 on S3
// (versitygw, moto for the lock): read-only commands on a prefix or a
// bucket root without _registry write nothing (exit 1, one line); register
// refuses a second name, system directories and nested roots; Lance
// datasets are named as such; a tag below the floor gives no year-1 time;
// a LanceDB restore shows as "not pruned" with what to do.
func TestS3ReadOnlyRootsLanceAndRestore(t *testing.T) {
	stackEnv(t)
	t.Setenv(EnvAllowClockAhead, "test")
	st := testenv.S3Store(t)
	locks := lockTable(t)
	b := "s3://" + st.Bucket()

	// High 1.
	for _, wh := range []string{b + "/x", b, b + "/"} {
		want := "no warehouse at " + wh + " (no _registry): `tablekeep register` creates one"
		for _, args := range [][]string{
			{"status", "--warehouse", wh}, {"status", "--warehouse", wh, "-o", "json"}, {"tables", "--warehouse", wh},
			{"maintain", "--warehouse", wh, "--dry-run"}, {"maintain", "--warehouse", wh, "--lock-table", locks},
			{"sweep", "--warehouse", wh}, {"unregister", "x", "--warehouse", wh},
		} {
			fails(t, 1, want, "", args...)
		}
	}
	if keys := listKeys(t, st); len(keys) != 0 {
		t.Fatalf("read-only commands wrote into the bucket: %v", keys)
	}

	// High 3.
	wh := b + "/wh"
	for _, p := range []string{"t", "outer/inner"} {
		ok(t, "", "create", "--table", wh+"/"+p, "--schema", "name:utf8", "--key", "name")
	}
	ok(t, "", "register", "prod", "t", "--warehouse", wh, "--keep-last", "10")
	fails(t, 1, "t is already registered as prod", "", "register", "scratch", "t", "--warehouse", wh, "--keep-last", "2")
	fails(t, 2, "system table: _registry is the warehouse's own _registry", "", "register", "x", "_registry", "--warehouse", wh)
	ok(t, "", "register", "inner", "outer/inner", "--warehouse", wh)
	fails(t, 1, "nested table roots: outer holds outer/inner, registered as inner", "", "register", "outer", "outer", "--warehouse", wh)
	if out := ok(t, "", "tables", "--warehouse", wh); strings.Contains(out, "scratch") || strings.Contains(out, "\nx ") {
		t.Fatalf("tables:\n%s", out)
	}

	// Medium 4: a dataset LanceDB wrote, copied to S3.
	dbdir := filepath.Join(t.TempDir(), "lance")
	created := lancetest.Create(t, dbdir, "ds", 20, "")
	sent := map[string]bool{}
	uploadNew(t, st, filepath.Join(dbdir, "ds.lance"), "wh/ds.lance", sent)
	ds := wh + "/ds.lance"
	if vj := jsonLines(t, ok(t, "", "versions", "--table", ds, "-o", "json")); len(vj) != len(created.Versions) {
		t.Fatalf("versions on a Lance dataset: %d rows, want %d", len(vj), len(created.Versions))
	}
	if fj := jsonLines(t, ok(t, "", "files", "--table", ds, "-o", "json")); len(fj) == 0 || !strings.HasPrefix(fj[0]["path"].(string), ds+"/data/") {
		t.Fatalf("files on a Lance dataset: %v", fj)
	}
	for _, cmd := range [][]string{{"scan"}, {"versions", "--long"}, {"get", "x"}} {
		fails(t, 1, ds+" is a Lance dataset: table commands read tablekeep tables; read it with LanceDB (describe, files and lease take it; register --table-format lance maintains it)", "", append(cmd, "--table", ds)...)
	}
	fails(t, 1, "ds.lance is a Lance dataset: register it with --table-format lance", "", "register", "ds", "ds.lance", "--warehouse", wh)
	fails(t, 1, "t is a tablekeep table, not a Lance dataset", "", "register", "prod", "t", "--warehouse", wh, "--table-format", "lance")

	// High 2: after a prune, tagged versions lie below the floor.
	ok(t, "", "register", "ds", "ds.lance", "--warehouse", wh, "--table-format", "lance", "--grace", "1h", "--keep-last", "3")
	ok(t, "", "prune", "--warehouse", wh, "--table", "ds", "--lock-table", locks, "--clock-ahead", "2h")
	start := time.Now().UTC().Add(-time.Minute)
	lancetest.Write(t, dbdir, "ds")
	latest := lancetest.Write(t, dbdir, "ds")
	uploadNew(t, st, filepath.Join(dbdir, "ds.lance"), "wh/ds.lance", sent)
	r := run(t, "", "status", "--warehouse", wh, "--table", "ds", "--clock-ahead", "2h", "--max-lag", "30m", "-o", "json")
	var doc struct {
		Tables []tableStatus `json:"tables"`
	}
	if err := json.Unmarshal([]byte(r.out), &doc); err != nil || r.code != 1 || len(doc.Tables) != 1 || strings.Contains(r.out, "0001-") {
		t.Fatalf("status -o json: exit %d %v\n%s%s", r.code, err, r.out, r.err)
	}
	since, err := time.Parse(time.RFC3339, doc.Tables[0].PrunableSince)
	if err != nil || since.Before(start.Add(time.Hour)) || doc.Tables[0].Health != "behind" {
		t.Fatalf("status: %+v (want behind since the writes plus 1h, after %s)", doc.Tables[0], start.Add(time.Hour))
	}

	// Medium 5: LanceDB restores a version.
	restored := lanceRestore(t, dbdir, "ds", latest-1)
	uploadNew(t, st, filepath.Join(dbdir, "ds.lance"), "wh/ds.lance", sent)
	r = run(t, "", "status", "--warehouse", wh, "--table", "ds", "--clock-ahead", "2h")
	want := fmt.Sprintf("ds: not pruned: version %d is a LanceDB restore (or clone)", restored)
	if r.code != 1 || !regexpMatch(`(?m)^ds +lance +not pruned `, r.out) || !strings.Contains(r.out, want) || !strings.Contains(r.out, "LanceDB's own cleanup") {
		t.Fatalf("status after a restore: exit %d\n%s%s", r.code, r.out, r.err)
	}
	uploadNew(t, st, filepath.Join(dbdir, "ds.lance"), "wh/copy.lance", map[string]bool{})
	fails(t, 1, fmt.Sprintf("copy.lance: refused, nothing registered: the latest version is a restore, version %d is a LanceDB restore", restored), "",
		"register", "copy", "copy.lance", "--warehouse", wh, "--table-format", "lance")
}

// TestS3LockTableAndEndpointErrors: a wrong lock table is one line, before any table is
// touched (it was one error per table, then again in the summary); an
// unreachable S3 or DynamoDB endpoint is one line naming the variable to
// set (it was the SDK's paragraph).
func TestS3LockTableAndEndpointErrors(t *testing.T) {
	stackEnv(t)
	st := testenv.S3Store(t)
	wh := "s3://" + st.Bucket() + "/wh"
	for _, n := range []string{"a", "b", "c"} {
		ok(t, "", "create", "--table", wh+"/"+n, "--schema", "name:utf8", "--key", "name")
		ok(t, "", "register", n, n, "--warehouse", wh)
	}
	before := listKeys(t, st)
	r := run(t, "", "maintain", "--warehouse", wh, "--lock-table", "no-such-locks")
	if r.code != 1 || r.out != "" || strings.Count(r.err, "\n") != 1 || strings.Count(r.err, "ResourceNotFoundException") != 1 ||
		!strings.HasPrefix(r.err, "tablekeep: "+wh+": lock table no-such-locks: ") || !strings.Contains(r.err, "check --lock-table / TABLEKEEP_LOCK_TABLE") {
		t.Fatalf("maintain with a wrong lock table: exit %d\nstdout %q\nstderr %q", r.code, r.out, r.err)
	}
	if after := listKeys(t, st); len(after) != len(before) {
		t.Fatalf("a refused maintain wrote %d keys", len(after)-len(before))
	}
	t.Run("S3Endpoint", func(t *testing.T) {
		t.Setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:1")
		fails(t, 1, wh+": cannot reach S3 at 127.0.0.1:1 (connection refused): check AWS_ENDPOINT_URL_S3 (or TABLEKEEP_S3_ENDPOINT", "", "status", "--warehouse", wh)
		fails(t, 1, wh+"/a: cannot reach S3 at 127.0.0.1:1 (connection refused): check AWS_ENDPOINT_URL_S3", "", "scan", "--table", wh+"/a")
	})
	t.Run("DynamoDBEndpoint", func(t *testing.T) {
		t.Setenv("AWS_ENDPOINT_URL_DYNAMODB", "http://127.0.0.1:1")
		fails(t, 1, wh+": lock table locks: cannot reach DynamoDB at 127.0.0.1:1 (connection refused): check AWS_ENDPOINT_URL_DYNAMODB (or TABLEKEEP_AWS_ENDPOINT",
			"", "maintain", "--warehouse", wh, "--lock-table", "locks")
	})
}
