package awsfn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/tablekeep/tablekeep/shared/catalog"
	"github.com/tablekeep/tablekeep/shared/clock"
	"github.com/tablekeep/tablekeep/shared/lock"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/queue"
	"github.com/tablekeep/tablekeep/shared/table"
	"github.com/tablekeep/tablekeep/shared/warehouse"
)

// Deps is what the handlers run on, built once per cold start.
type Deps struct {
	Config Config
	Logger *slog.Logger
	Clock  clock.Clock
	Store  objstore.Store
	Root   string      // warehouse prefix in the bucket
	Locker lock.Locker // compactor only
	Queue  queue.Queue // compactor and cleaner
	// Jobs is the compaction queue (fan-out); nil: none configured.
	Jobs JobSender
	// Metrics receives EMF lines (stdout in Lambda).
	Metrics io.Writer

	// bucketAPI reads the bucket's versioning and lifecycle at cold start
	// (nil for a store that is not S3).
	bucketAPI BucketAPI
	// notifyProblem: the compactor's cold start found manifest
	// notifications on but not delivered, and fell back to listing every
	// table every pass (checkNotifications).
	notifyProblem string

	mu  sync.Mutex
	cat *catalog.Catalog
}

// NewLogger returns the JSON logger the functions use.
func NewLogger(w io.Writer, level string, role Role) *slog.Logger {
	var l slog.Level
	_ = l.UnmarshalText([]byte(level))
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l})).With("function", string(role))
}

// New builds the clients of cfg. It does no I/O against the services: the
// warehouse catalog is opened on first use (and retried on a later
// invocation if that fails).
func New(ctx context.Context, cfg Config, logger *slog.Logger) (*Deps, error) {
	d := &Deps{Config: cfg, Logger: logger, Clock: clock.System(), Metrics: os.Stdout}
	if cfg.ClockOffset != 0 {
		d.Clock = lock.AheadClock{Clock: clock.System(), Ahead: cfg.ClockOffset} // TEST ONLY
		logger.Warn("TEST ONLY: clock offset in effect", "offset", cfg.ClockOffset.String())
	}
	// The warehouse's clients (shared/warehouse, as the CLI builds them):
	// the S3 store, and the SQS queue and DynamoDB lock of the role.
	acfg := warehouse.AWSConfig{URI: cfg.Warehouse, Lease: cfg.Lease, LockWait: cfg.LockWait, Margin: cfg.Margin,
		Clock: d.Clock, Logger: logger}
	if cfg.CrashAfter != nil {
		logger.Warn("TEST ONLY: crash point in effect", "crash_point", cfg.CrashAfter.String())
		acfg.Wrap = func(st objstore.Store) objstore.Store { return crashingStore(st, cfg.CrashAfter, logger) }
	}
	if cfg.Role != RoleSweeper {
		acfg.QueueURL = cfg.QueueURL
	}
	if cfg.Role == RoleCompactor {
		acfg.LockTable = cfg.LockTable
	}
	w, err := warehouse.OpenAWS(ctx, acfg)
	if errors.Is(err, warehouse.ErrNoRegion) {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if err != nil {
		return nil, err
	}
	d.Store, d.Root, d.Locker, d.Queue, d.bucketAPI = w.Store, w.Root, w.Locker, w.Remote, w.BucketAPI()
	if cfg.Role == RoleCompactor && cfg.CompactionQueueURL != "" {
		d.Jobs = SQSJobSender{Client: w.SQSClient(), QueueURL: cfg.CompactionQueueURL}
	}
	return d, nil
}

// warehouse is the warehouse d's clients make (shared/warehouse), whose
// constructors build the runner, the cleaner and the sweeper.
func (d *Deps) warehouse() *warehouse.Warehouse {
	return &warehouse.Warehouse{URI: d.Config.Warehouse, Root: d.Root, S3: true, Store: d.Store, Locker: d.Locker,
		Remote: d.Queue, Clock: d.Clock, Logger: d.Logger, Lease: d.Config.Lease, LockWait: d.Config.LockWait,
		Margin: d.Config.Margin,
		// Locks are per warehouse: stacks may share one lock table.
		LockNamespace: d.Config.Warehouse + "/"}
}

// Catalog opens the warehouse catalog once (creating _registry and _stats
// on a new warehouse).
func (d *Deps) Catalog(ctx context.Context) (*catalog.Catalog, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cat != nil {
		return d.cat, nil
	}
	cat, err := catalog.Open(ctx, d.Store, d.Root, d.tableOptions())
	if err != nil {
		return nil, fmt.Errorf("open warehouse %s: %w", d.Config.Warehouse, err)
	}
	d.cat = cat
	return cat, nil
}

func (d *Deps) tableOptions() table.Options {
	return table.Options{Clock: d.Clock, Logger: d.Logger}
}

// logger adds the invocation's request id.
func (d *Deps) logger(ctx context.Context) *slog.Logger {
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		return d.Logger.With("request_id", lc.AwsRequestID)
	}
	return d.Logger
}

