// Package embedded wires tablekeep's maintenance for a laptop: a local
// directory as the store, a lock file per table, and an in-process queue,
// so the whole job (compact, plan, drain, sweep) runs with no services. It
// is the local warehouse of shared/warehouse (OpenLocal, Pass) with the
// embedded defaults.
//
// Floor 7 of the layering (a package's floor is one above the highest floor
// it imports; floor 0 imports no tablekeep package). It owns the embedded
// defaults only; the wiring is shared/warehouse's and the verbs
// shared/maintenance's. It must
// not import: shared/awsfn, shared/cli, shared/lance, shared/demo.
package embedded
