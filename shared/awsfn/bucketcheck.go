package awsfn

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

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

// NotificationAPI reads a bucket's notification configuration (an
// *s3.Client; the compactor's cold start asserts it on its BucketAPI).
type NotificationAPI interface {
	GetBucketNotificationConfiguration(context.Context, *s3.GetBucketNotificationConfigurationInput, ...func(*s3.Options)) (*s3.GetBucketNotificationConfigurationOutput, error)
}

var _ NotificationAPI = (*s3.Client)(nil)

// ErrNoNotifications: the bucket delivers no new-object events, neither to
// EventBridge nor to a queue, so manifest notifications never arrive.
var ErrNoNotifications = errors.New("the bucket sends no new-object events (EventBridge delivery off, no queue configuration)")

// errNotChecked: the store does not implement the call (a local S3 such as
// versitygw answers NotImplemented; AWS S3 always implements it).
var errNotChecked = errors.New("notification configuration not implemented by the store")

// CheckNotifications reads the bucket's notification configuration (one
// request): nil when it delivers new-object events to EventBridge (what
// the template's ManifestEventRule routes) or to a queue (direct S3 ->
// SQS, docs/aws.md "Notifications"); ErrNoNotifications otherwise.
func CheckNotifications(ctx context.Context, api NotificationAPI, bucket string) error {
	out, err := api.GetBucketNotificationConfiguration(ctx, &s3.GetBucketNotificationConfigurationInput{Bucket: aws.String(bucket)})
	var ae smithy.APIError
	switch {
	case errors.As(err, &ae) && ae.ErrorCode() == "NotImplemented":
		return fmt.Errorf("bucket %s: %w", bucket, errNotChecked)
	case err != nil:
		return fmt.Errorf("bucket %s notification configuration: %w", bucket, err)
	case out.EventBridgeConfiguration != nil || len(out.QueueConfigurations) > 0:
		return nil
	}
	return fmt.Errorf("%w: bucket %s", ErrNoNotifications, bucket)
}

// checkNotifications runs at the compactor's cold start when the template
// turned notifications on (SafetyScanEvery > 0: a table without a
// notification is listed only once per SafetyScanEvery). If the bucket
// does not deliver them (an ExistingBucketName whose EventBridge delivery
// was not turned on), or the check fails, new writes would wait for that
// safety scan: the compactor falls back to listing every table every pass
// (SafetyScanEvery = 0; no work is lost, each idle table costs one LIST a
// pass), logs an error naming the fix, and every scheduled pass counts
// NotificationsMissing (NotificationsMissingAlarm). A store that does not
// implement the call (the local stack) is logged and left as configured.
func (d *Deps) checkNotifications(ctx context.Context) {
	api, ok := d.bucketAPI.(NotificationAPI)
	if d.Config.Role != RoleCompactor || d.Config.SafetyScanEvery == 0 || !ok {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err := CheckNotifications(ctx, api, d.Config.Bucket)
	switch {
	case err == nil:
		return
	case errors.Is(err, errNotChecked):
		d.Logger.Info("notification configuration not checked", "err", err)
		return
	}
	every := d.Config.SafetyScanEvery
	d.Config.SafetyScanEvery = 0
	d.notifyProblem = fmt.Sprintf("manifest notifications are on (SafetyScanEvery %s) but not delivered (%v): "+
		"every pass lists every table instead; turn on the bucket's EventBridge delivery "+
		"(docs/aws.md \"Existing bucket\") or deploy with ManifestNotifications=Disabled", every, err)
	d.Logger.Error("S3 notifications not delivered: falling back to listing every table every pass",
		"bucket", d.Config.Bucket, "safety_scan_every", every.String(), "err", err,
		"fix", "turn on EventBridge delivery on the bucket (docs/aws.md \"Existing bucket\"), or ManifestNotifications=Disabled")
}

// bucketNotes are the bucket's problems found at cold start, for the
// status page.
func (d *Deps) bucketNotes() []string {
	if d.notifyProblem == "" {
		return nil
	}
	return []string{d.notifyProblem}
}
