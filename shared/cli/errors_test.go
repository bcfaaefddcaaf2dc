package cli

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/aws/smithy-go"
)

// TestErrorStyle: errors from below the CLI keep its one-line style.
func TestErrorStyle(t *testing.T) {
	t.Setenv(EnvAllowClockAhead, "test")
	dir := t.TempDir()
	tbl := filepath.Join(dir, "reg")
	ok(t, "", "create", "--table", tbl, "--schema", "name:utf8", "--key", "name", "--table-format", "2")
	for i := range 12 {
		ok(t, fmt.Sprintf("{\"name\":\"k%d\"}\n", i), "upsert", "--table", tbl)
	}
	ok(t, "", "register", "reg", "reg", "--warehouse", dir)
	ok(t, "", "maintain", "--warehouse", dir, "--clock-ahead", "2h")
	file := writeFile(t, dir, "rows.csv", "name\nx\n")
	cases := []struct {
		name string
		code int
		want string
		args []string
	}{
		{"pruned version, get", 1, tbl + ": version 2 was pruned (version pruned; the latest is 14", []string{"get", "--table", tbl, "k1", "--version", "2"}},
		{"pruned version, scan", 1, tbl + ": version 2 was pruned", []string{"scan", "--table", tbl, "--version", "2"}},
		{"file as table", 1, file + ": not a tablekeep table: it is a file, not a table directory", []string{"stats", "--table", file}},
		{"too many arguments", 2, "tablekeep tag: accepts 1 arg(s), received 2 (usage: tablekeep tag NAME", []string{"tag", "--table", tbl, "a", "b"}},
		{"positional for a flag", 2, `tablekeep delete: unknown command "k1" for "tablekeep delete" (usage: tablekeep delete (--key K`, []string{"delete", "--table", tbl, "k1"}},
		{"unknown flag", 2, "tablekeep scan: unknown flag: --nope (usage: tablekeep scan", []string{"scan", "--table", tbl, "--nope"}},
		{"bad flag value", 2, `tablekeep status: invalid argument "x" for "--max-lag" flag`, []string{"status", "--max-lag", "x"}},
		{"missing argument", 2, "tablekeep register: accepts 2 arg(s), received 0 (usage: tablekeep register NAME PATH", []string{"register"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { fails(t, c.code, c.want, "", c.args...) })
	}

	for _, c := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("list x: %w", &fs.PathError{Op: "open", Path: "/data/t/_versions", Err: fs.ErrPermission}), "/data/t/_versions: permission denied"},
		{fmt.Errorf("open t/: list: operation error S3: ListObjectsV2, https response error StatusCode: 404, RequestID: X, HostID: Y, api error NoSuchBucket: The specified bucket does not exist: %w",
			&smithy.GenericAPIError{Code: "NoSuchBucket", Message: "The specified bucket does not exist"}), "s3://b/x: bucket does not exist"},
		{fmt.Errorf("get: %w", &smithy.GenericAPIError{Code: "AccessDenied", Message: "Access Denied"}), "s3://b/x: permission denied"},
		{fmt.Errorf("operation error S3: ListObjectsV2, get identity: get credentials: failed to refresh cached credentials, no EC2 IMDS role found"), "s3://b/x: no AWS credentials found"},
	} {
		if got := styled(c.err, "s3://b/x").Error(); len(got) < len(c.want) || got[:len(c.want)] != c.want {
			t.Errorf("styled(%q) = %q, want %q...", c.err, got, c.want)
		}
	}
}
