package lanceenc

import (
	"encoding/binary"

	"google.golang.org/protobuf/encoding/protowire"
)

// Lance 2.0 pages carry a lance.encodings.ArrayEncoding tree
// (protos/encodings_v2_0.proto). Decoded here: Nullable{no_nulls |
// some_nulls | all_nulls} over Flat (validity: Flat 1-bit) and Binary
// {indices: Nullable{no_nulls{Flat 64}}, bytes: Flat 8, null_adjustment}:
// what Lance's 2.0 writer emits for pages below its dictionary threshold.
// Each Flat names its page buffer by index.

var arrayNames20 = map[protowire.Number]string{
	1: "Flat", 2: "Nullable", 3: "FixedSizeList", 4: "List", 5: "SimpleStruct", 6: "Binary",
	7: "Dictionary", 8: "Fsst", 9: "PackedStruct", 10: "Bitpacked", 11: "FixedSizeBinary",
	12: "BitpackedForNonNeg", 13: "Constant", 14: "InlineBitpacking", 15: "OutOfLineBitpacking",
	16: "Variable", 17: "PackedStructFixedWidthMiniBlock", 18: "Block", 19: "Rle",
	20: "GeneralMiniBlock", 21: "ByteStreamSplit",
}

// oneField parses a message that must hold one length-delimited field.
func oneField(b []byte, what string) (field, error) {
	fs, err := parseFields(b)
	if err != nil {
		return field{}, err
	}
	if len(fs) != 1 || fs[0].typ != protowire.BytesType {
		return field{}, corrupt("%s with %d fields, want one message", what, len(fs))
	}
	return fs[0], nil
}

// flat20 parses a 2.0 Flat: bits per value and its page buffer index.
func flat20(b []byte) (bits uint64, buf int, err error) {
	fs, err := parseFields(b)
	if err != nil {
		return 0, 0, err
	}
	for _, f := range fs {
		switch f.num {
		case 1:
			if err := f.wantVarint("Flat"); err != nil {
				return 0, 0, err
			}
			bits = f.u
		case 2:
			if err := f.wantBytes("Flat"); err != nil {
				return 0, 0, err
			}
			bf, err := parseFields(f.b)
			if err != nil {
				return 0, 0, err
			}
			for _, g := range bf {
				switch g.num {
				case 1:
					if g.u > 1<<20 {
						return 0, 0, corrupt("Flat buffer index %d", g.u)
					}
					buf = int(g.u)
				case 2:
					if g.u != 0 {
						return 0, 0, unsupported("2.0 Flat in a column or file buffer")
					}
				default:
					return 0, 0, unsupported("2.0 Buffer field %d", g.num)
				}
			}
		case 3:
			return 0, 0, unsupported("2.0 Flat with compression")
		default:
			return 0, 0, unsupported("2.0 Flat field %d", f.num)
		}
	}
	return bits, buf, nil
}

// arrayFlat expects an ArrayEncoding that is a Flat.
func arrayFlat(b []byte) (uint64, int, error) {
	f, err := oneField(b, "ArrayEncoding")
	if err != nil {
		return 0, 0, err
	}
	if f.num != 1 {
		return 0, 0, unsupported20(f.num)
	}
	return flat20(f.b)
}

func unsupported20(num protowire.Number) error {
	if n, ok := arrayNames20[num]; ok {
		return unsupported("2.0 %s", n)
	}
	return unsupported("2.0 ArrayEncoding field %d", num)
}

func pageBuffer(p Page, i int) ([]byte, error) {
	if i < 0 || i >= len(p.Buffers) {
		return nil, corrupt("2.0 page buffer %d of %d", i, len(p.Buffers))
	}
	return p.Buffers[i], nil
}

func decode20(p Page) (*Values, error) {
	url, val, err := parseAny(p.Encoding)
	if err != nil {
		return nil, err
	}
	if url != typeURLArrayEnc20 {
		return nil, unsupported("page encoding %q in a 2.0 file", url)
	}
	top, err := oneField(val, "ArrayEncoding")
	if err != nil {
		return nil, err
	}
	switch top.num {
	case 2:
		return decodeNullable20(p, top.b)
	case 6:
		return decodeBinary20(p, top.b)
	case 1:
		return decodeValues20(p, val, nil)
	}
	return nil, unsupported20(top.num)
}

