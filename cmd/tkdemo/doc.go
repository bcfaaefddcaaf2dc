// Command tkdemo reproduces the seed's registry churn on a local table and
// reports what it does to the table. See docs/cli.md.
//
// Floor 9 of the layering (a package's floor is one above the highest floor
// it imports; floor 0 imports no tablekeep package). A thin main over
// shared/demo: flags and a progress bar. It must not import:
// shared/maintenance, shared/awsfn, shared/cli.
package main
