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