func decodeNullable20(p Page, b []byte) (*Values, error) {
	f, err := oneField(b, "Nullable")
	if err != nil {
		return nil, err
	}
	switch f.num {
	case 3:
		if len(p.Buffers) != 0 {
			return nil, corrupt("2.0 all-null page with %d buffers", len(p.Buffers))
		}
		return &Values{Kind: KindNull, Len: p.Rows}, nil
	case 1:
		nn, err := oneField(f.b, "NoNull")
		if err != nil {
			return nil, err
		}
		if nn.num != 1 {
			return nil, corrupt("NoNull field %d", nn.num)
		}
		return decodeValues20(p, nn.b, nil)
	case 2:
		fs, err := parseFields(f.b)
		if err != nil {
			return nil, err
		}
		var validity, values []byte
		for _, g := range fs {
			switch g.num {
			case 1:
				validity = g.b
			case 2:
				values = g.b
			default:
				return nil, corrupt("SomeNull field %d", g.num)
			}
		}
		bits, vb, err := arrayFlat(validity)
		if err != nil {
			return nil, err
		}
		if bits != 1 {
			return nil, unsupported("2.0 validity of %d bits", bits)
		}
		bm, err := pageBuffer(p, vb)
		if err != nil {
			return nil, err
		}
		if uint64(len(bm)) < (p.Rows+7)/8 || p.Rows > 8*uint64(len(bm)) {
			return nil, corrupt("2.0 validity of %d bytes for %d rows", len(bm), p.Rows)
		}
		valid := make([]bool, p.Rows)
		for i := range valid {
			valid[i] = bm[i/8]>>(i%8)&1 == 1
		}
		return decodeValues20(p, values, valid)
	}
	return nil, corrupt("Nullable field %d", f.num)
}

// decodeValues20 decodes the values ArrayEncoding under a Nullable.
func decodeValues20(p Page, b []byte, valid []bool) (*Values, error) {
	f, err := oneField(b, "ArrayEncoding")
	if err != nil {
		return nil, err
	}
	switch f.num {
	case 1:
		bits, bi, err := flat20(f.b)
		if err != nil {
			return nil, err
		}
		if err := checkFlatBits(bits); err != nil {
			return nil, unsupported("2.0 Flat of %d bits", bits)
		}
		buf, err := pageBuffer(p, bi)
		if err != nil {
			return nil, err
		}
		need := (p.Rows*bits + 7) / 8
		if p.Rows > uint64(len(buf))*8 || need > uint64(len(buf)) {
			return nil, corrupt("2.0 Flat of %d %d-bit values in %d bytes", p.Rows, bits, len(buf))
		}
		return &Values{Kind: KindFixed, Len: p.Rows, Bits: bits, Valid: valid, Data: buf[:need]}, nil
	case 6:
		v, err := decodeBinary20(p, f.b)
		if err != nil {
			return nil, err
		}
		if valid != nil {
			for i := range valid {
				if !valid[i] && v.Offsets[i+1] != v.Offsets[i] {
					return nil, corrupt("2.0 null string with bytes")
				}
				if v.Valid != nil && !v.Valid[i] {
					valid[i] = false
				}
			}
			v.Valid = valid
		}
		return v, nil
	}
	return nil, unsupported20(f.num)
}

func decodeBinary20(p Page, b []byte) (*Values, error) {
	fs, err := parseFields(b)
	if err != nil {
		return nil, err
	}
	var indices, bytesEnc []byte
	var adj uint64
	for _, f := range fs {
		switch f.num {
		case 1:
			indices = f.b
		case 2:
			bytesEnc = f.b
		case 3:
			adj = f.u
		default:
			return nil, unsupported("2.0 Binary field %d", f.num)
		}
	}
	// indices: Nullable{no_nulls{Flat 64}}
	nf, err := oneField(indices, "Binary.indices")
	if err != nil {
		return nil, err
	}
	if nf.num != 2 {
		return nil, unsupported("2.0 Binary indices as %s", arrayNames20[nf.num])
	}
	nn, err := oneField(nf.b, "Nullable")
	if err != nil {
		return nil, err
	}
	if nn.num != 1 {
		return nil, unsupported("2.0 Binary indices with nulls")
	}
	inner, err := oneField(nn.b, "NoNull")
	if err != nil {
		return nil, err
	}
	ibits, ib, err := arrayFlat(inner.b)
	if err != nil {
		return nil, err
	}
	if ibits != 64 {
		return nil, unsupported("2.0 Binary indices of %d bits", ibits)
	}
	bbits, bb, err := arrayFlat(bytesEnc)
	if err != nil {
		return nil, err
	}
	if bbits != 8 {
		return nil, unsupported("2.0 Binary bytes of %d bits", bbits)
	}
	ibuf, err := pageBuffer(p, ib)
	if err != nil {
		return nil, err
	}
	data, err := pageBuffer(p, bb)
	if err != nil {
		return nil, err
	}
	if p.Rows > uint64(len(ibuf))/8 {
		return nil, corrupt("2.0 Binary of %d rows with %d bytes of indices", p.Rows, len(ibuf))
	}
	v := &Values{Kind: KindVariable, Len: p.Rows, OffsetBits: 64, Offsets: make([]uint64, 1, p.Rows+1)}
	var prev uint64
	for i := uint64(0); i < p.Rows; i++ {
		x := binary.LittleEndian.Uint64(ibuf[8*i:])
		if adj > 0 && x >= adj {
			if v.Valid == nil {
				v.Valid = make([]bool, i, p.Rows)
				for k := range v.Valid {
					v.Valid[k] = true
				}
			}
			x -= adj
			v.Valid = append(v.Valid, false)
			if x != prev {
				return nil, corrupt("2.0 null string at %d, after %d", x, prev)
			}
		} else if v.Valid != nil {
			v.Valid = append(v.Valid, true)
		}
		if x < prev || x > uint64(len(data)) {
			return nil, corrupt("2.0 Binary index %d after %d (%d bytes)", x, prev, len(data))
		}
		v.Offsets = append(v.Offsets, x)
		prev = x
	}
	v.Data = data[:prev]
	return v, nil
}

