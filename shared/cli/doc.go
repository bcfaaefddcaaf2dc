// Package cli is the tablekeep command tree. cmd/tablekeep's main only calls
// Main; tests run the same tree in-process with Run.
//
// Floor 7 of the layering (a package's floor is one above the highest floor
// it imports; floor 0 imports no tablekeep package). It owns the commands,
// their flags, text and JSON output (docs/cli.md is its contract), the
// detection of a warehouse's location and the wording of a pass's results;
// the warehouse and its pass are shared/warehouse's, what it reads of a
// Lance dataset shared/formats' (TestCLIImportsNeitherAwsfnNorLance). It
// must not import: shared/awsfn, shared/lance, shared/bench, shared/demo,
// shared/internal/testkit.
package cli
