// Package fakeclock is simulated time: the settable clock (a clock.Clock)
// tests and benchmarks inject wherever code takes a clock (clock.Clock,
// table.Options.Clock, queue.EmbeddedOptions.Clock), NoSleep (a clock whose
// waits return at once without moving time, for commit retries that must
// not advance it), and a store wrapper that dates objects by it. Time moves
// only when advanced, or when code under test sleeps on it.
//
// Floor 2 of the layering (a package's floor is one above the highest floor
// it imports; floor 0 imports no tablekeep package). It owns the fake clock
// and the dating store wrapper; no package-level state. It must not import:
// shared/table, shared/lock, shared/maintenance.
package fakeclock
