// Package maintenance keeps tablekeep tables healthy: a compactor that folds
// small and deletion-heavy fragments under a lease lock, a prune planner that
// raises a table's retention floor and enqueues prunable version ranges, a
// cleaner that drains those ranges with no lock held, and an orphan sweep.
//
// Compaction needs exclusive access and a time bound; cleanup needs neither.
// Holding a lock through tens of thousands of deletes is what froze the
// control plane in the seed report, so the cleaner never takes one.
//
// Floor 3 of the layering (a package's floor is one above the highest floor
// it imports; floor 0 imports no tablekeep package). It owns the maintenance
// verbs and their policy: the runner (runner.go: lock, compact, plan,
// enqueue, and one table's stats and mark computed, written by neither:
// MaintainTable returns them), the mark and its rules after a maintenance
// (mark.go), the compactor, the prune planner and its guard, the
// cleaner and its delete pipeline, the drain, the dry run, health, the
// orphan sweep, the Source contract every format implements, tablekeep's
// own as TableSource with its fast paths as optional interfaces (source*.go,
// sweep_source.go; the contract's vocabulary is shared/dataset's) and the
// typed outcome of a table's maintenance (outcome.go). It takes its
// catalog, store, locker, queue, clock and metrics through fields, never
// from the environment. The fleet passes (scan, order, _stats batch, marks
// in `_fleet/`) are shared/fleet's, above it. It must not import:
// shared/fleet, shared/catalog, shared/formats, shared/lance, shared/awsfn,
// shared/embedded, shared/cli.
package maintenance
