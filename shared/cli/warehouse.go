package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/tablekeep/tablekeep/shared/catalog"
	"github.com/tablekeep/tablekeep/shared/clock"
	"github.com/tablekeep/tablekeep/shared/lock"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/table"
	"github.com/tablekeep/tablekeep/shared/warehouse"
)

// Environment variables of the local stack (infra/stack-up.sh writes them
// to .stack/env). The CLI uses them as the endpoints when the AWS SDK's
// standard endpoint variables are unset, so `source .stack/env` is enough.
const (
	EnvStackS3Endpoint  = "TABLEKEEP_S3_ENDPOINT"  // versitygw: AWS_ENDPOINT_URL_S3
	EnvStackAWSEndpoint = "TABLEKEEP_AWS_ENDPOINT" // moto: AWS_ENDPOINT_URL_DYNAMODB, AWS_ENDPOINT_URL_SQS
)

// stackEndpoint is the local stack's endpoint for a service whose standard
// variable std (AWS_ENDPOINT_URL_S3, _DYNAMODB, _SQS) is unset: $from
// ("" when std is set or from is not: the SDK's variables decide). The
// environment is read, never written.
func stackEndpoint(std, from string) string {
	if os.Getenv(std) != "" {
		return ""
	}
	return os.Getenv(from)
}

// warehouseFlags are the flags naming a warehouse and its services.
type warehouseFlags struct {
	URI       string // --warehouse, or TABLEKEEP_WAREHOUSE
	LockTable string // --lock-table, or TABLEKEEP_LOCK_TABLE (S3 only)
	QueueURL  string // --queue-url (S3 only): the deployment's cleanup queue
	ahead     time.Duration
}

// addWarehouseFlags adds --warehouse and, for commands that maintain,
// --lock-table and --queue-url.
func addWarehouseFlags(cmd *cobra.Command, wf *warehouseFlags, maintains bool) {
	f := cmd.Flags()
	f.StringVar(&wf.URI, "warehouse", "", "the warehouse: s3://bucket/prefix or a local directory (default $"+warehouse.EnvWarehouse+")")
	if maintains {
		f.StringVar(&wf.LockTable, "lock-table", "", "S3: the DynamoDB lock table the Lambda functions use (default $"+warehouse.EnvLockTable+")")
		f.StringVar(&wf.QueueURL, "queue-url", "", "S3: send cleanup to the deployment's SQS queue (its cleaner function drains it) instead of cleaning in-process")
	}
}

// whouse is an opened warehouse (shared/warehouse): a local directory
// (warehouse.OpenLocal: a lock file per table, an in-process queue) or
// s3://bucket/prefix with the clients the Lambda functions use
// (warehouse.OpenAWS): the S3 store, the DynamoDB lock, and the SQS queue
// when --queue-url is given. The lease, lock wait and lock namespace are
// the functions' (S3) or the embedded defaults (local).
type whouse struct {
	*warehouse.Warehouse
	// CheckBucket (S3) checks the bucket the way the functions' cold start
	// does: warehouse.ErrVersionedBucket when they would refuse it. nil:
	// local.
	CheckBucket func(context.Context) error
}

// ErrNoLockTable: maintenance of an S3 warehouse needs the functions' lock.
var ErrNoLockTable = errors.New("no lock table")

// ErrNoWarehouse: the location has no _registry; only `tablekeep register`
// creates one.
var ErrNoWarehouse = catalog.ErrNoWarehouse

// openMode says what a command does with the warehouse it opens.
type openMode struct {
	// Lock: it maintains, so an S3 warehouse must have a lock table (the
	// one the compactor function uses, so the CLI and the functions
	// exclude each other).
	Lock bool
	// Create: it may create the warehouse (register). Every other command
	// opens an existing one only and writes nothing into a location that
	// is not a warehouse: ErrNoWarehouse.
	Create bool
}

