// Package lancetest drives the LanceDB fixture from the tests of
// shared/lance and of other packages: the CLI, the embedded warehouse and
// the Lambda functions register and maintain datasets LanceDB wrote, then
// have LanceDB read them. Each pinned LanceDB release (Release031,
// Release039) is an npm project under shared/lance/testdata (lancedb,
// lancedb-0.39) whose lock file pins @lancedb/lancedb, running the same
// fixture.mjs; ForEach runs a test once per release, Dataset builds a
// dataset once and copies it. A machine without node or npm fails the test
// with how to get them.
//
// Floor 0 of the layering (a package's floor is one above the highest floor
// it imports; floor 0 imports no tablekeep package). For tests only: it
// installs the fixture (npm ci or npm install from the lock file) and runs
// its scripts. It must not import: shared/lance, shared/table,
// shared/maintenance.
package lancetest
