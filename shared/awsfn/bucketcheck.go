package awsfn

import (
	"context"

	"github.com/tablekeep/tablekeep/shared/warehouse"
)

// The bucket check lives with the warehouse it checks (shared/warehouse):
// the CLI's status runs it too.

// ErrVersionedBucket is warehouse.ErrVersionedBucket.
var ErrVersionedBucket = warehouse.ErrVersionedBucket

// BucketAPI is warehouse.BucketAPI (an *s3.Client).
type BucketAPI = warehouse.BucketAPI

// BucketCheck is warehouse.BucketCheck.
type BucketCheck = warehouse.BucketCheck

// CheckBucket is warehouse.CheckBucket.
func CheckBucket(ctx context.Context, api BucketAPI, bucket, prefix string) (BucketCheck, error) {
	return warehouse.CheckBucket(ctx, api, bucket, prefix)
}
