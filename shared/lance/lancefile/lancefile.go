package lancefile

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/tablekeep/tablekeep/shared/lance/internal/pbwire"
)

// Sentinel errors.
var (
	// ErrCorrupt: the bytes are not a well-formed Lance v2 file.
	ErrCorrupt = errors.New("lancefile: corrupt file")
	// ErrUnsupported: a well-formed file the splicer does not copy.
	ErrUnsupported = errors.New("lancefile: unsupported file")
	// ErrMismatch: files of different schemas or versions.
	ErrMismatch = errors.New("lancefile: files differ in schema or version")
)

// Layout constants (rust/lance-file/src/writer.rs).
const (
	FooterLen = 40
	// Alignment of page buffers and of global buffers from 2.1 on.
	Alignment = 64
	// PadByte fills the gap after a buffer up to the alignment.
	PadByte = 72
	Magic   = "LANC"
)

// Buffer is a (position, size) pair in the file.
type Buffer struct {
	Offset, Size uint64
}

// Page is one page of a column.
type Page struct {
	Buffers []Buffer
	// Length is the page's rows; Priority its first top-level row.
	Length, Priority uint64
	// Encoding is the page's lance.file.v2.Encoding message, raw.
	Encoding []byte
	// TypeURL is the type of the Any its direct encoding holds, and Layout
	// the PageLayout oneof field number (2.1+: 1 mini-block, 2 all-null,
	// 3 full-zip, 4 blob; 0 for a 2.0 ArrayEncoding).
	TypeURL string
	Layout  int
}

// Column is one column's metadata.
type Column struct {
	// Encoding is the column's lance.file.v2.Encoding message, raw.
	Encoding []byte
	Pages    []Page
	// Buffers are column-level buffers (a 2.0 zone index, blob data).
	Buffers []Buffer
	// Plain is true when the column encoding is absent or
	// ColumnEncoding{values: Empty}, the normal case.
	Plain bool
}

// File is a parsed container.
type File struct {
	Size                         uint64
	Major, Minor                 uint16
	ColumnMetaStart, CMOStart    uint64
	GBOStart                     uint64
	Columns                      []Column
	Global                       []Buffer
	Descriptor                   []byte // global buffer 0: lance.file.FileDescriptor, raw
	Schema                       []byte // FileDescriptor.schema, raw
	Rows                         uint64 // FileDescriptor.length
	NumGlobalBuffers, NumColumns uint32

	data []byte // the whole file, which Splice copies pages from
}

// Version is the file's data-file version (major, minor) as the manifest's
// DataFile records it: footer (0, 3) is 2.0.
func (f *File) Version() (uint32, uint32) {
	if f.Major == 0 && f.Minor == 3 {
		return 2, 0
	}
	return uint32(f.Major), uint32(f.Minor)
}

func corrupt(name, format string, a ...any) error {
	return fmt.Errorf("%s: %w: %s", name, ErrCorrupt, fmt.Sprintf(format, a...))
}

func unsupported(name, format string, a ...any) error {
	return fmt.Errorf("%s: %w: %s", name, ErrUnsupported, fmt.Sprintf(format, a...))
}

// within reports whether [off, off+n) lies in [lo, hi), without overflow.
func within(off, n, lo, hi uint64) bool {
	return off >= lo && off <= hi && n <= hi-off
}

