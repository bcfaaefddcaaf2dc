// Package warehouse is one warehouse for both backends: OpenLocal (a
// directory, a lock file per table, an in-process queue) and OpenAWS
// (s3://bucket/prefix with the Lambda functions' clients: the S3 store, the
// DynamoDB lock, the SQS cleanup queue) return the same Warehouse, which
// holds the store, the catalog, the locker, the queue and the clock.
//
// Its constructors, NewRunner, NewCleaner and NewSweeper, are the only
// place that wires the maintenance parts: the dataset opener of every
// format (formats.Open), the lock owner and the lock namespace. Pass is one
// maintenance pass: maintain (compaction and the prune plan under each
// table's lock), then drain the cleanup ranges in-process (local) or leave
// them on the deployment's queue (AWS), then sweep; with DryRun, the plans
// instead (what the cleaner and the sweep would delete).
//
// It sits above maintenance, catalog, lock, queue and formats, and below
// the packages that run maintenance: embedded, cli, awsfn, demo and bench.
// Only this package (and awsfn's cold start, through OpenAWS) builds the
// AWS clients the functions and the CLI share.
//
// Floor 6 of the layering (a package's floor is one above the highest floor
// it imports; floor 0 imports no tablekeep package). It owns the
// wiring of the maintenance parts. It must not import: shared/awsfn, shared/cli, shared/embedded.
package warehouse
