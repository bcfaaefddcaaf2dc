package lanceenc

import (
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/tablekeep/tablekeep/shared/lance/internal/pbwire"
)

// The protobuf messages of protos/encodings_v2_1.proto (package
// lance.encodings21) and encodings_v2_0.proto (lance.encodings) that this
// package reads and writes, decoded with protowire. Field numbers are the
// .proto's; everything not listed is refused field by field, so a new field
// Lance adds is an *UnsupportedError and never silently ignored.

const (
	typeURLPageLayout21 = "/lance.encodings21.PageLayout"
	typeURLArrayEnc20   = "/lance.encodings.ArrayEncoding"
)

// RepDefLayer values (enum RepDefLayer).
const (
	layerAllValidItem = 1
	layerNullableItem = 3
)

type field struct {
	num protowire.Number
	typ protowire.Type
	u   uint64 // varint / fixed values
	b   []byte // bytes (length-delimited) values
}

// parseFields splits a message into its fields; groups are refused.
func parseFields(b []byte) ([]field, error) {
	var out []field
	err := pbwire.Walk(b, func(num protowire.Number, typ protowire.Type, v []byte, u uint64) error {
		out = append(out, field{num: num, typ: typ, u: u, b: v})
		return nil
	})
	if pe, ok := err.(*pbwire.Error); ok {
		return nil, corrupt("%s", pe.In("protobuf"))
	}
	return out, err
}

func (f field) wantVarint(msg string) error {
	if f.typ != protowire.VarintType {
		return corrupt("%s field %d: wire type %d, want varint", msg, f.num, f.typ)
	}
	return nil
}

func (f field) wantBytes(msg string) error {
	if f.typ != protowire.BytesType {
		return corrupt("%s field %d: wire type %d, want bytes", msg, f.num, f.typ)
	}
	return nil
}

// varints reads a repeated varint field, packed or not, appending to dst.
func (f field) varints(msg string, dst []uint64) ([]uint64, error) {
	switch f.typ {
	case protowire.VarintType:
		return append(dst, f.u), nil
	case protowire.BytesType:
		b := f.b
		for len(b) > 0 {
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return nil, corrupt("%s field %d: packed varint: %v", msg, f.num, protowire.ParseError(n))
			}
			dst = append(dst, v)
			b = b[n:]
		}
		return dst, nil
	}
	return nil, corrupt("%s field %d: wire type %d, want varints", msg, f.num, f.typ)
}

// parseAny returns an Any's type URL and value.
func parseAny(b []byte) (string, []byte, error) {
	fs, err := parseFields(b)
	if err != nil {
		return "", nil, err
	}
	var url string
	var val []byte
	for _, f := range fs {
		switch f.num {
		case 1:
			if err := f.wantBytes("Any"); err != nil {
				return "", nil, err
			}
			url = string(f.b)
		case 2:
			if err := f.wantBytes("Any"); err != nil {
				return "", nil, err
			}
			val = f.b
		default:
			return "", nil, corrupt("Any field %d", f.num)
		}
	}
	return url, val, nil
}

func appendAny(dst []byte, url string, val []byte) []byte {
	dst = protowire.AppendTag(dst, 1, protowire.BytesType)
	dst = protowire.AppendString(dst, url)
	dst = protowire.AppendTag(dst, 2, protowire.BytesType)
	return protowire.AppendBytes(dst, val)
}

// compression is a parsed 2.1 CompressiveEncoding, restricted to what is
// decoded: Flat (bits per value, no buffer compression) and Variable (Flat
// offsets, no buffer compression).
type compression struct {
	flatBits   uint64 // Flat: bits per value; Rle: bits per run value
	variable   bool
	offsetBits uint64 // Variable: bits per offset (32 or 64)
	// rle: Rle{values: Flat(flatBits), run_lengths: Flat(8)}, decoded only
	// (mini-block values: buffer 0 the run values, buffer 1 u8 run lengths).
	rle bool
}

// compressiveNames are the CompressiveEncoding oneof members by field number.
var compressiveNames = map[protowire.Number]string{
	1: "Flat", 2: "Variable", 3: "Constant", 4: "OutOfLineBitpacking", 5: "InlineBitpacking",
	6: "Fsst", 7: "Dictionary", 8: "Rle", 9: "ByteStreamSplit", 10: "General",
	11: "FixedSizeList", 12: "PackedStruct", 13: "VariablePackedStruct",
}

