// Package lock provides named lease locks with fencing tokens.
//
// A lease is held until it expires or is released; the holder extends it with
// Renew. Every acquisition of a name, including a take-over of an expired
// lease, gets a strictly larger fencing token than the one before, so a holder
// that was paused past its expiry can find out (through Fence.CheckFence) that
// somebody else has since acquired the lock, before it commits anything.
//
// Implementations: FileLocker (one JSON file per name in a directory, correct
// across processes on one machine), DynamoLocker (one DynamoDB item per name)
// and InProcess (a map, for tests of code that takes locks).
//
// Expiry is decided by the clock of whoever looks at a lease: a contender takes
// over once its clock says the lease has expired. Clock skew between machines
// therefore shortens or lengthens leases; the fencing token (checked right
// before each commit) is what keeps a stale holder from committing.
//
// Floor 1 of the layering (a package's floor is one above the highest floor
// it imports; floor 0 imports no tablekeep package). It owns the lockers,
// fences and heartbeats; it knows nothing of tables. It imports only shared/clock. It must not import: shared/table,
// shared/maintenance.
package lock
