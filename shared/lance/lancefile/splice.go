package lancefile

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"

	"google.golang.org/protobuf/encoding/protowire"
)

// Spliceable reports, as an error wrapping ErrUnsupported, what stops the
// splicer from copying f's pages as they are: a version other than 2.0, 2.1
// or 2.2, global buffers besides the file descriptor (a 2.0 page may
// reference a global buffer by index), column-level buffers or a column encoding other than
// plain values (a 2.0 zone index, blob columns), a page layout other than
// mini-block, full-zip or all-null (blob pages point at bytes outside the
// page), or pages whose rows do not add up to the file's.
func Spliceable(name string, f *File) error {
	v20 := f.Major == 0 && f.Minor == 3
	if !v20 && !(f.Major == 2 && (f.Minor == 1 || f.Minor == 2)) {
		return unsupported(name, "file version %d.%d (the splicer copies 2.0, 2.1 and 2.2 files)", f.Major, f.Minor)
	}
	if f.NumGlobalBuffers != 1 {
		return unsupported(name, "%d global buffers (only the file descriptor is copied)", f.NumGlobalBuffers)
	}
	for i, c := range f.Columns {
		if len(c.Buffers) > 0 {
			return unsupported(name, "column %d has %d column-level buffers", i, len(c.Buffers))
		}
		if !c.Plain {
			return unsupported(name, "column %d has a column encoding other than plain values (blob or zone index)", i)
		}
		var rows uint64
		for j, p := range c.Pages {
			switch {
			case v20 && p.TypeURL == TypeArrayEncoding:
				// 2.0: buffers are referenced by index, of the page, of
				// the column (none: checked above) or of the file (only
				// the descriptor: checked above).
			case v20 || p.TypeURL != TypePageLayout:
				return unsupported(name, "column %d page %d: encoding %q in a %d.%d file", i, j, p.TypeURL, f.Major, f.Minor)
			case p.Layout != LayoutMiniBlock && p.Layout != LayoutAllNull && p.Layout != LayoutFullZip:
				return unsupported(name, "column %d page %d: page layout %d (blob or unknown)", i, j, p.Layout)
			}
			if p.Length > math.MaxUint64-rows {
				return corrupt(name, "column %d: page rows overflow", i)
			}
			rows += p.Length
		}
		if rows != f.Rows {
			return unsupported(name, "column %d: pages hold %d rows, the file %d", i, rows, f.Rows)
		}
	}
	return nil
}

// SpliceResult is a spliced file.
type SpliceResult struct {
	Data []byte
	Rows uint64
	// Pages is the number of pages copied.
	Pages int
}

// MaxSpliceBytes bounds a spliced file (it is built in memory).
const MaxSpliceBytes = 1 << 31