func parseCompression(b []byte, depth int) (compression, error) {
	var c compression
	if depth > 4 {
		return c, corrupt("CompressiveEncoding nested too deep")
	}
	f, err := oneField(b, "CompressiveEncoding")
	if err != nil {
		return c, err
	}
	switch f.num {
	case 1: // Flat{bits_per_value = 1; optional BufferCompression data = 2}
		inner, err := parseFields(f.b)
		if err != nil {
			return c, err
		}
		for _, g := range inner {
			switch g.num {
			case 1:
				if err := g.wantVarint("Flat"); err != nil {
					return c, err
				}
				c.flatBits = g.u
			case 2:
				return c, unsupported("2.1 Flat with buffer compression (LZ4/Zstd)")
			default:
				return c, unsupported("2.1 Flat field %d", g.num)
			}
		}
		if c.flatBits == 0 {
			return c, corrupt("Flat with 0 bits per value")
		}
		return c, nil
	case 2: // Variable{offsets = 1; optional BufferCompression values = 2}
		inner, err := parseFields(f.b)
		if err != nil {
			return c, err
		}
		c.variable = true
		for _, g := range inner {
			switch g.num {
			case 1:
				if err := g.wantBytes("Variable"); err != nil {
					return c, err
				}
				off, err := parseCompression(g.b, depth+1)
				if err != nil {
					return c, err
				}
				if off.variable {
					return c, corrupt("Variable offsets encoded as Variable")
				}
				c.offsetBits = off.flatBits
			case 2:
				return c, unsupported("2.1 Variable with buffer compression (LZ4/Zstd)")
			default:
				return c, unsupported("2.1 Variable field %d", g.num)
			}
		}
		if c.offsetBits != 32 && c.offsetBits != 64 {
			return c, unsupported("2.1 Variable with %d-bit offsets", c.offsetBits)
		}
		return c, nil
	}
	if f.num == 8 && depth == 0 { // Rle{values = 1; run_lengths = 2}
		inner, err := parseFields(f.b)
		if err != nil {
			return c, err
		}
		var runBits uint64
		for _, g := range inner {
			if err := g.wantBytes("Rle"); err != nil {
				return c, err
			}
			sub, err := parseCompression(g.b, depth+1)
			if err != nil {
				return c, err
			}
			if sub.variable || sub.rle {
				return c, unsupported("2.1 Rle over non-Flat")
			}
			switch g.num {
			case 1:
				c.flatBits = sub.flatBits
			case 2:
				runBits = sub.flatBits
			default:
				return c, unsupported("2.1 Rle field %d", g.num)
			}
		}
		switch c.flatBits {
		case 8, 16, 32, 64:
		default:
			return c, unsupported("2.1 Rle of %d-bit values", c.flatBits)
		}
		if runBits != 8 {
			return c, unsupported("2.1 Rle with %d-bit run lengths", runBits)
		}
		c.rle = true
		return c, nil
	}
	if name, ok := compressiveNames[f.num]; ok {
		return c, unsupported("2.1 %s", name)
	}
	return c, unsupported("2.1 CompressiveEncoding field %d", f.num)
}

func appendFlat(dst []byte, bits uint64) []byte {
	var flat []byte
	flat = protowire.AppendTag(flat, 1, protowire.VarintType)
	flat = protowire.AppendVarint(flat, bits)
	dst = protowire.AppendTag(dst, 1, protowire.BytesType)
	return protowire.AppendBytes(dst, flat)
}

// appendCompression writes a CompressiveEncoding message (its bytes).
func appendCompression(dst []byte, c compression) []byte {
	if !c.variable {
		return appendFlat(dst, c.flatBits)
	}
	var v []byte
	v = protowire.AppendTag(v, 1, protowire.BytesType)
	v = protowire.AppendBytes(v, appendFlat(nil, c.offsetBits))
	dst = protowire.AppendTag(dst, 2, protowire.BytesType)
	return protowire.AppendBytes(dst, v)
}

// layout kinds of a parsed 2.1 PageLayout.
const (
	layoutMiniBlock = 1
	layoutAllNull   = 2
	layoutFullZip   = 3
)

// pageLayout is a parsed 2.1 PageLayout, restricted to what is decoded.
type pageLayout struct {
	kind     int
	layers   []uint64
	def      *compression // mini-block def levels
	value    compression
	numItems uint64
	// full-zip
	bitsDef       uint64
	bitsPerOffset uint64
	numVisible    uint64
	numBuffers    uint64
	// 2.2
	largeChunk bool   // MiniBlockLayout.has_large_chunk: u32 chunk grammar
	defRle     bool   // mini-block def levels as a 2.2 Rle block
	inline     []byte // ConstantLayout.inline_value (nil: absent)
	hasInline  bool
}