func requestID(ctx context.Context) string {
	if lc, ok := lambdacontext.FromContext(ctx); ok && lc.AwsRequestID != "" {
		return lc.AwsRequestID
	}
	return fmt.Sprintf("local-%d", time.Now().UnixNano())
}

// workContext returns a context ending margin before ctx's deadline, with
// that deadline expressed on d.Clock: with the test-only clock offset the
// deadline is shifted by the offset too, so "time left" computed as
// deadline - Clock.Now() stays right. Cancellation of ctx always propagates.
func (d *Deps) workContext(ctx context.Context, margin time.Duration) (context.Context, context.CancelFunc) {
	dl, ok := ctx.Deadline()
	if !ok {
		return context.WithCancel(ctx)
	}
	dl = dl.Add(-margin)
	if d.Config.ClockOffset == 0 {
		return context.WithDeadline(ctx, dl)
	}
	c, cancel := context.WithDeadline(context.WithoutCancel(ctx), dl.Add(d.Config.ClockOffset))
	stop := context.AfterFunc(ctx, cancel)
	timer := time.AfterFunc(time.Until(dl), cancel)
	return c, func() { stop(); timer.Stop(); cancel() }
}

// EnvFunction picks the role of the one bootstrap (functions/tablekeep)
// that all three functions run; template.yaml sets it per function.
const EnvFunction = "TABLEKEEP_FUNCTION"

// MainFromEnv is the main function of functions/tablekeep: Main of the role
// named by TABLEKEEP_FUNCTION. Any other value fails every invocation with
// an error naming the variable.
func MainFromEnv() {
	role := Role(os.Getenv(EnvFunction))
	for _, r := range Roles {
		if role == r {
			Main(role)
			return
		}
	}
	err := fmt.Errorf("%w: %s=%q: want compactor, cleaner or sweeper", ErrConfig, EnvFunction, role)
	NewLogger(os.Stdout, "info", role).Error("cold start failed; every invocation will fail until the configuration is fixed", "err", err)
	lambda.Start(func(context.Context, json.RawMessage) (json.RawMessage, error) { return nil, err })
}

