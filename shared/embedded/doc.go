// Package embedded wires tablekeep's maintenance for a laptop: a local
// directory as the store, a lock file per table, and an in-process queue,
// so the whole job (compact, plan, drain, sweep) runs with no services.
//
// Floor 5 of the layering (a package's floor is one above the highest floor
// it imports; floor 0 imports no tablekeep package). It owns the local
// wiring only (store, lock files, in-process queue, Sources: formats.Open)
// and the one local Maintain; the verbs are shared/maintenance's. It must
// not import: shared/awsfn, shared/cli, shared/lance, shared/demo.
package embedded
