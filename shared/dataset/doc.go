// Package dataset is the vocabulary of the maintenance contract, shared by
// every format: a version as listed (VersionInfo), the per-version change
// record of what a commit added and removed (ChangeRecord, RemovedFile,
// OpKind) and a dataset's summary (Stats). It holds types only and imports
// no other package of this module, so that a format's adapter (shared/lance)
// implements maintenance.Source without importing tablekeep's own format
// (shared/table), and shared/table writes these records in its own
// encoding (docs/format.md).
//
// Floor 0 of the layering (a package's floor is one above the highest floor
// it imports; floor 0 imports no tablekeep package). It owns the
// contract's types only. It must not import any tablekeep package.
package dataset