// Parse parses a whole file's bytes (name is used in errors).
func Parse(name string, b []byte) (*File, error) {
	size := uint64(len(b))
	if size < FooterLen || string(b[size-4:]) != Magic {
		return nil, corrupt(name, "no %q footer", Magic)
	}
	foot := b[size-FooterLen:]
	f := &File{
		Size:             size,
		ColumnMetaStart:  binary.LittleEndian.Uint64(foot[0:]),
		CMOStart:         binary.LittleEndian.Uint64(foot[8:]),
		GBOStart:         binary.LittleEndian.Uint64(foot[16:]),
		NumGlobalBuffers: binary.LittleEndian.Uint32(foot[24:]),
		NumColumns:       binary.LittleEndian.Uint32(foot[28:]),
		Major:            binary.LittleEndian.Uint16(foot[32:]),
		Minor:            binary.LittleEndian.Uint16(foot[34:]),
		data:             b,
	}
	switch {
	case f.Major == 0 && f.Minor == 3, f.Major == 2 && (f.Minor == 1 || f.Minor == 2):
	case f.Major == 0 && f.Minor == 2:
		return nil, unsupported(name, "legacy (v0.1) Lance file")
	default:
		return nil, unsupported(name, "file version %d.%d", f.Major, f.Minor)
	}
	end := size - FooterLen
	// Order: data | column metadata | CMO table | GBO table | footer.
	if !(f.ColumnMetaStart <= f.CMOStart && f.CMOStart <= f.GBOStart && f.GBOStart <= end) {
		return nil, corrupt(name, "footer positions %d, %d, %d out of order (end %d)", f.ColumnMetaStart, f.CMOStart, f.GBOStart, end)
	}
	if uint64(f.NumColumns)*16 != f.GBOStart-f.CMOStart {
		return nil, corrupt(name, "%d columns in a %d-byte offset table", f.NumColumns, f.GBOStart-f.CMOStart)
	}
	if uint64(f.NumGlobalBuffers)*16 != end-f.GBOStart {
		return nil, corrupt(name, "%d global buffers in a %d-byte table", f.NumGlobalBuffers, end-f.GBOStart)
	}
	if f.NumGlobalBuffers == 0 {
		return nil, corrupt(name, "no global buffer (the file descriptor)")
	}
	f.Global = make([]Buffer, f.NumGlobalBuffers)
	for i := range f.Global {
		p := b[f.GBOStart+uint64(i)*16:]
		g := Buffer{binary.LittleEndian.Uint64(p), binary.LittleEndian.Uint64(p[8:])}
		if !within(g.Offset, g.Size, 0, f.ColumnMetaStart) {
			return nil, corrupt(name, "global buffer %d at %d+%d outside the data", i, g.Offset, g.Size)
		}
		f.Global[i] = g
	}
	fd := f.Global[0]
	f.Descriptor = b[fd.Offset : fd.Offset+fd.Size]
	if err := f.parseDescriptor(name); err != nil {
		return nil, err
	}
	f.Columns = make([]Column, f.NumColumns)
	for i := range f.Columns {
		p := b[f.CMOStart+uint64(i)*16:]
		pos, n := binary.LittleEndian.Uint64(p), binary.LittleEndian.Uint64(p[8:])
		if !within(pos, n, f.ColumnMetaStart, f.CMOStart) {
			return nil, corrupt(name, "column %d metadata at %d+%d outside its section", i, pos, n)
		}
		c, err := parseColumn(name, i, b[pos:pos+n], f.ColumnMetaStart)
		if err != nil {
			return nil, err
		}
		f.Columns[i] = c
	}
	return f, nil
}

func (f *File) parseDescriptor(name string) error {
	return walk(name, "FileDescriptor", f.Descriptor, func(num protowire.Number, _ protowire.Type, v []byte, u uint64) error {
		switch num {
		case 1:
			f.Schema = v
		case 2:
			f.Rows = u
		}
		return nil
	})
}

func parseColumn(name string, idx int, b []byte, dataEnd uint64) (Column, error) {
	var c Column
	var offs, sizes []uint64
	err := walk(name, "ColumnMetadata", b, func(num protowire.Number, typ protowire.Type, v []byte, u uint64) error {
		switch num {
		case 1:
			c.Encoding = v
		case 2:
			p, err := parsePage(name, idx, len(c.Pages), v, dataEnd)
			if err != nil {
				return err
			}
			c.Pages = append(c.Pages, p)
		case 3:
			return appendUints(name, &offs, typ, v, u)
		case 4:
			return appendUints(name, &sizes, typ, v, u)
		}
		return nil
	})
	if err != nil {
		return c, err
	}
	if len(offs) != len(sizes) {
		return c, corrupt(name, "column %d: %d buffer offsets, %d sizes", idx, len(offs), len(sizes))
	}
	for i := range offs {
		if !within(offs[i], sizes[i], 0, dataEnd) {
			return c, corrupt(name, "column %d buffer %d at %d+%d outside the data", idx, i, offs[i], sizes[i])
		}
		c.Buffers = append(c.Buffers, Buffer{offs[i], sizes[i]})
	}
	c.Plain, err = plainColumnEncoding(name, c.Encoding)
	return c, err
}

// plainColumnEncoding: no encoding, or a direct Any whose message is a
// ColumnEncoding with only `values` (field 1).
func plainColumnEncoding(name string, enc []byte) (bool, error) {
	if len(enc) == 0 {
		return true, nil
	}
	_, val, ok, err := directAny(name, enc)
	if err != nil || !ok {
		return false, err
	}
	plain := true
	err = walk(name, "ColumnEncoding", val, func(num protowire.Number, _ protowire.Type, _ []byte, _ uint64) error {
		if num != 1 {
			plain = false
		}
		return nil
	})
	return plain, err
}

