// Package cli is the tablekeep command tree. cmd/tablekeep's main only calls
// Main; tests run the same tree in-process with Run.
//
// Floor 6 of the layering (a package's floor is one above the highest floor
// it imports; floor 0 imports no tablekeep package). It owns the commands,
// their flags, text and JSON output (docs/cli.md is its contract), the
// detection of a warehouse's location and the pass it runs locally. It still
// imports shared/awsfn and shared/lance today; issue 20 removes both. It
// must not import: shared/bench, shared/demo, shared/internal/testkit.
package cli