func parsePageLayout(b []byte) (pageLayout, error) {
	var l pageLayout
	f, err := oneField(b, "PageLayout")
	if err != nil {
		return l, err
	}
	switch f.num {
	case 1:
		l.kind = layoutMiniBlock
		err = l.parseMiniBlock(f.b)
	case 2:
		l.kind = layoutAllNull
		err = l.parseAllNull(f.b)
	case 3:
		l.kind = layoutFullZip
		err = l.parseFullZip(f.b)
	case 4:
		return l, unsupported("2.1 BlobLayout")
	default:
		return l, unsupported("2.1 PageLayout field %d (a layout newer than this reader, e.g. ConstantLayout)", f.num)
	}
	return l, err
}

func (l *pageLayout) parseMiniBlock(b []byte) error {
	fs, err := parseFields(b)
	if err != nil {
		return err
	}
	haveValue := false
	for _, f := range fs {
		switch f.num {
		case 1:
			return unsupported("2.1 MiniBlockLayout.rep_compression (lists)")
		case 2, 3:
			if err := f.wantBytes("MiniBlockLayout"); err != nil {
				return err
			}
			c, err := parseCompression(f.b, 0)
			if err != nil {
				return err
			}
			if f.num == 2 {
				if c.variable || c.flatBits != 16 {
					return unsupported("2.1 definition levels not Flat or Rle u16")
				}
				l.defRle, c.rle = c.rle, false
				l.def = &c
			} else {
				l.value, haveValue = c, true
			}
		case 4:
			return unsupported("2.1 MiniBlockLayout.dictionary")
		case 5, 8:
			if err := f.wantVarint("MiniBlockLayout"); err != nil {
				return err
			}
			if f.u != 0 {
				if f.num == 5 {
					return unsupported("2.1 MiniBlockLayout.dictionary")
				}
				return unsupported("2.1 MiniBlockLayout.repetition_index_depth %d (lists)", f.u)
			}
		case 6:
			if l.layers, err = f.varints("MiniBlockLayout", l.layers); err != nil {
				return err
			}
		case 7:
			if err := f.wantVarint("MiniBlockLayout"); err != nil {
				return err
			}
			l.numBuffers = f.u
		case 9:
			if err := f.wantVarint("MiniBlockLayout"); err != nil {
				return err
			}
			l.numItems = f.u
		case 10:
			if err := f.wantVarint("MiniBlockLayout"); err != nil {
				return err
			}
			l.largeChunk = f.u != 0
		default:
			if f.typ == protowire.VarintType && f.u == 0 {
				continue // a default-valued field is no change of format
			}
			return unsupported("2.1 MiniBlockLayout field %d (e.g. 2.2 large chunks)", f.num)
		}
	}
	if !haveValue {
		return corrupt("MiniBlockLayout without value_compression")
	}
	want := uint64(1)
	if l.value.rle {
		want = 2
	}
	if l.numBuffers != want {
		return corrupt("MiniBlockLayout with %d value buffers, want %d", l.numBuffers, want)
	}
	return l.checkLayers(l.def != nil)
}

// checkLayers accepts exactly one item layer: ALL_VALID_ITEM without
// definition levels, NULLABLE_ITEM with them.
func (l *pageLayout) checkLayers(hasDef bool) error {
	if len(l.layers) != 1 {
		return unsupported("2.1 %d rep/def layers (structs or lists)", len(l.layers))
	}
	switch l.layers[0] {
	case layerAllValidItem:
		if hasDef {
			return corrupt("ALL_VALID_ITEM layer with definition levels")
		}
	case layerNullableItem:
		if !hasDef && l.kind != layoutAllNull {
			return corrupt("NULLABLE_ITEM layer without definition levels")
		}
	default:
		return unsupported("2.1 rep/def layer %d (lists)", l.layers[0])
	}
	return nil
}

// parseAllNull parses field 2 of PageLayout: the 2.1 AllNullLayout, which
// 2.2 extends into ConstantLayout (layers = 5, inline_value = 6,
// rep_compression = 7, def_compression = 8, num_rep_values = 9,
// num_def_values = 10).
func (l *pageLayout) parseAllNull(b []byte) error {
	fs, err := parseFields(b)
	if err != nil {
		return err
	}
	for _, f := range fs {
		switch f.num {
		case 5:
			if l.layers, err = f.varints("AllNullLayout", l.layers); err != nil {
				return err
			}
		case 6:
			if err := f.wantBytes("ConstantLayout"); err != nil {
				return err
			}
			l.inline, l.hasInline = f.b, true
		case 7:
			return unsupported("2.2 ConstantLayout.rep_compression (lists)")
		case 8:
			return unsupported("2.2 ConstantLayout.def_compression")
		case 9:
			if f.u != 0 {
				return unsupported("2.2 ConstantLayout with repetition levels (lists)")
			}
		case 10:
			if err := f.wantVarint("ConstantLayout"); err != nil {
				return err
			}
			l.numItems = f.u
		default:
			return unsupported("2.1 AllNullLayout field %d", f.num)
		}
	}
	if len(l.layers) != 1 || (l.layers[0] != layerNullableItem && l.layers[0] != layerAllValidItem) {
		return unsupported("2.1 AllNullLayout with layers %v (structs or lists)", l.layers)
	}
	return nil
}

