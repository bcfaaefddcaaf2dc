// Package lancefile reads and splices the container of a Lance v2 data file
// (protos/file2.proto in the lance repository): page buffers, the
// ColumnMetadata protobuf of each column, the column-metadata offset table,
// the global-buffer table and the 40-byte footer. It decodes no page itself:
// pages are self-describing (each carries its own encoding protobuf, with
// dictionaries and symbol tables local to the page), so N files of the same
// schema and version can be spliced into one by copying page buffers byte
// for byte and rewriting their absolute offsets and first-row numbers.
// SpliceWith with MergePages instead hands each column's pages to
// shared/lance/lanceenc, which merges the runs it decodes into few large
// pages (and keeps the others byte for byte).
//
// Every bound is checked: a malformed file gets an error wrapping
// ErrCorrupt (never a panic), and memory is linear in the file's size.
// What the splicer cannot copy without understanding it (column-level
// buffers, extra global buffers, blob pages, unknown page layouts or
// versions, columns that do not follow the schema) gets an error wrapping
// ErrUnsupported. Validate checks a file about to be committed against the
// reader rules of its file version (page counts, structural columns,
// buffers, rows per column): a violation is a *RuleError wrapping
// ErrUnreadable.
//
// Floor 2 of the layering (a package's floor is one above the highest floor
// it imports; floor 0 imports no tablekeep package). It owns the data-file
// container and the splice; no store I/O (callers hand it bytes). It must
// not import: shared/objstore, shared/table, shared/lance.
package lancefile