// Splice writes one file holding the rows of files, in order: each page's
// buffers copied byte for byte (each padded to 64 bytes with PadByte, as
// the Lance writer does), its buffer offsets rewritten, its priority (first
// row) raised by the rows of the files before it; then the file descriptor
// with the total length, the column metadata, the two offset tables and the
// footer, in the Lance writer's order. Every file must be Spliceable and
// have the same version, column count and schema bytes (ErrMismatch).
func Splice(names []string, files []*File) (*SpliceResult, error) {
	if len(files) == 0 || len(names) != len(files) {
		return nil, fmt.Errorf("lancefile: splice of %d files (%d names)", len(files), len(names))
	}
	first := files[0]
	var total, size uint64
	for i, f := range files {
		if err := Spliceable(names[i], f); err != nil {
			return nil, err
		}
		if f.Major != first.Major || f.Minor != first.Minor {
			return nil, fmt.Errorf("%s: %w: version %d.%d, %s is %d.%d", names[i], ErrMismatch, f.Major, f.Minor, names[0], first.Major, first.Minor)
		}
		if f.NumColumns != first.NumColumns || !bytes.Equal(f.Schema, first.Schema) {
			return nil, fmt.Errorf("%s: %w: schema differs from %s's", names[i], ErrMismatch, names[0])
		}
		for c := range f.Columns {
			if !bytes.Equal(f.Columns[c].Encoding, first.Columns[c].Encoding) {
				return nil, fmt.Errorf("%s: %w: column %d encoding differs", names[i], ErrMismatch, c)
			}
		}
		if f.Rows > math.MaxInt64-total || f.Size > MaxSpliceBytes-size {
			return nil, fmt.Errorf("%s: %w: spliced file over %d bytes or rows overflow", names[i], ErrUnsupported, uint64(MaxSpliceBytes))
		}
		total += f.Rows
		size += f.Size
	}
	out := bytes.NewBuffer(make([]byte, 0, size))
	pad := bytes.Repeat([]byte{PadByte}, Alignment)
	metas := make([][]byte, first.NumColumns)
	pages := 0
	for c := range first.Columns {
		var cm []byte
		if enc := first.Columns[c].Encoding; enc != nil {
			cm = protowire.AppendTag(cm, 1, protowire.BytesType)
			cm = protowire.AppendBytes(cm, enc)
		}
		var base uint64
		for _, f := range files {
			for _, p := range f.Columns[c].Pages {
				var offs, sizes []byte
				for _, b := range p.Buffers {
					offs = protowire.AppendVarint(offs, uint64(out.Len()))
					sizes = protowire.AppendVarint(sizes, b.Size)
					out.Write(f.data[b.Offset : b.Offset+b.Size])
					if r := b.Size % Alignment; r != 0 {
						out.Write(pad[:Alignment-r])
					}
				}
				var pg []byte
				if len(p.Buffers) > 0 {
					pg = protowire.AppendTag(pg, 1, protowire.BytesType)
					pg = protowire.AppendBytes(pg, offs)
					pg = protowire.AppendTag(pg, 2, protowire.BytesType)
					pg = protowire.AppendBytes(pg, sizes)
				}
				if p.Length != 0 {
					pg = protowire.AppendTag(pg, 3, protowire.VarintType)
					pg = protowire.AppendVarint(pg, p.Length)
				}
				if p.Encoding != nil {
					pg = protowire.AppendTag(pg, 4, protowire.BytesType)
					pg = protowire.AppendBytes(pg, p.Encoding)
				}
				if prio := base + p.Priority; prio != 0 {
					pg = protowire.AppendTag(pg, 5, protowire.VarintType)
					pg = protowire.AppendVarint(pg, prio)
				}
				cm = protowire.AppendTag(cm, 2, protowire.BytesType)
				cm = protowire.AppendBytes(cm, pg)
				pages++
			}
			base += f.Rows
		}
		metas[c] = cm
	}
	// Global buffer 0: the file descriptor, every field copied but the
	// length. From 2.1 on it must start at a multiple of 64 (it does: every
	// page buffer before it is padded).
	fdPos := uint64(out.Len())
	out.Write(rewriteLength(first.Descriptor, total))
	fdLen := uint64(out.Len()) - fdPos
	cmStart := uint64(out.Len())
	cmo := make([]byte, 0, 16*len(metas))
	for _, m := range metas {
		cmo = binary.LittleEndian.AppendUint64(cmo, uint64(out.Len()))
		cmo = binary.LittleEndian.AppendUint64(cmo, uint64(len(m)))
		out.Write(m)
	}
	cmoStart := uint64(out.Len())
	out.Write(cmo)
	gboStart := uint64(out.Len())
	var tail []byte
	tail = binary.LittleEndian.AppendUint64(tail, fdPos)
	tail = binary.LittleEndian.AppendUint64(tail, fdLen)
	tail = binary.LittleEndian.AppendUint64(tail, cmStart)
	tail = binary.LittleEndian.AppendUint64(tail, cmoStart)
	tail = binary.LittleEndian.AppendUint64(tail, gboStart)
	tail = binary.LittleEndian.AppendUint32(tail, 1)
	tail = binary.LittleEndian.AppendUint32(tail, first.NumColumns)
	tail = binary.LittleEndian.AppendUint16(tail, first.Major)
	tail = binary.LittleEndian.AppendUint16(tail, first.Minor)
	tail = append(tail, Magic...)
	out.Write(tail)
	return &SpliceResult{Data: out.Bytes(), Rows: total, Pages: pages}, nil
}

// rewriteLength copies a FileDescriptor with its length (field 2) set.
func rewriteLength(fd []byte, rows uint64) []byte {
	var out []byte
	_ = walk("", "FileDescriptor", fd, func(num protowire.Number, typ protowire.Type, v []byte, u uint64) error {
		if num == 2 {
			return nil
		}
		out = appendField(out, num, typ, v, u)
		return nil
	})
	if rows != 0 {
		out = protowire.AppendTag(out, 2, protowire.VarintType)
		out = protowire.AppendVarint(out, rows)
	}
	return out
}

// appendField re-encodes one field as walk reported it.
func appendField(out []byte, num protowire.Number, typ protowire.Type, v []byte, u uint64) []byte {
	out = protowire.AppendTag(out, num, typ)
	switch typ {
	case protowire.VarintType:
		out = protowire.AppendVarint(out, u)
	case protowire.BytesType:
		out = protowire.AppendBytes(out, v)
	case protowire.Fixed32Type:
		out = protowire.AppendFixed32(out, uint32(u))
	case protowire.Fixed64Type:
		out = protowire.AppendFixed64(out, u)
	}
	return out
}
