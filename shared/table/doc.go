// Package table implements tablekeep's versioned table format over an
// objstore.Store: Arrow-schema'd tables whose versions are immutable
// manifests listing immutable Parquet fragments and deletion vectors.
// docs/format.md specifies the layout and encoding.
//
// Floor 2 of the layering (a package's floor is one above the highest floor
// it imports; floor 0 imports no tablekeep package). It owns the format end
// to end: manifests and their codec, fragments, deletion vectors, schema
// evolution (AddColumns), commits with conditional puts and their backoff,
// reads and predicates, writer leases and grace, the floor, tags, change
// records and stats. It must not import: shared/lock, shared/queue,
// shared/maintenance, shared/telemetry, shared/catalog.
package table
