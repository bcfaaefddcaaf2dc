package awsfn

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/tablekeep/tablekeep/shared/catalog"
	"github.com/tablekeep/tablekeep/shared/internal/fakeclock"
	"github.com/tablekeep/tablekeep/shared/internal/testenv"
	"github.com/tablekeep/tablekeep/shared/lock"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/queue"
	"github.com/tablekeep/tablekeep/shared/table"
	"github.com/tablekeep/tablekeep/shared/warehouse"
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

// notifyBucket is a bucket whose notification configuration is out (or
// err).
type notifyBucket struct {
	fakeBucket
	out   s3.GetBucketNotificationConfigurationOutput
	err   error
	calls int
}

func (f *notifyBucket) GetBucketNotificationConfiguration(context.Context, *s3.GetBucketNotificationConfigurationInput, ...func(*s3.Options)) (*s3.GetBucketNotificationConfigurationOutput, error) {
	f.calls++
	if f.err != nil {
		return nil, f.err
	}
	return &f.out, nil
}

// TestCheckNotificationsFallsBack: at the compactor's cold start with
// notifications on (SafetyScanEvery 6h), a bucket delivering to
// EventBridge or to a queue keeps the safety-net scan; one sending nothing
// (an existing bucket nobody configured), or whose configuration cannot
// be read (AccessDenied), makes every pass list every table
// (SafetyScanEvery 0), logs an error naming the fix, counts
// NotificationsMissing on each scheduled pass and puts the problem on the
// status page. A store answering NotImplemented (versitygw) is left as
// configured; so is a role other than the compactor, or notifications off
// (no request).
func TestCheckNotificationsFallsBack(t *testing.T) {
	ctx := context.Background()
	const every = 6 * time.Hour
	denied := &smithy.GenericAPIError{Code: "AccessDenied", Message: "no"}
	for _, c := range []struct {
		name     string
		role     Role
		every    time.Duration
		bucket   *notifyBucket
		fallback bool
		calls    int
	}{
		{"EventBridge delivery", RoleCompactor, every, &notifyBucket{out: s3.GetBucketNotificationConfigurationOutput{EventBridgeConfiguration: &types.EventBridgeConfiguration{}}}, false, 1},
		{"direct to a queue", RoleCompactor, every, &notifyBucket{out: s3.GetBucketNotificationConfigurationOutput{QueueConfigurations: []types.QueueConfiguration{{QueueArn: aws.String("arn:aws:sqs:us-east-1:1:q")}}}}, false, 1},
		{"nothing configured", RoleCompactor, every, &notifyBucket{}, true, 1},
		{"only a topic", RoleCompactor, every, &notifyBucket{out: s3.GetBucketNotificationConfigurationOutput{TopicConfigurations: []types.TopicConfiguration{{TopicArn: aws.String("arn:aws:sns:us-east-1:1:t")}}}}, true, 1},
		{"access denied", RoleCompactor, every, &notifyBucket{err: denied}, true, 1},
		{"not implemented (local stack)", RoleCompactor, every, &notifyBucket{err: &smithy.GenericAPIError{Code: "NotImplemented"}}, false, 1},
		{"notifications off", RoleCompactor, 0, &notifyBucket{}, false, 0},
		{"the cleaner", RoleCleaner, every, &notifyBucket{}, false, 0},
	} {
		var log bytes.Buffer
		d := &Deps{Config: Config{Role: c.role, Bucket: "bkt", Prefix: "warehouse", SafetyScanEvery: c.every},
			Logger: NewLogger(&log, "info", c.role), bucketAPI: c.bucket}
		d.checkNotifications(ctx)
		if c.bucket.calls != c.calls {
			t.Errorf("%s: %d requests, want %d", c.name, c.bucket.calls, c.calls)
		}
		fellBack := d.Config.SafetyScanEvery == 0 && c.every != 0
		if fellBack != c.fallback || (d.notifyProblem != "") != c.fallback || (len(d.bucketNotes()) == 1) != c.fallback {
			t.Errorf("%s: SafetyScanEvery %s, problem %q; want fallback=%v", c.name, d.Config.SafetyScanEvery, d.notifyProblem, c.fallback)
		}
		if c.fallback && (!strings.Contains(log.String(), `"level":"ERROR"`) || !strings.Contains(log.String(), "EventBridge delivery")) {
			t.Errorf("%s: the log does not say it loudly with the fix: %s", c.name, log.String())
		}
		if !c.fallback && c.every != 0 && d.Config.SafetyScanEvery != c.every {
			t.Errorf("%s: SafetyScanEvery changed to %s", c.name, d.Config.SafetyScanEvery)
		}
	}
	if err := CheckNotifications(ctx, &notifyBucket{}, "bkt"); !errors.Is(err, ErrNoNotifications) {
		t.Errorf("CheckNotifications on a bucket sending nothing: %v, want ErrNoNotifications", err)
	}
}

// TestCheckNotificationsLocalStack: versitygw (the local stack) answers
// GetBucketNotificationConfiguration with NotImplemented; the cold-start
// check on a real S3 client then leaves the safety-net scan as configured
// and says why in the log, with one request.
func TestCheckNotificationsLocalStack(t *testing.T) {
	st := testenv.S3Store(t)
	var log bytes.Buffer
	d := &Deps{Config: Config{Role: RoleCompactor, Bucket: st.Bucket(), Prefix: "warehouse", SafetyScanEvery: 6 * time.Hour},
		Logger: NewLogger(&log, "info", RoleCompactor), bucketAPI: st.Client()}
	d.checkNotifications(context.Background())
	if d.Config.SafetyScanEvery != 6*time.Hour || d.notifyProblem != "" || !strings.Contains(log.String(), "notification configuration not checked") {
		t.Fatalf("SafetyScanEvery %s, problem %q, log %s", d.Config.SafetyScanEvery, d.notifyProblem, log.String())
	}
}

// TestNotificationsMissingCounted: while the cold start's fallback is in
// effect every scheduled pass counts NotificationsMissing (the alarm's
// metric) and the status page it writes says why at the top.
func TestNotificationsMissingCounted(t *testing.T) {
	ctx := context.Background()
	disk, err := objstore.NewDisk(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	clk := fakeclock.New(time.Now().Truncate(time.Second))
	if _, err := catalog.Open(ctx, disk, "warehouse", table.Options{Clock: clk}); err != nil {
		t.Fatal(err)
	}
	var metrics bytes.Buffer
	d := &Deps{Config: Config{Role: RoleCompactor, Warehouse: "s3://bkt/warehouse", Bucket: "bkt", Prefix: "warehouse",
		Margin: 100 * time.Millisecond, Lease: 5 * time.Minute},
		Logger: NewLogger(io.Discard, "info", RoleCompactor), Clock: clk, Store: disk, Root: "warehouse",
		Locker: lock.NewInProcess(clk), Queue: queue.NewEmbedded(queue.EmbeddedOptions{}), Metrics: &metrics,
		notifyProblem: "manifest notifications are on but not delivered"}
	event := []byte(`{"version":"0","id":"x","detail-type":"Scheduled Event","source":"aws.events","time":"2026-01-01T00:00:00Z","detail":{}}`)
	if _, err := d.Compact(ctx, event); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(metrics.String(), `"NotificationsMissing":1`) {
		t.Errorf("metrics lack NotificationsMissing 1: %s", metrics.String())
	}
	page, err := disk.Get(ctx, "warehouse/"+warehouse.StatusPageKey)
	if err != nil || !strings.Contains(string(page), "Warehouse unhealthy: manifest notifications are on but not delivered") {
		t.Errorf("status page: %v\n%.2000s", err, page)
	}
}
