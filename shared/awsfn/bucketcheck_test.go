package awsfn

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
)

type fakeBucket struct {
	status    types.BucketVersioningStatus
	rules     []types.LifecycleRule
	noConfig  bool
	versErr   error
	lifecycle int // GetBucketLifecycleConfiguration calls
}

func (f *fakeBucket) GetBucketVersioning(context.Context, *s3.GetBucketVersioningInput, ...func(*s3.Options)) (*s3.GetBucketVersioningOutput, error) {
	if f.versErr != nil {
		return nil, f.versErr
	}
	return &s3.GetBucketVersioningOutput{Status: f.status}, nil
}

func (f *fakeBucket) GetBucketLifecycleConfiguration(context.Context, *s3.GetBucketLifecycleConfigurationInput, ...func(*s3.Options)) (*s3.GetBucketLifecycleConfigurationOutput, error) {
	f.lifecycle++
	if f.noConfig {
		return nil, &smithy.GenericAPIError{Code: "NoSuchLifecycleConfiguration", Message: "none"}
	}
	return &s3.GetBucketLifecycleConfigurationOutput{Rules: f.rules}, nil
}

func noncurrent(id, prefix string, status types.ExpirationStatus) types.LifecycleRule {
	return types.LifecycleRule{ID: aws.String(id), Status: status, Filter: &types.LifecycleRuleFilter{Prefix: aws.String(prefix)},
		NoncurrentVersionExpiration: &types.NoncurrentVersionExpiration{NoncurrentDays: aws.Int32(1)},
		Expiration:                  &types.LifecycleExpiration{ExpiredObjectDeleteMarker: aws.Bool(true)}}
}

// TestCheckBucket: a versioned bucket is refused unless an enabled rule
// covering the warehouse prefix expires noncurrent versions; an unversioned
// bucket costs one request.
func TestCheckBucket(t *testing.T) {
	ctx := context.Background()
	const on, off = types.ExpirationStatusEnabled, types.ExpirationStatusDisabled
	sized := noncurrent("sized", "", on)
	sized.Filter = &types.LifecycleRuleFilter{ObjectSizeGreaterThan: aws.Int64(1 << 20)}
	for _, c := range []struct {
		name    string
		f       *fakeBucket
		prefix  string
		refused bool
		rule    string
	}{
		{"unversioned", &fakeBucket{}, "warehouse", false, ""},
		{"versioned, no configuration", &fakeBucket{status: types.BucketVersioningStatusEnabled, noConfig: true}, "warehouse", true, ""},
		{"suspended, no rule", &fakeBucket{status: types.BucketVersioningStatusSuspended}, "warehouse", true, ""},
		{"whole bucket", &fakeBucket{status: types.BucketVersioningStatusEnabled, rules: []types.LifecycleRule{noncurrent("all", "", on)}}, "warehouse", false, "all"},
		{"parent prefix", &fakeBucket{status: types.BucketVersioningStatusEnabled, rules: []types.LifecycleRule{noncurrent("p", "ware", on)}}, "warehouse", false, "p"},
		{"exact prefix", &fakeBucket{status: types.BucketVersioningStatusEnabled, rules: []types.LifecycleRule{noncurrent("w", "warehouse/", on)}}, "warehouse", false, "w"},
		{"other prefix", &fakeBucket{status: types.BucketVersioningStatusEnabled, rules: []types.LifecycleRule{noncurrent("o", "logs/", on)}}, "warehouse", true, ""},
		{"disabled rule", &fakeBucket{status: types.BucketVersioningStatusEnabled, rules: []types.LifecycleRule{noncurrent("d", "", off)}}, "warehouse", true, ""},
		{"size filter", &fakeBucket{status: types.BucketVersioningStatusEnabled, rules: []types.LifecycleRule{sized}}, "warehouse", true, ""},
		{"root warehouse, prefixed rule", &fakeBucket{status: types.BucketVersioningStatusEnabled, rules: []types.LifecycleRule{noncurrent("w", "warehouse/", on)}}, "", true, ""},
	} {
		got, err := CheckBucket(ctx, c.f, "bkt", c.prefix)
		if refused := errors.Is(err, ErrVersionedBucket); refused != c.refused || (!c.refused && err != nil) {
			t.Errorf("%s: err %v, want refused=%v", c.name, err, c.refused)
		}
		if c.refused && !strings.Contains(err.Error(), "NoncurrentVersionExpiration") {
			t.Errorf("%s: error does not name the fix: %v", c.name, err)
		}
		if got.Rule != c.rule {
			t.Errorf("%s: rule %q, want %q", c.name, got.Rule, c.rule)
		}
		if c.name == "unversioned" && c.f.lifecycle != 0 {
			t.Errorf("unversioned bucket: %d lifecycle reads, want none", c.f.lifecycle)
		}
	}

	// At cold start: refused with the error every invocation returns; a
	// check that fails is logged and the function runs.
	var log bytes.Buffer
	d := &Deps{Config: Config{Bucket: "bkt", Prefix: "warehouse"}, Logger: NewLogger(&log, "info", RoleSweeper),
		bucketAPI: &fakeBucket{status: types.BucketVersioningStatusEnabled, noConfig: true}}
	if err := d.checkBucket(ctx); !errors.Is(err, ErrVersionedBucket) {
		t.Errorf("cold start on a versioned bucket without the rule: %v", err)
	}
	d.bucketAPI = &fakeBucket{versErr: errors.New("connection reset")}
	if err := d.checkBucket(ctx); err != nil || !strings.Contains(log.String(), "bucket check failed") {
		t.Errorf("failed check: %v, log %s", err, log.String())
	}
}