// directAny returns the type URL and value of an Encoding's direct Any
// (ok false for an indirect or empty encoding).
func directAny(name string, enc []byte) (string, []byte, bool, error) {
	var direct []byte
	found := false
	if err := walk(name, "Encoding", enc, func(num protowire.Number, _ protowire.Type, v []byte, _ uint64) error {
		if num == 2 {
			direct, found = v, true
		}
		return nil
	}); err != nil || !found {
		return "", nil, false, err
	}
	var anyb []byte
	if err := walk(name, "DirectEncoding", direct, func(num protowire.Number, _ protowire.Type, v []byte, _ uint64) error {
		if num == 1 {
			anyb = v
		}
		return nil
	}); err != nil {
		return "", nil, false, err
	}
	var url string
	var val []byte
	err := walk(name, "Any", anyb, func(num protowire.Number, _ protowire.Type, v []byte, _ uint64) error {
		switch num {
		case 1:
			url = string(v)
		case 2:
			val = v
		}
		return nil
	})
	return url, val, true, err
}

func parsePage(name string, col, idx int, b []byte, dataEnd uint64) (Page, error) {
	var p Page
	var offs, sizes []uint64
	err := walk(name, "Page", b, func(num protowire.Number, typ protowire.Type, v []byte, u uint64) error {
		switch num {
		case 1:
			return appendUints(name, &offs, typ, v, u)
		case 2:
			return appendUints(name, &sizes, typ, v, u)
		case 3:
			p.Length = u
		case 4:
			p.Encoding = v
		case 5:
			p.Priority = u
		}
		return nil
	})
	if err != nil {
		return p, err
	}
	if len(offs) != len(sizes) {
		return p, corrupt(name, "column %d page %d: %d buffer offsets, %d sizes", col, idx, len(offs), len(sizes))
	}
	p.Buffers = make([]Buffer, len(offs))
	for i := range offs {
		if !within(offs[i], sizes[i], 0, dataEnd) {
			return p, corrupt(name, "column %d page %d buffer %d at %d+%d outside the data", col, idx, i, offs[i], sizes[i])
		}
		p.Buffers[i] = Buffer{offs[i], sizes[i]}
	}
	url, val, ok, err := directAny(name, p.Encoding)
	if err != nil {
		return p, err
	}
	if ok {
		p.TypeURL = url
		if err := walk(name, "PageLayout", val, func(num protowire.Number, _ protowire.Type, _ []byte, _ uint64) error {
			if p.Layout == 0 && num < math.MaxInt32 {
				p.Layout = int(num)
			}
			return nil
		}); err != nil && url == TypePageLayout {
			return p, err
		}
		if url != TypePageLayout {
			p.Layout = 0
		}
	}
	return p, nil
}

// Type URLs of page encodings.
const (
	TypePageLayout    = "/lance.encodings21.PageLayout"
	TypeArrayEncoding = "/lance.encodings.ArrayEncoding"
)

// PageLayout oneof field numbers (encodings_v2_1.proto).
const (
	LayoutMiniBlock = 1
	LayoutAllNull   = 2
	LayoutFullZip   = 3
	LayoutBlob      = 4
)

// appendUints appends a repeated uint64 field, packed or not.
func appendUints(name string, dst *[]uint64, typ protowire.Type, v []byte, u uint64) error {
	if typ == protowire.VarintType {
		*dst = append(*dst, u)
		return nil
	}
	if typ != protowire.BytesType {
		return corrupt(name, "repeated uint64 of wire type %d", typ)
	}
	for len(v) > 0 {
		x, n := protowire.ConsumeVarint(v)
		if n < 0 {
			return corrupt(name, "packed varint truncated")
		}
		*dst = append(*dst, x)
		v = v[n:]
	}
	return nil
}

// walk calls fn for each field of a message: its bytes (length-delimited)
// or value (varint, fixed).
func walk(name, what string, b []byte, fn func(num protowire.Number, typ protowire.Type, v []byte, u uint64) error) error {
	err := pbwire.Walk(b, fn)
	if pe, ok := err.(*pbwire.Error); ok {
		return corrupt(name, "%s", pe.In(what))
	}
	return err
}
