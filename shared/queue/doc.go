// Package queue carries work items (for tablekeep: prunable version ranges)
// from the compactor to cleaners with at-least-once delivery: SQS in AWS, an
// in-process queue on a laptop.
//
// A received message stays invisible for a visibility timeout and comes back
// unless acknowledged, so handlers must be idempotent: a message can be
// delivered twice, out of order, and again if its handler outlives the
// visibility timeout.
//
// Floor 1 of the layering (a package's floor is one above the highest floor
// it imports; floor 0 imports no tablekeep package). It owns the Queue
// interface, the SQS and in-process implementations and the Lambda event
// adapter; it knows nothing of what a message means. It imports only shared/clock. It must not import: shared/table,
// shared/maintenance.
package queue