// noWarehouse is the one-line error for a location without _registry.
func noWarehouse(uri string) error {
	return fmt.Errorf("%w at %s (no %s): `tablekeep register` creates one", ErrNoWarehouse, uri, catalog.RegistryName)
}

// openWarehouse opens the warehouse wf names (see openMode). With
// --verbose, Run logs the requests made through its store.
func openWarehouse(ctx context.Context, app *App, wf warehouseFlags, mode openMode) (*whouse, error) {
	w, err := openWarehouseStore(ctx, app, wf, mode)
	if err == nil && app.Verbose {
		if c, ok := w.Store.(*objstore.Counting); ok && app.counting == nil {
			app.counting = c
		}
	}
	return w, err
}

func openWarehouseStore(ctx context.Context, app *App, wf warehouseFlags, mode openMode) (*whouse, error) {
	uri := wf.URI
	if uri == "" {
		uri = os.Getenv(warehouse.EnvWarehouse)
	}
	if uri == "" {
		return nil, Usagef("--warehouse is required (s3://bucket/prefix or a local directory; or set %s)", warehouse.EnvWarehouse)
	}
	scheme, _, path, err := objstore.ParseURI(uri)
	if err != nil {
		return nil, Usagef("--warehouse: %v", err)
	}
	var clock clock.Clock = clock.System()
	if wf.ahead != 0 {
		clock = lock.AheadClock{Clock: clock, Ahead: wf.ahead}
	}
	if scheme == "file" {
		if wf.LockTable != "" || wf.QueueURL != "" {
			return nil, Usagef("--lock-table and --queue-url are for s3:// warehouses; %s is local: it locks with files under _locks/ and cleans up in-process", uri)
		}
		if st, err := os.Stat(path); err != nil || !st.IsDir() {
			if err == nil {
				return nil, fmt.Errorf("warehouse %s: is a file, not a directory", uri)
			}
			return nil, fmt.Errorf("warehouse %s: no such directory", uri)
		}
		if !mode.Create {
			disk, err := objstore.NewDisk(path)
			if err != nil {
				return nil, fmt.Errorf("warehouse %s: %w", uri, err)
			}
			if ok, err := catalog.Exists(ctx, disk, ""); err != nil {
				return nil, fmt.Errorf("warehouse %s: %w", uri, err)
			} else if !ok {
				return nil, noWarehouse(uri)
			}
		}
		w, err := warehouse.OpenLocal(ctx, path, warehouse.LocalOptions{Clock: clock, Logger: app.Logger})
		if err != nil {
			return nil, fmt.Errorf("warehouse %s: %w", uri, err)
		}
		w.URI = uri
		w.Owner = cliOwner()
		return &whouse{Warehouse: w}, nil
	}
	return openS3Warehouse(ctx, app, wf, uri, mode, clock)
}

