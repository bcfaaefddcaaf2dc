// Package catalog holds tablekeep's own tables, kept in the same format and
// maintained by the same pipeline as every other table: _registry lists the
// managed tables with their maintenance policy; _stats holds one row per
// table, refreshed after each maintenance run.
//
// Floor 5 of the layering (a package's floor is one above the highest floor
// it imports; floor 0 imports no tablekeep package). It owns the two system
// tables (_registry, _stats), registration and its validation (one root, one
// name; no system directory, no nested roots; policy bounds), and name
// resolution into maintenance.TableRef. It must not import: shared/awsfn,
// shared/formats, shared/lance, shared/embedded, shared/cli.
package catalog
