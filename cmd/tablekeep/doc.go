// Command tablekeep manages versioned tablekeep tables. See docs/cli.md.
//
// Floor 8 of the layering (a package's floor is one above the highest floor
// it imports; floor 0 imports no tablekeep package). A thin main: it calls
// cli.Main and owns nothing else. It must not import: shared/awsfn,
// shared/maintenance, shared/table.
package main