func openS3Warehouse(ctx context.Context, app *App, wf warehouseFlags, uri string, mode openMode, clock clock.Clock) (*whouse, error) {
	write := mode.Lock
	lockTable := wf.LockTable
	if lockTable == "" {
		lockTable = os.Getenv(warehouse.EnvLockTable)
	}
	if write && lockTable == "" {
		return nil, &UsageError{Err: fmt.Errorf("%s: %w: maintaining an S3 warehouse needs the DynamoDB lock table the "+
			"Lambda functions use: pass --lock-table NAME or set %s (the stack's LockTableName output); "+
			"without a deployment, create one with: aws dynamodb create-table --table-name NAME "+
			"--attribute-definitions AttributeName=name,AttributeType=S --key-schema AttributeName=name,KeyType=HASH "+
			"--billing-mode PAY_PER_REQUEST", uri, ErrNoLockTable, warehouse.EnvLockTable)}
	}
	if wf.QueueURL != "" {
		if u, err := url.Parse(wf.QueueURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return nil, Usagef("--queue-url %q is not a queue URL (want https://sqs.REGION.amazonaws.com/ACCOUNT/NAME)", wf.QueueURL)
		}
	}
	// The functions' clients (warehouse.OpenAWS, as their cold start):
	// the same store, lock and queue clients, the same lease, lock wait
	// and lock names.
	lease, lockWait, err := warehouse.LockTimesFromEnv(os.Getenv)
	if err != nil {
		return nil, Usagef("%v", err)
	}
	cfg := warehouse.AWSConfig{URI: uri, Lease: lease, LockWait: lockWait, Clock: clock, Logger: app.Logger,
		S3Endpoint:       stackEndpoint("AWS_ENDPOINT_URL_S3", EnvStackS3Endpoint),
		DynamoDBEndpoint: stackEndpoint("AWS_ENDPOINT_URL_DYNAMODB", EnvStackAWSEndpoint),
		SQSEndpoint:      stackEndpoint("AWS_ENDPOINT_URL_SQS", EnvStackAWSEndpoint)}
	if write {
		cfg.LockTable = lockTable
	}
	cfg.QueueURL = wf.QueueURL
	w, err := warehouse.OpenAWS(ctx, cfg)
	if err != nil {
		return nil, s3Error(uri, err)
	}
	w.Owner = cliOwner()
	if _, err = w.OpenCatalog(ctx, mode.Create); errors.Is(err, catalog.ErrNoWarehouse) {
		return nil, noWarehouse(uri)
	}
	if err != nil && mode.Create {
		err = fmt.Errorf("open warehouse %s: %w", uri, err) // as the functions' first open
	}
	if err != nil {
		return nil, s3Error(uri, err)
	}
	if !write {
		w.Locker = nil
	}
	check := func(ctx context.Context) error {
		// As the functions' cold start: refused, or fine (a check that
		// could not be made is logged).
		_, err := w.CheckBucket(ctx)
		if err != nil && !errors.Is(err, warehouse.ErrVersionedBucket) {
			w.Logger.Warn("bucket check failed; running without it", "err", err)
			return nil
		}
		return err
	}
	return &whouse{Warehouse: w, CheckBucket: check}, nil
}

// cliOwner names the CLI as a lock holder.
func cliOwner() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("cli/%s/%d", host, os.Getpid())
}

// checkLock takes and releases a probe lock once, up front, on an S3
// warehouse opened to maintain: a wrong lock table (or no access to it) is
// one line before any table is touched, not one error per table and again
// in the summary.
func (w *whouse) checkLock(ctx context.Context) error {
	if !w.S3 || w.Locker == nil {
		return nil
	}
	l, err := w.Locker.Acquire(ctx, w.LockNamespace+"cli-lock-check", lock.AcquireOptions{
		Owner: cliOwner(), Lease: 10 * time.Second, MaxWait: -1})
	if errors.Is(err, lock.ErrLockHeld) {
		return nil // another CLI's probe: the table is there
	}
	var oe *net.OpError
	switch {
	case errors.As(err, &oe):
		return endpointError(fmt.Sprintf("%s: lock table %s", w.URI, w.LockTable), err, oe)
	case err != nil:
		return fmt.Errorf("%s: lock table %s: %s", w.URI, w.LockTable, sdkOneLine(err))
	}
	_ = w.Locker.Release(context.WithoutCancel(ctx), l)
	return nil
}

// tableOptions are the options tables of the warehouse are opened with.
func (w *whouse) tableOptions() table.Options { return w.TableOptions() }

// resolve finds a registered table, with an error that names the
// warehouse and lists how to see the registered ones.
func (w *whouse) resolve(ctx context.Context, name string) (maintenance.TableRef, error) {
	ref, err := w.Catalog.Resolve(ctx, name)
	if errors.Is(err, maintenance.ErrUnknownTable) {
		return ref, fmt.Errorf("%w %q in warehouse %s (see `tablekeep tables`)", maintenance.ErrUnknownTable, name, w.URI)
	}
	return ref, err
}
