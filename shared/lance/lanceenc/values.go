package lanceenc

import (
	"encoding/binary"
	"fmt"
)

// Page is one page of one column as stored in a Lance v2 file: its buffers
// (in order, as the page's buffer_offsets/buffer_sizes name them), its row
// count (Page.length) and its encoding: the bytes of Encoding.direct in
// file2.proto (a google.protobuf.Any wrapping a lance.encodings21.PageLayout
// for 2.1 and later, a lance.encodings.ArrayEncoding for 2.0).
type Page struct {
	Rows     uint64
	Buffers  [][]byte
	Encoding []byte
}

// Version is the file version (major, minor) as in the DataFile: 2.0, 2.1,
// 2.2. The 2.0 footer's numbers (0, 3) are accepted as 2.0.
type Version struct{ Major, Minor uint32 }

var (
	V2_0 = Version{2, 0}
	V2_1 = Version{2, 1}
	V2_2 = Version{2, 2}
)

func (v Version) String() string { return fmt.Sprintf("%d.%d", v.Major, v.Minor) }

// norm maps the 2.0 footer numbers to 2.0 and refuses other versions.
func (v Version) norm() (Version, error) {
	switch v {
	case Version{0, 3}, V2_0:
		return V2_0, nil
	case V2_1, V2_2:
		return v, nil
	}
	return v, unsupported("file version %s", v)
}

// Kind is the shape of decoded values.
type Kind uint8

const (
	// KindNull: every row is null and the page says nothing of the type
	// (2.1 AllNullLayout, 2.0 Nullable all_nulls).
	KindNull Kind = iota
	// KindFixed: Bits bits per value, little endian, packed in Data
	// (Bits = 1: a bitmap, least significant bit first, as Arrow booleans).
	KindFixed
	// KindVariable: value i is Data[Offsets[i]:Offsets[i+1]].
	KindVariable
)

// Values are the decoded rows of one or more pages. A null row has zero
// bytes (fixed width: zeros in its slot; variable: an empty value).
type Values struct {
	Kind Kind
	Len  uint64
	// Bits is the width of a fixed value (KindFixed).
	Bits uint64
	// OffsetBits is the width of the page's offsets (KindVariable): 32 or
	// 64, as Arrow's Utf8/Binary (32) and LargeUtf8/LargeBinary (64).
	OffsetBits uint64
	// Valid is nil when every row is valid; else Valid[i] says if row i is.
	// Unused for KindNull (no row is valid).
	Valid   []bool
	Data    []byte
	Offsets []uint64
}

// IsNull says if row i is null.
func (v *Values) IsNull(i uint64) bool {
	if v.Kind == KindNull {
		return true
	}
	return v.Valid != nil && !v.Valid[i]
}

// Bytes returns the bytes of row i: a variable value, or a fixed value's
// slot (Bits a multiple of 8).
func (v *Values) Bytes(i uint64) []byte {
	switch v.Kind {
	case KindVariable:
		return v.Data[v.Offsets[i]:v.Offsets[i+1]]
	case KindFixed:
		w := v.Bits / 8
		return v.Data[i*w : (i+1)*w]
	}
	return nil
}

// Bit returns a 1-bit value (a boolean).
func (v *Values) Bit(i uint64) bool { return v.Data[i/8]>>(i%8)&1 == 1 }

// Uint64 returns a fixed value of at most 64 bits, zero-extended.
func (v *Values) Uint64(i uint64) uint64 {
	if v.Bits == 1 {
		if v.Bit(i) {
			return 1
		}
		return 0
	}
	var b [8]byte
	copy(b[:], v.Bytes(i))
	return binary.LittleEndian.Uint64(b[:])
}

// Int64 returns a fixed value of 8 to 64 bits, sign-extended.
func (v *Values) Int64(i uint64) int64 {
	u := v.Uint64(i)
	if v.Bits < 64 {
		shift := 64 - v.Bits
		return int64(u<<shift) >> shift
	}
	return int64(u)
}

// valueBytes is the size of the rows' value bytes (for page targets).
func (v *Values) valueBytes() uint64 {
	switch v.Kind {
	case KindFixed:
		return (v.Len*v.Bits + 7) / 8
	case KindVariable:
		return uint64(len(v.Data))
	}
	return 0
}

