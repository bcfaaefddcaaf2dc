// Package lanceenc decodes and re-encodes the plain page encodings of Lance
// v2 data files, so that the one-row pages LanceDB writes for small writes
// can become pages of thousands of rows that LanceDB still reads.
//
// A Page is one page of one column as a Lance file stores it (its buffers,
// its row count and its encoding protobuf), in a 2.0, 2.1 or 2.2 file.
// Decode turns a page into Values; Merge turns consecutive pages of one
// column into fewer, larger pages with the same rows in the same order
// (written as Lance's own writer writes the same encodings, byte for byte);
// MergeRuns does so around pages it cannot decode, which it keeps; Filter
// drops rows from a page. Only the encodings listed in docs/lance.md ("Page
// encodings") are decoded; any other gives an *UnsupportedError
// (errors.Is(err, ErrUnsupported)), and the caller keeps such pages as they
// are. A page that does not parse gives a
// *CorruptError (errors.Is(err, ErrCorrupt)); nothing here panics on input,
// and memory is bounded by the page's buffer sizes (and Limits for output).
//
// Floor 1 of the layering (a package's floor is one above the highest floor
// it imports; floor 0 imports no tablekeep package). It owns page decoding
// and encoding only: no file container (shared/lance/lancefile), no store,
// no I/O. It must not import: shared/objstore, shared/table, shared/lance,
// shared/lance/lancefile.
package lanceenc
