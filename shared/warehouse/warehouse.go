package warehouse

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/tablekeep/tablekeep/shared/catalog"
	"github.com/tablekeep/tablekeep/shared/clock"
	"github.com/tablekeep/tablekeep/shared/formats"
	"github.com/tablekeep/tablekeep/shared/lock"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/queue"
	"github.com/tablekeep/tablekeep/shared/table"
	"github.com/tablekeep/tablekeep/shared/telemetry"
)

// Warehouse is an opened warehouse, local (OpenLocal) or on AWS (OpenAWS).
type Warehouse struct {
	// URI names it: the directory, or s3://bucket/prefix.
	URI string
	// Dir is a local warehouse's directory ("" on S3).
	Dir string
	// Root is the warehouse's prefix in Store ("" locally).
	Root string
	S3   bool
	// Store is one request counter (*objstore.Counting) shared by the
	// catalog and the tables: maintenance steps log their requests as its
	// differences.
	Store objstore.Store
	// Catalog is the warehouse's _registry and _stats; on AWS it is nil
	// until OpenCatalog (OpenAWS does no I/O).
	Catalog *catalog.Catalog
	// Locker takes the tables' lease locks: lock files under _locks/, or
	// the DynamoDB lock table; nil on S3 without a lock table (reads only).
	Locker lock.Locker
	// Queue is the in-process cleanup queue that Pass drains; nil when
	// Remote is set.
	Queue *queue.Embedded
	// Remote is the deployment's cleanup queue (SQS): ranges go there for
	// its cleaner function, and Pass does not drain them.
	Remote queue.Queue
	Clock  clock.Clock
	Logger *slog.Logger
	// Owner names the lock holder (e.g. "host/pid"); Options.Owner
	// overrides it per invocation.
	Owner string
	// LockNamespace prefixes every lock name: "" locally (the lock files
	// are the warehouse's own), "s3://bucket/prefix/" on AWS, so stacks
	// sharing one lock table never share a lock.
	LockNamespace string
	// Lease, LockWait and Margin are the runner's (0: its defaults).
	Lease, LockWait, Margin time.Duration
	// LockTable is the DynamoDB lock table (AWS, for messages).
	LockTable string
	// AWS is the SDK configuration the DynamoDB and SQS clients were built
	// with (zero when none was needed), for the caller's other clients.
	AWS aws.Config

	bucket, prefix string
	bucketAPI      BucketAPI
	sqsEndpoint    string
	mu             sync.Mutex
}

// LocalOptions configure OpenLocal.
type LocalOptions struct {
	Clock  clock.Clock  // nil: the system clock
	Logger *slog.Logger // nil: discard
	// Wrap, if set, wraps the directory store (e.g. a request counter or a
	// latency profile); an *objstore.Counting it returns is the
	// warehouse's counter.
	Wrap func(objstore.Store) objstore.Store
}

// OpenLocal opens (creating if needed) the warehouse in dir: the directory
// as the store, its catalog, a lock file per table under _locks/ and an
// in-process cleanup queue.
func OpenLocal(ctx context.Context, dir string, o LocalOptions) (*Warehouse, error) {
	clock, logger := clock.Or(o.Clock), o.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	disk, err := objstore.NewDisk(dir)
	if err != nil {
		return nil, err
	}
	var st objstore.Store = disk
	if o.Wrap != nil {
		st = o.Wrap(st)
	}
	// One counter for the catalog and the tables: the runner diffs it per
	// maintenance step (sequential), so step logs include catalog requests.
	counting, ok := st.(*objstore.Counting)
	if !ok {
		counting = objstore.NewCounting(st)
	}
	st = counting
	cat, err := catalog.Open(ctx, st, "", table.Options{Clock: clock, Logger: logger})
	if err != nil {
		return nil, err
	}
	locks := filepath.Join(dir, "_locks")
	if err := os.MkdirAll(locks, 0o755); err != nil {
		return nil, err
	}
	locker, err := lock.NewFileLocker(locks, clock)
	if err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	return &Warehouse{
		URI: dir, Dir: dir, Store: st, Catalog: cat, Locker: locker, Clock: clock, Logger: logger,
		Queue: queue.NewEmbedded(queue.EmbeddedOptions{Clock: clock, MaxReceives: 5}),
		Owner: fmt.Sprintf("%s/%d", host, os.Getpid()),
	}, nil
}

