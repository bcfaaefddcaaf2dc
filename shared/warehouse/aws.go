package warehouse

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/logging"

	"github.com/tablekeep/tablekeep/shared/catalog"
	"github.com/tablekeep/tablekeep/shared/clock"
	"github.com/tablekeep/tablekeep/shared/internal/awshttp"
	"github.com/tablekeep/tablekeep/shared/lock"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/queue"
)

// Environment variables the Lambda functions and the CLI share (the
// functions' configuration, awsfn.LoadConfig, reads the rest).
const (
	EnvWarehouse = "TABLEKEEP_WAREHOUSE"  // s3://bucket/prefix
	EnvLockTable = "TABLEKEEP_LOCK_TABLE" // the DynamoDB lock table
	EnvLease     = "TABLEKEEP_LEASE"      // table lock lease (default 5m)
	EnvLockWait  = "TABLEKEEP_LOCK_WAIT"  // wait for a busy table lock (default 5s)
)

// Bounds and defaults of the table lock's lease and wait on AWS.
const (
	MinLease        = 10 * time.Second
	MaxLease        = 15 * time.Minute
	MaxLockWait     = time.Minute
	DefaultLease    = 5 * time.Minute
	DefaultLockWait = 5 * time.Second
)

// LockTimesFromEnv reads the lease and the lock wait (EnvLease,
// EnvLockWait) as the functions do: each a duration within its bounds, or
// its default when unset.
func LockTimesFromEnv(getenv func(string) string) (lease, wait time.Duration, err error) {
	lease, errLease := DurationFromEnv(getenv, EnvLease, DefaultLease, MinLease, MaxLease)
	wait, errWait := DurationFromEnv(getenv, EnvLockWait, DefaultLockWait, 0, MaxLockWait)
	return lease, wait, errors.Join(errLease, errWait)
}

// DurationFromEnv reads the duration variable name: def when unset, def
// and an error when it is not a duration, the value and an error when it
// is outside [lo, hi]. The functions' configuration (awsfn.LoadConfig)
// reads its durations with it too.
func DurationFromEnv(getenv func(string) string, name string, def, lo, hi time.Duration) (time.Duration, error) {
	v := strings.TrimSpace(getenv(name))
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return def, fmt.Errorf("%s=%q is not a duration (e.g. 30s, 5m)", name, v)
	}
	if d < lo || d > hi {
		return d, fmt.Errorf("%s=%s must be between %s and %s", name, d, lo, hi)
	}
	return d, nil
}

// ErrNoRegion: the AWS clients need a region (AWS_REGION).
var ErrNoRegion = errors.New("no AWS region (set AWS_REGION)")

// AWSConfig configures OpenAWS.
type AWSConfig struct {
	// URI is the warehouse, s3://bucket/prefix.
	URI string
	// LockTable, if set, is the DynamoDB lock table (Warehouse.Locker).
	LockTable string
	// QueueURL, if set, is the deployment's SQS cleanup queue
	// (Warehouse.Remote); else cleanup ranges go to an in-process queue.
	QueueURL string
	// Lease, LockWait and Margin are the runner's.
	Lease, LockWait, Margin time.Duration
	Clock                   clock.Clock  // nil: the system clock
	Logger                  *slog.Logger // nil: discard
	// S3Endpoint, DynamoDBEndpoint and SQSEndpoint, if set, are the
	// services' endpoints; else the SDK's standard variables
	// (AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL_DYNAMODB, AWS_ENDPOINT_URL_SQS,
	// AWS_ENDPOINT_URL) decide.
	S3Endpoint, DynamoDBEndpoint, SQSEndpoint string
	// Wrap, if set, wraps the S3 store (under the request counter).
	Wrap func(objstore.Store) objstore.Store
}

// OpenStore opens the store of a location as objstore.Open does; on S3,
// endpoint, if set, is the endpoint (path-style) instead of the SDK's
// standard variables.
func OpenStore(ctx context.Context, uri, endpoint string) (objstore.Store, string, error) {
	scheme, bucket, prefix, err := objstore.ParseURI(uri)
	if err != nil || scheme != "s3" || endpoint == "" {
		return objstore.Open(ctx, uri)
	}
	st, err := objstore.NewS3FromConfig(ctx, objstore.S3Options{Bucket: bucket, Endpoint: endpoint, PathStyle: true})
	if err != nil {
		return nil, "", fmt.Errorf("open %s: %w", uri, err)
	}
	return st, prefix, nil
}