// 2.0 encoder: the tree Lance's 2.0 writer emits for the same values.

func appendBuffer20(dst []byte, index uint64) []byte {
	return appendBytesField(dst, 2, appendVarintField(nil, 1, index))
}

func flatArray20(bits, index uint64) []byte {
	flat := appendVarintField(nil, 1, bits)
	flat = appendBuffer20(flat, index)
	return appendBytesField(nil, 1, flat)
}

func encodePage20(v *Values) (Page, error) {
	if v.Len == 0 {
		return Page{}, corrupt("empty page")
	}
	nulls := 0
	if v.Valid != nil {
		for _, ok := range v.Valid {
			if !ok {
				nulls++
			}
		}
	}
	wrap := func(arr []byte) []byte { return appendAny(nil, typeURLArrayEnc20, arr) }
	if v.Kind == KindNull || uint64(nulls) == v.Len {
		nullable := appendBytesField(nil, 3, nil)
		return Page{Rows: v.Len, Encoding: wrap(appendBytesField(nil, 2, nullable))}, nil
	}
	if v.Kind == KindVariable {
		last := v.Offsets[v.Len] - v.Offsets[0]
		adj := last + 1
		idx := make([]byte, 0, 8*v.Len)
		for i := uint64(0); i < v.Len; i++ {
			x := v.Offsets[i+1] - v.Offsets[0]
			if nulls > 0 && !v.Valid[i] {
				x += adj
			}
			idx = binary.LittleEndian.AppendUint64(idx, x)
		}
		noNull := appendBytesField(nil, 1, flatArray20(64, 0))
		indices := appendBytesField(nil, 2, appendBytesField(nil, 1, noNull))
		bin := appendBytesField(nil, 1, indices)
		bin = appendBytesField(bin, 2, flatArray20(8, 1))
		bin = appendVarintField(bin, 3, adj)
		data := v.Data[v.Offsets[0]:v.Offsets[v.Len]]
		return Page{Rows: v.Len, Buffers: [][]byte{idx, data}, Encoding: wrap(appendBytesField(nil, 6, bin))}, nil
	}
	if err := checkFlatBits(v.Bits); err != nil {
		return Page{}, err
	}
	data := v.Data[:(v.Len*v.Bits+7)/8]
	if nulls == 0 {
		noNull := appendBytesField(nil, 1, flatArray20(v.Bits, 0))
		return Page{Rows: v.Len, Buffers: [][]byte{data}, Encoding: wrap(appendBytesField(nil, 2, appendBytesField(nil, 1, noNull)))}, nil
	}
	bm := make([]byte, (v.Len+7)/8)
	for i, ok := range v.Valid {
		if ok {
			bm[i/8] |= 1 << (i % 8)
		}
	}
	some := appendBytesField(nil, 1, flatArray20(1, 0))
	some = appendBytesField(some, 2, flatArray20(v.Bits, 1))
	return Page{Rows: v.Len, Buffers: [][]byte{bm, data}, Encoding: wrap(appendBytesField(nil, 2, appendBytesField(nil, 2, some)))}, nil
}