// TableOptions are the options the warehouse's tables are opened with.
func (w *Warehouse) TableOptions() table.Options {
	return table.Options{Clock: w.Clock, Logger: w.Logger}
}

// cleanupQueue is where cleanup ranges (and a cleaner's continuations) go.
func (w *Warehouse) cleanupQueue() queue.Queue {
	if w.Remote != nil {
		return w.Remote
	}
	return w.Queue
}

// Options vary the maintenance parts per pass or invocation; a zero field
// is the warehouse's.
type Options struct {
	// Catalog overrides w.Catalog (e.g. the catalog an invocation opened).
	Catalog maintenance.Catalog
	Owner   string
	Logger  *slog.Logger
	Metrics *telemetry.Metrics
	DryRun  bool
	// MaxDeletes bounds a sweep's deletes per table (0: no bound).
	MaxDeletes int
}

func (w *Warehouse) logger(o Options) *slog.Logger {
	if o.Logger != nil {
		return o.Logger
	}
	return w.Logger
}

func (w *Warehouse) catalog(o Options) maintenance.Catalog {
	if o.Catalog != nil {
		return o.Catalog
	}
	if w.Catalog != nil {
		return w.Catalog
	}
	return nil
}

// NewRunner is the maintenance runner over the warehouse: its store,
// catalog, locker and clock, cleanup ranges to its queue, locks owned by
// the owner in the warehouse's namespace, and datasets of every format
// opened by formats.Open.
func (w *Warehouse) NewRunner(o Options) *maintenance.Runner {
	log := w.logger(o)
	comp := maintenance.NewCompactor(log, w.Clock)
	if w.Margin > 0 {
		comp.Margin = w.Margin
	}
	owner := o.Owner
	if owner == "" {
		owner = w.Owner
	}
	// Every registered dataset (tablekeep's, Lance) is compacted and pruned
	// through its Source: formats.NewRunner wires formats.Open.
	return formats.NewRunner(&maintenance.Runner{
		Store: w.Store, Catalog: w.catalog(o), Locker: w.Locker, Queue: maintenance.QueueEnqueuer{Q: w.cleanupQueue()},
		Compactor: comp, Clock: w.Clock, Logger: log, Owner: owner, DryRun: o.DryRun,
		Lease: w.Lease, LockWait: w.LockWait, Margin: w.Margin, Metrics: o.Metrics,
		LockNamespace: w.LockNamespace,
	})
}

// NewCleaner is the cleaner over the warehouse: ranges resolved in its
// catalog, continuations to its queue, datasets of every format opened by
// formats.Open.
func (w *Warehouse) NewCleaner(o Options) *maintenance.Cleaner {
	return formats.NewCleaner(&maintenance.Cleaner{
		Store: w.Store, Tables: w.catalog(o), Requeue: maintenance.QueueEnqueuer{Q: w.cleanupQueue()}, Logger: w.logger(o),
		OpenOpts: w.TableOptions(), Metrics: o.Metrics,
	})
}

// Sweeper sweeps the warehouse's tables (maintenance.SweepTable), each at
// the time it starts.
type Sweeper struct {
	Store objstore.Store
	Clock clock.Clock
	// Options are the sweep's; Now is set at each Sweep.
	Options maintenance.SweepOptions
}

// NewSweeper is the orphan sweep over the warehouse, with datasets of
// every format opened by formats.Open (a Lance dataset: SweepSourceFiles).
func (w *Warehouse) NewSweeper(o Options) *Sweeper {
	return &Sweeper{Store: w.Store, Clock: w.Clock, Options: formats.SweepOptions(maintenance.SweepOptions{
		MaxDeletes: o.MaxDeletes, DryRun: o.DryRun, Logger: w.logger(o), Clock: w.Clock,
		Metrics: o.Metrics, Table: w.TableOptions(),
	})}
}

// Sweep sweeps one registered table.
func (s *Sweeper) Sweep(ctx context.Context, ref maintenance.TableRef) (maintenance.SweepResult, error) {
	o := s.Options
	o.Now = s.Clock.Now()
	return maintenance.SweepTable(ctx, s.Store, ref, o)
}
