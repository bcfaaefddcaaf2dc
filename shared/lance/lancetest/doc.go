// Package lancetest drives the LanceDB fixture (shared/lance/testdata/lancedb,
// an npm project whose lock file pins @lancedb/lancedb) from the tests of
// other packages: the CLI, the embedded warehouse and the Lambda functions
// register and maintain datasets LanceDB wrote, then have LanceDB read them.
// A machine without node or npm fails the test with how to get them.
//
// Floor 0 of the layering (a package's floor is one above the highest floor
// it imports; floor 0 imports no tablekeep package). For tests only: it
// installs the fixture (npm ci from the lock file) and runs its scripts. It
// must not import: shared/lance, shared/table, shared/maintenance.
package lancetest