// appendValues appends src to dst (same kind, width; KindNull rows become
// null rows of dst's kind). dst.Kind must be set.
func appendValues(dst *Values, src *Values) error {
	if src.Kind != KindNull && (src.Kind != dst.Kind || src.Bits != dst.Bits ||
		(src.Kind == KindVariable && src.OffsetBits != dst.OffsetBits)) {
		return unsupported("merging pages of different value types (%s and %s)", dst.describe(), src.describe())
	}
	srcNulls := src.Kind == KindNull || src.Valid != nil
	if srcNulls && dst.Valid == nil {
		dst.Valid = make([]bool, dst.Len, dst.Len+src.Len)
		for i := range dst.Valid {
			dst.Valid[i] = true
		}
	}
	if dst.Valid != nil {
		for i := uint64(0); i < src.Len; i++ {
			dst.Valid = append(dst.Valid, !src.IsNull(i))
		}
	}
	switch dst.Kind {
	case KindFixed:
		if src.Kind == KindNull {
			dst.Data = appendZeroBits(dst.Data, dst.Len, src.Len, dst.Bits)
		} else {
			dst.Data = appendBits(dst.Data, dst.Len, src.Data, src.Len, dst.Bits)
		}
	case KindVariable:
		if dst.Offsets == nil {
			dst.Offsets = []uint64{0}
		}
		base := uint64(len(dst.Data))
		if src.Kind == KindNull {
			for i := uint64(0); i < src.Len; i++ {
				dst.Offsets = append(dst.Offsets, base)
			}
		} else {
			dst.Data = append(dst.Data, src.Data[src.Offsets[0]:src.Offsets[src.Len]]...)
			for i := uint64(1); i <= src.Len; i++ {
				dst.Offsets = append(dst.Offsets, base+src.Offsets[i]-src.Offsets[0])
			}
		}
	}
	dst.Len += src.Len
	return nil
}

func (v *Values) describe() string {
	switch v.Kind {
	case KindFixed:
		return fmt.Sprintf("%d-bit fixed", v.Bits)
	case KindVariable:
		return fmt.Sprintf("variable with %d-bit offsets", v.OffsetBits)
	}
	return "all null"
}

// appendBits appends n values of bits each from src to dst holding have
// values.
func appendBits(dst []byte, have uint64, src []byte, n, bits uint64) []byte {
	if bits%8 == 0 {
		return append(dst, src[:n*bits/8]...)
	}
	for i := uint64(0); i < n*bits; i++ {
		pos := have*bits + i
		if pos%8 == 0 {
			dst = append(dst, 0)
		}
		if src[i/8]>>(i%8)&1 == 1 {
			dst[pos/8] |= 1 << (pos % 8)
		}
	}
	return dst
}

func appendZeroBits(dst []byte, have, n, bits uint64) []byte {
	total := ((have+n)*bits + 7) / 8
	for uint64(len(dst)) < total {
		dst = append(dst, 0)
	}
	return dst
}

// slice returns rows [from, to) of v as new Values (shared Data).
func (v *Values) slice(from, to uint64) *Values {
	out := &Values{Kind: v.Kind, Len: to - from, Bits: v.Bits, OffsetBits: v.OffsetBits}
	if v.Valid != nil {
		out.Valid = v.Valid[from:to]
	}
	switch v.Kind {
	case KindFixed:
		if v.Bits%8 == 0 {
			w := v.Bits / 8
			out.Data = v.Data[from*w : to*w]
		} else {
			out.Data = appendBits(nil, 0, shiftBits(v.Data, from*v.Bits, (to-from)*v.Bits), to-from, v.Bits)
		}
	case KindVariable:
		out.Offsets = v.Offsets[from : to+1]
		out.Data = v.Data
	}
	return out
}

// shiftBits returns n bits of src starting at bit from, as a new bitmap.
func shiftBits(src []byte, from, n uint64) []byte {
	out := make([]byte, (n+7)/8)
	for i := uint64(0); i < n; i++ {
		p := from + i
		if src[p/8]>>(p%8)&1 == 1 {
			out[i/8] |= 1 << (i % 8)
		}
	}
	return out
}
