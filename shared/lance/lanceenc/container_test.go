package lanceenc

// A minimal Lance v2 container reader and writer for this package's tests
// only (shared/lance/lancefile is the real one): footer, column metadata
// offset table, global buffer offset table and ColumnMetadata, so that the
// tests can take pages out of files LanceDB wrote and write files of
// re-encoded pages for LanceDB to read.

import (
	"encoding/binary"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

type testPage struct {
	Page
	Priority uint64
}

type testColumn struct {
	Encoding []byte // the column's Encoding message, as stored
	Pages    []testPage
}

type testFile struct {
	Major, Minor uint16
	Columns      []testColumn
	Global       [][]byte
}

const footerLen = 40

func le64(b []byte) uint64 { return binary.LittleEndian.Uint64(b) }

func slice(b []byte, off, n uint64) ([]byte, error) {
	if off > uint64(len(b)) || n > uint64(len(b))-off {
		return nil, fmt.Errorf("range %d+%d outside %d bytes", off, n, len(b))
	}
	return b[off : off+n], nil
}

func readTestFile(b []byte) (*testFile, error) {
	if len(b) < footerLen || string(b[len(b)-4:]) != "LANC" {
		return nil, fmt.Errorf("no Lance footer")
	}
	ft := b[len(b)-footerLen:]
	cmoStart, gboStart := le64(ft[8:]), le64(ft[16:])
	nGlobal, nCols := binary.LittleEndian.Uint32(ft[24:]), binary.LittleEndian.Uint32(ft[28:])
	f := &testFile{Major: binary.LittleEndian.Uint16(ft[32:]), Minor: binary.LittleEndian.Uint16(ft[34:])}
	for i := uint64(0); i < uint64(nGlobal); i++ {
		e, err := slice(b, gboStart+16*i, 16)
		if err != nil {
			return nil, err
		}
		g, err := slice(b, le64(e), le64(e[8:]))
		if err != nil {
			return nil, err
		}
		f.Global = append(f.Global, g)
	}
	for i := uint64(0); i < uint64(nCols); i++ {
		e, err := slice(b, cmoStart+16*i, 16)
		if err != nil {
			return nil, err
		}
		cm, err := slice(b, le64(e), le64(e[8:]))
		if err != nil {
			return nil, err
		}
		col, err := readColumn(b, cm)
		if err != nil {
			return nil, fmt.Errorf("column %d: %w", i, err)
		}
		f.Columns = append(f.Columns, col)
	}
	return f, nil
}

// directEncoding returns Encoding.direct.encoding of an Encoding message.
func directEncoding(b []byte) ([]byte, error) {
	fs, err := parseFields(b)
	if err != nil {
		return nil, err
	}
	for _, f := range fs {
		if f.num != 2 {
			return nil, fmt.Errorf("Encoding field %d (not direct)", f.num)
		}
		inner, err := parseFields(f.b)
		if err != nil {
			return nil, err
		}
		for _, g := range inner {
			if g.num == 1 {
				return g.b, nil
			}
		}
	}
	return nil, fmt.Errorf("Encoding without direct bytes")
}

func readColumn(file, b []byte) (testColumn, error) {
	var c testColumn
	fs, err := parseFields(b)
	if err != nil {
		return c, err
	}
	for _, f := range fs {
		switch f.num {
		case 1:
			c.Encoding = f.b
		case 2:
			pf, err := parseFields(f.b)
			if err != nil {
				return c, err
			}
			var p testPage
			var offs, sizes []uint64
			for _, g := range pf {
				switch g.num {
				case 1:
					offs, err = g.varints("Page", offs)
				case 2:
					sizes, err = g.varints("Page", sizes)
				case 3:
					p.Rows = g.u
				case 4:
					p.Encoding, err = directEncoding(g.b)
				case 5:
					p.Priority = g.u
				}
				if err != nil {
					return c, err
				}
			}
			if len(offs) != len(sizes) {
				return c, fmt.Errorf("page with %d offsets, %d sizes", len(offs), len(sizes))
			}
			for i := range offs {
				buf, err := slice(file, offs[i], sizes[i])
				if err != nil {
					return c, err
				}
				p.Buffers = append(p.Buffers, buf)
			}
			c.Pages = append(c.Pages, p)
		case 3, 4:
			return c, fmt.Errorf("column-level buffers")
		}
	}
	return c, nil
}

// writeTestFile writes f as Lance writes a v2 file: page buffers (each
// padded to 64 bytes with 0 bytes... pad byte as Lance: 72), global
// buffers, column metadata, the two offset tables and the footer; pad
// bytes follow the data pages so that the file is at least minSize long.
func writeTestFile(f *testFile, minSize int) []byte {
	var out []byte
	pad := func() {
		for len(out)%64 != 0 {
			out = append(out, 72)
		}
	}
	var metas [][]byte
	for _, c := range f.Columns {
		var cm []byte
		cm = protowire.AppendTag(cm, 1, protowire.BytesType)
		cm = protowire.AppendBytes(cm, c.Encoding)
		for _, p := range c.Pages {
			var offs, sizes []byte
			for _, buf := range p.Buffers {
				offs = protowire.AppendVarint(offs, uint64(len(out)))
				sizes = protowire.AppendVarint(sizes, uint64(len(buf)))
				out = append(out, buf...)
				pad()
			}
			var pm []byte
			if len(p.Buffers) > 0 {
				pm = appendBytesField(pm, 1, offs)
				pm = appendBytesField(pm, 2, sizes)
			}
			pm = appendVarintField(pm, 3, p.Rows)
			direct := appendBytesField(nil, 1, p.Encoding)
			pm = appendBytesField(pm, 4, appendBytesField(nil, 2, direct))
			pm = appendVarintField(pm, 5, p.Priority)
			cm = appendBytesField(cm, 2, pm)
		}
		metas = append(metas, cm)
	}
	for len(out)+64 < minSize-estimateTail(f, metas) {
		out = append(out, 72)
	}
	pad()
	var gbo []uint64
	for _, g := range f.Global {
		gbo = append(gbo, uint64(len(out)), uint64(len(g)))
		out = append(out, g...)
		pad()
	}
	colMetaStart := uint64(len(out))
	var cmo []uint64
	for _, m := range metas {
		cmo = append(cmo, uint64(len(out)), uint64(len(m)))
		out = append(out, m...)
	}
	cmoStart := uint64(len(out))
	for _, v := range cmo {
		out = binary.LittleEndian.AppendUint64(out, v)
	}
	gboStart := uint64(len(out))
	for _, v := range gbo {
		out = binary.LittleEndian.AppendUint64(out, v)
	}
	out = binary.LittleEndian.AppendUint64(out, colMetaStart)
	out = binary.LittleEndian.AppendUint64(out, cmoStart)
	out = binary.LittleEndian.AppendUint64(out, gboStart)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(f.Global)))
	out = binary.LittleEndian.AppendUint32(out, uint32(len(f.Columns)))
	out = binary.LittleEndian.AppendUint16(out, f.Major)
	out = binary.LittleEndian.AppendUint16(out, f.Minor)
	return append(out, "LANC"...)
}

// estimateTail is an upper bound of what follows the data pages.
func estimateTail(f *testFile, metas [][]byte) int {
	n := footerLen + 64
	for _, g := range f.Global {
		n += len(g) + 64 + 16
	}
	for _, m := range metas {
		n += len(m) + 16
	}
	return n
}