// Main is the main function of role (MainFromEnv calls it): it loads and
// validates the configuration, then serves invocations. A configuration
// error is logged at cold start and returned by every invocation, so it
// shows both in the logs and in the invoke response.
func Main(role Role) {
	cfg, err := LoadConfig(role, os.Getenv)
	logger := NewLogger(os.Stdout, cfg.LogLevel, role)
	if err == nil && cfg.Local != nil {
		// LOCAL ONLY (sam local invoke with the local env file): every
		// client goes to the local stack with the role's local keys.
		for k, v := range cfg.Local.Environ() {
			if serr := os.Setenv(k, v); serr != nil && err == nil {
				err = serr
			}
		}
		logger.Warn("LOCAL ONLY: talking to the local stack", "s3", cfg.Local.S3Endpoint, "aws", cfg.Local.AWSEndpoint)
	}
	var d *Deps
	if err == nil {
		d, err = New(context.Background(), cfg, logger)
	}
	if err == nil {
		err = d.checkBucket(context.Background())
	}
	if err == nil {
		d.checkNotifications(context.Background())
	}
	if err != nil {
		logger.Error("cold start failed; every invocation will fail until the configuration is fixed", "err", err)
		lambda.Start(func(context.Context, json.RawMessage) (json.RawMessage, error) { return nil, err })
		return
	}
	logger.Info("cold start", "warehouse", cfg.Warehouse, "lock_table", cfg.LockTable, "queue_url", cfg.QueueURL,
		"margin", cfg.Margin.String(), "lease", cfg.Lease.String())
	switch role {
	case RoleCompactor:
		lambda.Start(d.compactWithinLease)
	case RoleCleaner:
		lambda.Start(d.Clean)
	case RoleSweeper:
		lambda.Start(d.Sweep)
	}
}

// compactWithinLease is the compactor's handler: HandleCompactor (a
// schedule's run, table jobs, manifest notifications), unless the table
// lease does not exceed the invocation's time. A lease shorter than the
// function's timeout could expire while the function still works under it
// (template: TableLease must exceed CompactorTimeout); every such
// invocation fails with a configuration error naming both, so the errors
// alarm fires, and nothing is locked or written.
func (d *Deps) compactWithinLease(ctx context.Context, raw json.RawMessage) (any, error) {
	if err := leaseCovers(ctx, d.Config.Lease); err != nil {
		d.logger(ctx).ErrorContext(ctx, "refusing to run", "err", err)
		return nil, err
	}
	return d.HandleCompactor(ctx, raw)
}

// leaseCovers fails when lease does not exceed the time left before ctx's
// deadline (at the start of an invocation: the function's timeout).
func leaseCovers(ctx context.Context, lease time.Duration) error {
	dl, ok := ctx.Deadline()
	if !ok {
		return nil
	}
	if left := time.Until(dl); left >= lease {
		return fmt.Errorf("%w (%s): %s=%s must exceed the function's timeout (%s left in this invocation); "+
			"raise the lease (at most %s) or lower the timeout (template: TableLease > CompactorTimeout)",
			ErrConfig, RoleCompactor, EnvLease, lease, left.Round(time.Second), MaxLease)
	}
	return nil
}

// CheckBucket checks the deployment's bucket as a cold start does
// (checkBucket): ErrVersionedBucket when it would be refused; nil when it
// is fine or could not be checked (logged). status reports it as health.
func (d *Deps) CheckBucket(ctx context.Context) error { return d.checkBucket(ctx) }

// checkBucket runs CheckBucket at cold start. A versioned bucket without a
// noncurrent-version expiration rule is refused (ErrVersionedBucket: every
// invocation fails with it, naming the fix); a check that could not be made
// (an S3 error) is logged and the function runs, so a transient error at
// cold start does not stop maintenance until the next one.
func (d *Deps) checkBucket(ctx context.Context) error {
	if d.bucketAPI == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := CheckBucket(ctx, d.bucketAPI, d.Config.Bucket, d.Config.Prefix)
	switch {
	case errors.Is(err, ErrVersionedBucket):
		return err
	case err != nil:
		d.Logger.Warn("bucket check failed; running without it", "err", err)
	case c.Versioning != "" && !c.MarkersExpire:
		d.Logger.Warn("versioned bucket: no lifecycle rule removes expired delete markers (Expiration.ExpiredObjectDeleteMarker); listings slow down as markers pile up",
			"bucket", d.Config.Bucket, "versioning", c.Versioning, "noncurrent_rule", c.Rule)
	case c.Versioning != "":
		d.Logger.Info("versioned bucket: noncurrent versions expire", "bucket", d.Config.Bucket, "rule", c.Rule)
	}
	return nil
}
