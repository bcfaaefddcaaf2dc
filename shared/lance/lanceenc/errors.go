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
package lanceenc

import (
	"errors"
	"fmt"
)

// ErrUnsupported is matched (errors.Is) by every *UnsupportedError: an
// encoding this package does not decode. The caller keeps such pages as
// they are (byte for byte).
var ErrUnsupported = errors.New("lanceenc: unsupported encoding")

// ErrCorrupt is matched by every *CorruptError: a page whose buffers or
// protobuf contradict each other.
var ErrCorrupt = errors.New("lanceenc: corrupt page")

// UnsupportedError names the encoding that is not decoded.
type UnsupportedError struct {
	Encoding string // e.g. "2.1 InlineBitpacking", "2.1 MiniBlockLayout.dictionary"
}

func (e *UnsupportedError) Error() string {
	return "lanceenc: unsupported encoding " + e.Encoding
}

func (e *UnsupportedError) Unwrap() error { return ErrUnsupported }

// CorruptError says what is wrong with a page.
type CorruptError struct {
	Reason string
}

func (e *CorruptError) Error() string { return "lanceenc: corrupt page: " + e.Reason }

func (e *CorruptError) Unwrap() error { return ErrCorrupt }

func unsupported(format string, a ...any) error {
	return &UnsupportedError{Encoding: fmt.Sprintf(format, a...)}
}

func corrupt(format string, a ...any) error {
	return &CorruptError{Reason: fmt.Sprintf(format, a...)}
}
