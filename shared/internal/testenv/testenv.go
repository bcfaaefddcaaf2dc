package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/tablekeep/tablekeep/shared/objstore"
)

const hint = "run `make test`, which installs versitygw (make tools) and starts the local stack (infra/stack-up.sh); " +
	"or run `make stack-up && source .stack/env` before `go test`"

// S3Endpoint is the versitygw endpoint (TABLEKEEP_S3_ENDPOINT).
func S3Endpoint(t testing.TB) string {
	t.Helper()
	return mustEnv(t, "TABLEKEEP_S3_ENDPOINT")
}

// AWSEndpoint is the moto_server endpoint for DynamoDB and SQS
// (TABLEKEEP_AWS_ENDPOINT).
func AWSEndpoint(t testing.TB) string {
	t.Helper()
	return mustEnv(t, "TABLEKEEP_AWS_ENDPOINT")
}

func mustEnv(t testing.TB, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		t.Fatalf("%s is not set: %s", name, hint)
	}
	return v
}

var nonDNS = regexp.MustCompile(`[^a-z0-9-]+`)

// BucketName returns a fresh valid bucket name (3-63 lowercase letters,
// digits and hyphens) derived from the test name.
func BucketName(t testing.TB) string {
	var rnd [4]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		t.Fatalf("random: %v", err)
	}
	base := strings.Trim(nonDNS.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	if len(base) > 40 {
		base = strings.Trim(base[:40], "-")
	}
	return "tk-" + base + "-" + hex.EncodeToString(rnd[:])
}

// S3Store creates a fresh, uniquely named bucket on the local S3 endpoint and
// returns a store over it. The bucket is emptied and removed when the test
// ends (best effort).
func S3Store(t testing.TB) *objstore.S3 {
	t.Helper()
	endpoint := S3Endpoint(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bucket := BucketName(t)
	st, err := objstore.NewS3FromConfig(ctx, objstore.S3Options{
		Bucket: bucket, Endpoint: endpoint, Region: "us-east-1", PathStyle: true,
	})
	if err != nil {
		t.Fatalf("s3 store: %v", err)
	}
	if _, err := st.Client().CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatalf("create bucket %s on %s: %v (%s)", bucket, endpoint, err, hint)
	}
	t.Cleanup(func() { removeBucket(t, st.Client(), bucket) })
	return st
}

func removeBucket(t testing.TB, c *s3.Client, bucket string) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := 0; i < 1000; i++ {
		page, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
		if err != nil {
			t.Logf("cleanup: list %s: %v", bucket, err)
			return
		}
		if len(page.Contents) == 0 {
			break
		}
		ids := make([]types.ObjectIdentifier, len(page.Contents))
		for i, o := range page.Contents {
			ids[i] = types.ObjectIdentifier{Key: o.Key}
		}
		if _, err := c.DeleteObjects(ctx, &s3.DeleteObjectsInput{
			Bucket: aws.String(bucket), Delete: &types.Delete{Objects: ids, Quiet: aws.Bool(true)},
		}); err != nil {
			t.Logf("cleanup: delete objects in %s: %v", bucket, err)
			return
		}
	}
	if _, err := c.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Logf("cleanup: delete bucket %s: %v", bucket, err)
	}
}
