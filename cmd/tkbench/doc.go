// Command tkbench runs the benchmarks and writes docs/benchmarks.md and its
// plot (`make bench`). See shared/bench.
//
// Floor 10 of the layering (a package's floor is one above the highest floor
// it imports; floor 0 imports no tablekeep package). A thin main over
// shared/bench: flags, the output paths and the latency profile
// (objstore.ParseProfile). It must not import: shared/maintenance,
// shared/awsfn, shared/cli.
package main
