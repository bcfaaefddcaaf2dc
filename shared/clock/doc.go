// Package clock is tablekeep's one time source: Now and Sleep. Everything
// that reads the time or waits takes a Clock (lockers and fences, tables
// and leases, the runner, compaction, the cleaner and the sweep, the rate
// limiters, the latency store, the in-process queue), so tests and
// benchmarks inject simulated time (shared/internal/fakeclock) and no
// rule that compares times needs a real sleep. A leaf: it imports nothing
// of tablekeep.
//
// Floor 0 of the layering (a package's floor is one above the highest floor
// it imports; floor 0 imports no tablekeep package). It owns the
// Clock interface and the real clock. It must not import any tablekeep package.
package clock
