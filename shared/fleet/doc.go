// Package fleet owns a warehouse's `_fleet/` folder: its layout (layout.go,
// the one file of key builders; docs/format.md 2.6), the sharded fleet
// index of maintenance marks (index.go: read, merge, shard writes), the
// scan's decision on a mark and the mark rules of a failure (decide.go), the
// safety-net scan's state (state.go), the one failure backoff of a failing
// table, whose mode (scheduled passes or the AWS fan-out's jobs) is a
// parameter (backoff.go), and the AWS fan-out's retry markers and inline
// run records (retry.go, inlinerun.go).
//
// It is the only package that writes keys under `_fleet/`
// (TestOnlyFleetWritesFleetKeys). It sits below shared/maintenance, which
// scans the fleet (the LISTs, the catalog, the stats batch) and records
// marks through it, and shared/awsfn, which
// keeps event parsing, the queue check, BatchItemFailures and metrics, and
// the fan-out's decisions; it depends only on objstore and table.
//
// Floor 3 of the layering (a package's floor is one above the highest floor
// it imports; floor 0 imports no tablekeep package). It owns
// `_fleet/`. It must not import: shared/maintenance, shared/awsfn, shared/cli.
package fleet