func (l *pageLayout) parseFullZip(b []byte) error {
	fs, err := parseFields(b)
	if err != nil {
		return err
	}
	haveValue := false
	for _, f := range fs {
		switch f.num {
		case 1:
			if err := f.wantVarint("FullZipLayout"); err != nil {
				return err
			}
			if f.u != 0 {
				return unsupported("2.1 FullZipLayout with repetition (lists)")
			}
		case 2:
			if err := f.wantVarint("FullZipLayout"); err != nil {
				return err
			}
			l.bitsDef = f.u
		case 3:
			return unsupported("2.1 FullZipLayout with fixed-width values")
		case 4:
			if err := f.wantVarint("FullZipLayout"); err != nil {
				return err
			}
			l.bitsPerOffset = f.u
		case 5:
			if err := f.wantVarint("FullZipLayout"); err != nil {
				return err
			}
			l.numItems = f.u
		case 6:
			if err := f.wantVarint("FullZipLayout"); err != nil {
				return err
			}
			l.numVisible = f.u
		case 7:
			if err := f.wantBytes("FullZipLayout"); err != nil {
				return err
			}
			if l.value, err = parseCompression(f.b, 0); err != nil {
				return err
			}
			haveValue = true
		case 8:
			if l.layers, err = f.varints("FullZipLayout", l.layers); err != nil {
				return err
			}
		default:
			if f.typ == protowire.VarintType && f.u == 0 {
				continue
			}
			return unsupported("2.1 FullZipLayout field %d", f.num)
		}
	}
	if !haveValue || !l.value.variable {
		return unsupported("2.1 FullZipLayout without Variable values")
	}
	if l.bitsPerOffset != 32 && l.bitsPerOffset != 64 {
		return corrupt("FullZipLayout with %d bits per offset", l.bitsPerOffset)
	}
	if l.bitsDef > 16 {
		return unsupported("2.1 FullZipLayout with %d definition bits", l.bitsDef)
	}
	if l.numVisible != l.numItems {
		return corrupt("FullZipLayout with %d visible of %d items without repetition", l.numVisible, l.numItems)
	}
	return l.checkLayers(l.bitsDef > 0)
}

func appendVarintField(dst []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return dst
	}
	dst = protowire.AppendTag(dst, num, protowire.VarintType)
	return protowire.AppendVarint(dst, v)
}

func appendBytesField(dst []byte, num protowire.Number, b []byte) []byte {
	dst = protowire.AppendTag(dst, num, protowire.BytesType)
	return protowire.AppendBytes(dst, b)
}

func appendLayers(dst []byte, num protowire.Number, layer uint64) []byte {
	// proto3 packs repeated enums
	return appendBytesField(dst, num, protowire.AppendVarint(nil, layer))
}

// appendPageLayout writes the Any-wrapped PageLayout of l (fields in field
// number order, defaults omitted, as prost writes them).
func appendPageLayout(dst []byte, l pageLayout) []byte {
	var inner []byte
	var num protowire.Number
	switch l.kind {
	case layoutMiniBlock:
		num = 1
		if l.def != nil {
			inner = appendBytesField(inner, 2, appendCompression(nil, *l.def))
		}
		inner = appendBytesField(inner, 3, appendCompression(nil, l.value))
		inner = appendLayers(inner, 6, l.layers[0])
		inner = appendVarintField(inner, 7, l.numBuffers)
		inner = appendVarintField(inner, 9, l.numItems)
		if l.largeChunk {
			inner = appendVarintField(inner, 10, 1)
		}
	case layoutAllNull:
		num = 2
		inner = appendLayers(inner, 5, l.layers[0])
	case layoutFullZip:
		num = 3
		inner = appendVarintField(inner, 2, l.bitsDef)
		inner = protowire.AppendTag(inner, 4, protowire.VarintType) // oneof: written even when 0
		inner = protowire.AppendVarint(inner, l.bitsPerOffset)
		inner = appendVarintField(inner, 5, l.numItems)
		inner = appendVarintField(inner, 6, l.numVisible)
		inner = appendBytesField(inner, 7, appendCompression(nil, l.value))
		inner = appendLayers(inner, 8, l.layers[0])
	}
	pl := appendBytesField(nil, num, inner)
	return appendAny(dst, typeURLPageLayout21, pl)
}
