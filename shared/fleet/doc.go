// Package fleet owns a warehouse's `_fleet/` folder and the scheduling of
// its fleet passes: its layout (layout.go, the one file of key builders;
// docs/format.md 2.6), the sharded fleet index of maintenance marks
// (index.go: read, merge, shard writes), the scan's decision on a mark and
// the mark rules of a failure (decide.go), the safety-net scan's state
// (state.go), the one failure backoff of a failing table, whose mode
// (scheduled passes or the AWS fan-out's jobs) is a parameter (backoff.go),
// the Scheduler (scheduler.go; New(runner, Options)): the scan (one LIST
// per table, the safety-net windows, its options), the order (most urgent
// first, failed tables last), the deadline minus the margin, the _stats
// batch and the marks' recording, over a maintenance.Runner that maintains
// one table at a time and writes neither stats nor marks; and the AWS
// fan-out's policy
// (fanout.go: the inline-or-queued decision, the table jobs, the follow-up
// after a table's maintenance, a queue batch's per-table decisions) with
// its retry markers and inline run records (retry.go, inlinerun.go), the
// jobs sent through a JobSender.
//
// It is the only package that writes keys under `_fleet/`
// (TestOnlyFleetWritesFleetKeys). It sits above shared/maintenance (whose
// Mark it stores and whose MaintainTableWith it calls) and below
// shared/awsfn, which keeps event parsing, the queue check, the SQS job
// sender, BatchItemFailures and metrics.
//
// Floor 4 of the layering (a package's floor is one above the highest floor
// it imports; floor 0 imports no tablekeep package). It owns `_fleet/` and
// the fleet passes. It must not import: shared/catalog, shared/warehouse,
// shared/awsfn, shared/cli.
package fleet