// OpenAWS builds the clients of an s3://bucket/prefix warehouse, those the
// Lambda functions run on: the S3 store, the DynamoDB locker (LockTable
// set) and the SQS cleanup queue (QueueURL set). It does no I/O against the
// services: OpenCatalog opens the catalog.
func OpenAWS(ctx context.Context, cfg AWSConfig) (*Warehouse, error) {
	clock, logger := clock.Or(cfg.Clock), cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	scheme, bucket, prefix, err := objstore.ParseURI(cfg.URI)
	if err != nil {
		return nil, fmt.Errorf("warehouse %s: %w", cfg.URI, err)
	}
	if scheme != "s3" {
		return nil, fmt.Errorf("warehouse %s: want an s3://bucket/prefix URI", cfg.URI)
	}
	st, root, err := OpenStore(ctx, cfg.URI, cfg.S3Endpoint)
	if err != nil {
		return nil, fmt.Errorf("warehouse %s: %w", cfg.URI, err)
	}
	w := &Warehouse{
		URI: cfg.URI, Root: root, S3: true, Clock: clock, Logger: logger,
		Lease: cfg.Lease, LockWait: cfg.LockWait, Margin: cfg.Margin, LockTable: cfg.LockTable,
		// Locks are per warehouse: stacks may share one lock table.
		LockNamespace: cfg.URI + "/",
		bucket:        bucket, prefix: prefix,
	}
	if s3st, ok := st.(*objstore.S3); ok {
		w.bucketAPI = s3st.Client()
	}
	if cfg.Wrap != nil {
		st = cfg.Wrap(st)
	}
	// One request counter for the catalog and the tables: maintenance steps
	// log the requests they made as differences of it.
	w.Store = objstore.NewCounting(st)
	if cfg.LockTable == "" && cfg.QueueURL == "" {
		w.Queue = queue.NewEmbedded(queue.EmbeddedOptions{Clock: clock, MaxReceives: 5})
		return w, nil
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, config.WithLogger(logging.Nop{})) // as objstore's: errors say it
	if err != nil {
		return nil, fmt.Errorf("aws config: %w", err)
	}
	if awsCfg.Region == "" {
		return nil, ErrNoRegion
	}
	w.AWS = awshttp.Config(awsCfg) // DynamoDB and SQS: see package awshttp
	w.sqsEndpoint = cfg.SQSEndpoint
	if cfg.LockTable != "" {
		ddb := dynamodb.NewFromConfig(w.AWS, func(o *dynamodb.Options) {
			if cfg.DynamoDBEndpoint != "" {
				o.BaseEndpoint = aws.String(cfg.DynamoDBEndpoint)
			}
		})
		w.Locker = lock.NewDynamoLocker(ddb, cfg.LockTable, clock)
	}
	if cfg.QueueURL != "" {
		w.Remote = queue.NewSQS(w.SQSClient(), cfg.QueueURL, queue.SQSOptions{})
	} else {
		w.Queue = queue.NewEmbedded(queue.EmbeddedOptions{Clock: clock, MaxReceives: 5})
	}
	return w, nil
}

// SQSClient is an SQS client on the warehouse's AWS configuration (and its
// SQS endpoint), for other queues of the deployment.
func (w *Warehouse) SQSClient() *sqs.Client {
	return sqs.NewFromConfig(w.AWS, func(o *sqs.Options) {
		if w.sqsEndpoint != "" {
			o.BaseEndpoint = aws.String(w.sqsEndpoint)
		}
	})
}

// OpenCatalog opens the catalog once: create opens (creating _registry and
// _stats on a new warehouse), else only an existing one
// (catalog.ErrNoWarehouse). A failure is retried on the next call.
func (w *Warehouse) OpenCatalog(ctx context.Context, create bool) (*catalog.Catalog, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.Catalog != nil {
		return w.Catalog, nil
	}
	open := catalog.OpenExisting
	if create {
		open = catalog.Open
	}
	cat, err := open(ctx, w.Store, w.Root, w.TableOptions())
	if err != nil {
		return nil, err
	}
	w.Catalog = cat
	return cat, nil
}

// CheckBucket checks the warehouse's bucket as the functions' cold start
// does (CheckBucket: ErrVersionedBucket when they would refuse it). A
// store that is not S3 has nothing to check (zero BucketCheck, nil).
func (w *Warehouse) CheckBucket(ctx context.Context) (BucketCheck, error) {
	if w.bucketAPI == nil {
		return BucketCheck{}, nil
	}
	return CheckBucket(ctx, w.bucketAPI, w.bucket, w.prefix)
}

// BucketAPI is the S3 client the bucket check calls (nil when the store is
// not S3).
func (w *Warehouse) BucketAPI() BucketAPI { return w.bucketAPI }
