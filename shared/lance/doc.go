// Package lance reads what maintenance needs from a Lance dataset (the
// format LanceDB writes): its versions under _versions/ (both naming
// schemes), the files each version's manifest references, and its tags. It
// is tablekeep's own reader of the documented format (protos/table.proto in
// the lancedb/lance repository), decoding with protowire only the fields that
// name files, and it refuses, with ErrUnsupported, every feature or field
// that could reference a file it does not understand: it never guesses.
//
// It knows nothing about queues or the maintenance pipeline; Source (in
// source.go) adapts a dataset to the small interface maintenance prunes.
//
// Floor 3 of the layering (a package's floor is one above the highest floor
// it imports; floor 0 imports no tablekeep package). It owns the dataset
// reader (versions, manifests, tags, deletion files), the manifest writer
// and transaction files of its compaction (compact.go, manifest_write.go,
// txn.go), the sweep's retained set and the Source adapter. It uses
// shared/table only for the change-record vocabulary the maintenance
// contract speaks (issue 20 moves that to a neutral package). It must not
// import: shared/maintenance, shared/catalog, shared/formats, shared/lock,
// shared/queue.
package lance
