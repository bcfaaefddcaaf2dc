package warehouse

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
)

// ErrVersionedBucket: the warehouse bucket keeps versions (versioning
// enabled or suspended) and no enabled lifecycle rule expires noncurrent
// versions under the warehouse prefix. Every delete of the cleaners and the
// sweeper would then only add a delete marker: storage is never reclaimed,
// while tablekeep reports it reclaimed.
var ErrVersionedBucket = errors.New("versioned warehouse bucket without a noncurrent-version expiration rule")

// BucketAPI is what the cold-start bucket check calls (an *s3.Client).
type BucketAPI interface {
	GetBucketVersioning(context.Context, *s3.GetBucketVersioningInput, ...func(*s3.Options)) (*s3.GetBucketVersioningOutput, error)
	GetBucketLifecycleConfiguration(context.Context, *s3.GetBucketLifecycleConfigurationInput, ...func(*s3.Options)) (*s3.GetBucketLifecycleConfigurationOutput, error)
}

// BucketCheck is what CheckBucket found.
type BucketCheck struct {
	Versioning string // "", Enabled or Suspended
	// Rule is the id of the lifecycle rule expiring noncurrent versions
	// under the prefix ("" if none or the bucket is not versioned).
	Rule string
	// MarkersExpire: the rule (or another covering one) also removes
	// expired delete markers (ExpiredObjectDeleteMarker); without it a
	// LIST still walks the markers of every deleted key.
	MarkersExpire bool
}

// CheckBucket refuses (ErrVersionedBucket) a versioned bucket unless an
// enabled lifecycle rule covering every key under prefix has a
// NoncurrentVersionExpiration. An unversioned bucket needs nothing (one
// request); a versioned one costs a second (the lifecycle configuration).
// Other errors (the request failed) are returned as they are: the caller
// decides whether to refuse on them.
func CheckBucket(ctx context.Context, api BucketAPI, bucket, prefix string) (BucketCheck, error) {
	var c BucketCheck
	v, err := api.GetBucketVersioning(ctx, &s3.GetBucketVersioningInput{Bucket: aws.String(bucket)})
	if err != nil {
		return c, fmt.Errorf("bucket %s versioning: %w", bucket, err)
	}
	c.Versioning = string(v.Status)
	if v.Status != types.BucketVersioningStatusEnabled && v.Status != types.BucketVersioningStatusSuspended {
		return c, nil
	}
	lc, err := api.GetBucketLifecycleConfiguration(ctx, &s3.GetBucketLifecycleConfigurationInput{Bucket: aws.String(bucket)})
	var rules []types.LifecycleRule
	var ae smithy.APIError
	switch {
	case err == nil:
		rules = lc.Rules
	case errors.As(err, &ae) && ae.ErrorCode() == "NoSuchLifecycleConfiguration":
	default:
		return c, fmt.Errorf("bucket %s lifecycle configuration: %w", bucket, err)
	}
	for _, r := range rules {
		if r.Status != types.ExpirationStatusEnabled || !ruleCovers(r, prefix) {
			continue
		}
		if r.NoncurrentVersionExpiration != nil && c.Rule == "" {
			c.Rule = aws.ToString(r.ID)
			if c.Rule == "" {
				c.Rule = "(no id)"
			}
		}
		if r.Expiration != nil && aws.ToBool(r.Expiration.ExpiredObjectDeleteMarker) {
			c.MarkersExpire = true
		}
	}
	if c.Rule == "" {
		return c, fmt.Errorf("%w: bucket %s has versioning %s; add an enabled lifecycle rule for prefix %q (or the whole bucket) "+
			"with NoncurrentVersionExpiration (e.g. NoncurrentDays 1) and Expiration.ExpiredObjectDeleteMarker, "+
			"or every delete only adds a delete marker and no storage is ever reclaimed (docs/aws.md \"Existing buckets\")",
			ErrVersionedBucket, bucket, c.Versioning, prefix+"/")
	}
	return c, nil
}

// ruleCovers reports whether r applies to every key under prefix: no
// filter, or a prefix filter that is a prefix of the warehouse prefix, and
// no tag or size condition (which would leave some keys out).
func ruleCovers(r types.LifecycleRule, prefix string) bool {
	p := aws.ToString(r.Prefix) //nolint:staticcheck // the deprecated top-level prefix still applies
	if f := r.Filter; f != nil {
		if f.Tag != nil || f.And != nil || f.ObjectSizeGreaterThan != nil || f.ObjectSizeLessThan != nil {
			return false
		}
		if f.Prefix != nil {
			p = aws.ToString(f.Prefix)
		}
	}
	if prefix == "" {
		return p == "" // the warehouse is the whole bucket
	}
	return strings.HasPrefix(prefix+"/", p)
}
