// Package maintenance keeps tablekeep tables healthy: a compactor that folds
// small and deletion-heavy fragments under a lease lock, a prune planner that
// raises a table's retention floor and enqueues prunable version ranges, a
// cleaner that drains those ranges with no lock held, and an orphan sweep.
//
// Compaction needs exclusive access and a time bound; cleanup needs neither.
// Holding a lock through tens of thousands of deletes is what froze the
// control plane in the seed report, so the cleaner never takes one.
//
// Floor 4 of the layering (a package's floor is one above the highest floor
// it imports; floor 0 imports no tablekeep package). It owns the maintenance
// verbs and their policy: the runner (runner.go, fleet_runner.go: lock,
// compact, plan, enqueue, stats, marks), the compactor, the prune planner
// and its guard, the cleaner and its delete pipeline, the drain, the dry
// run, health, the orphan sweep, the fleet scan (through shared/fleet, which
// owns `_fleet/`: the index, marks, scan state and the one backoff), the
// Source contract every format implements, tablekeep's own as TableSource
// with its fast paths as optional interfaces (source*.go, sweep_source.go;
// the contract's vocabulary is shared/dataset's) and
// the typed outcome of a table's maintenance (outcome.go). It takes its
// catalog, store, locker, queue, clock and metrics through fields, never
// from the environment. It must not import: shared/catalog, shared/formats,
// shared/lance, shared/awsfn, shared/embedded, shared/cli.
package maintenance
