package objstore_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/tablekeep/tablekeep/shared/internal/testenv"
	"github.com/tablekeep/tablekeep/shared/objstore"
)

func TestParseURI(t *testing.T) {
	ok := []struct{ uri, scheme, bucket, prefix string }{
		{"s3://my-bucket/some/prefix", "s3", "my-bucket", "some/prefix"},
		{"s3://my-bucket/some/prefix/", "s3", "my-bucket", "some/prefix"},
		{"s3://my-bucket", "s3", "my-bucket", ""},
		{"s3://my-bucket/", "s3", "my-bucket", ""},
		{"S3://my.bucket.1/t", "s3", "my.bucket.1", "t"},
		{"file:///var/data/t1", "file", "", "/var/data/t1"},
		{"file://localhost/var/data", "file", "", "/var/data"},
		{"/var/data/t1", "file", "", "/var/data/t1"},
		{"relative/dir", "file", "", "relative/dir"},
		{"./t", "file", "", "./t"},
	}
	for _, c := range ok {
		scheme, bucket, prefix, err := objstore.ParseURI(c.uri)
		if err != nil || scheme != c.scheme || bucket != c.bucket || prefix != c.prefix {
			t.Errorf("ParseURI(%q) = %q, %q, %q, %v; want %q, %q, %q", c.uri, scheme, bucket, prefix, err, c.scheme, c.bucket, c.prefix)
		}
	}
	for _, bad := range []string{
		"", "s3://", "s3:///prefix", "s3:bucket/x", "s3:/bucket/x", "s3://Bad_Bucket/x", "s3://ab/x",
		"s3://bucket/a/../b", "s3://bucket/a//b", "s3://bucket/./a", "gs://bucket/x", "http://host/x",
		"file://otherhost/x", "file:relative",
	} {
		if _, _, _, err := objstore.ParseURI(bad); err == nil {
			t.Errorf("ParseURI(%q) succeeded, want an error", bad)
		}
	}
}

func TestOpenLocal(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "table")
	for _, uri := range []string{dir, "file://" + dir} {
		st, root, err := objstore.Open(ctx, uri)
		if err != nil {
			t.Fatalf("Open(%q): %v", uri, err)
		}
		d, ok := st.(*objstore.Disk)
		if !ok || d.Root() != dir || root != "" {
			t.Errorf("Open(%q) = %T root %q, want *Disk at %s with root \"\"", uri, st, root, dir)
		}
	}
	if _, err := os.Stat(dir); err != nil {
		t.Errorf("directory not created: %v", err)
	}
	if _, _, err := objstore.Open(ctx, "s3:///x"); err == nil {
		t.Error("Open(s3:///x) succeeded")
	}
}

func TestOpenS3Settings(t *testing.T) {
	ctx := context.Background()
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_REGION", "eu-west-1")
	t.Setenv("AWS_ENDPOINT_URL", "")
	t.Setenv("AWS_ENDPOINT_URL_S3", "")
	t.Setenv("TABLEKEEP_S3_PATH_STYLE", "")
	check := func(wantEndpoint string, wantPathStyle bool) {
		t.Helper()
		st, root, err := objstore.Open(ctx, "s3://bkt/tables/t1")
		if err != nil {
			t.Fatal(err)
		}
		s, ok := st.(*objstore.S3)
		if !ok || s.Bucket() != "bkt" || root != "tables/t1" {
			t.Fatalf("Open = %T bucket %q root %q", st, s.Bucket(), root)
		}
		o := s.Client().Options()
		if aws.ToString(o.BaseEndpoint) != wantEndpoint || o.UsePathStyle != wantPathStyle || o.Region != "eu-west-1" {
			t.Errorf("endpoint %q path-style %v region %q; want %q %v eu-west-1",
				aws.ToString(o.BaseEndpoint), o.UsePathStyle, o.Region, wantEndpoint, wantPathStyle)
		}
	}
	check("", false)
	t.Setenv("TABLEKEEP_S3_PATH_STYLE", "1")
	check("", true)
	t.Setenv("TABLEKEEP_S3_PATH_STYLE", "")
	t.Setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
	check("http://127.0.0.1:1", true)
	t.Setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:2")
	check("http://127.0.0.1:2", true)
}

func TestOpenS3EndToEnd(t *testing.T) {
	ctx := context.Background()
	base := testenv.S3Store(t)
	t.Setenv("AWS_ENDPOINT_URL_S3", testenv.S3Endpoint(t))
	st, root, err := objstore.Open(ctx, "s3://"+base.Bucket()+"/warehouse/t1/")
	if err != nil {
		t.Fatal(err)
	}
	if root != "warehouse/t1" {
		t.Errorf("root = %q", root)
	}
	if err := st.Put(ctx, root+"/_versions/1.manifest", []byte("m")); err != nil {
		t.Fatal(err)
	}
	if got, err := base.Get(ctx, "warehouse/t1/_versions/1.manifest"); err != nil || string(got) != "m" {
		t.Errorf("get through the test store = %q, %v", got, err)
	}
}
