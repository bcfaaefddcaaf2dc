package lanceenc

import (
	"encoding/binary"
)

// encodePage21 encodes rows as one 2.1 page, as Lance's own writer lays out
// the same encodings (so that pages Lance would write Flat/Variable come out
// byte for byte as Lance writes them): mini-block Flat for fixed width,
// mini-block Variable for values shorter than 256 bytes, full-zip Variable
// for longer ones, AllNullLayout when every row is null. Rows with nulls get
// a NULLABLE_ITEM layer with Flat u16 definition levels (0 valid, 1 null);
// rows without, ALL_VALID_ITEM.
func encodePage21(v *Values) (Page, error) { return encodeStructural(v, false) }

// encodeStructural writes 2.1 pages (large = false) or 2.2 pages (large:
// mini-blocks in the u32 chunk grammar, has_large_chunk set, which Lance
// 2.2 readers require; the other layouts are the same bytes).
func encodeStructural(v *Values, large bool) (Page, error) {
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
	if v.Kind == KindNull || uint64(nulls) == v.Len {
		l := pageLayout{kind: layoutAllNull, layers: []uint64{layerNullableItem}}
		return Page{Rows: v.Len, Encoding: appendPageLayout(nil, l)}, nil
	}
	var valid []bool
	if nulls > 0 {
		valid = v.Valid
	}
	if v.Kind == KindVariable {
		var maxLen uint64
		for i := uint64(0); i < v.Len; i++ {
			if n := v.Offsets[i+1] - v.Offsets[i]; n > maxLen {
				maxLen = n
			}
		}
		if maxLen >= maxMiniBlockValLen {
			return encodeFullZip(v, valid)
		}
	}
	return encodeMiniBlock(v, valid, large)
}

type chunkSpec struct {
	from, to uint64 // rows
	log      uint8  // log2 of the values (0 for a last, partial chunk)
	values   []byte // the chunk's value buffer
}

// flatChunks cuts fixed-width values as Lance's ValueEncoder does: the
// largest power of two of values whose bytes stay under 8 KiB - 6 and at
// most 4096 values (8-value words for widths not a multiple of 8).
func flatChunks(v *Values) []chunkSpec {
	bytesPerWord := v.Bits / 8
	logVals, vals := uint64(1), uint64(2)
	if v.Bits%8 != 0 { // 8-value words of Bits bytes
		bytesPerWord = v.Bits
		logVals, vals = 3, 8
	}
	size := 2 * bytesPerWord
	for 2*size < maxMiniblockBytes && 2*vals <= maxValuesPerChunk {
		logVals++
		size *= 2
		vals *= 2
	}
	var out []chunkSpec
	for from := uint64(0); from < v.Len; from += vals {
		to, lg := from+vals, uint8(logVals)
		if to > v.Len {
			to, lg = v.Len, 0
		}
		s := v.slice(from, to)
		out = append(out, chunkSpec{from: from, to: to, log: lg, values: s.Data[:(s.Len*v.Bits+7)/8]})
	}
	return out
}

const (
	maxMiniblockBytes = 8*1024 - 6
	aimVariableChunk  = 4 * 1024
	// safeVariableChunk bounds a Variable chunk's value buffer where Lance's
	// search would take a power of two whose second half is large.
	safeVariableChunk = 16 * 1024
)

// variableChunks cuts variable values as Lance's BinaryMiniBlockEncoder
// does: the largest power of two of values whose offsets and bytes stay
// within 4 KiB (the rest of the page if it fits, at least one value); each
// chunk is its offsets (rebased to the chunk's start, after the offsets)
// then its bytes, padded to the offset width with 72.
func variableChunks(v *Values) []chunkSpec {
	w := v.OffsetBits / 8
	n := v.Len
	var out []chunkSpec
	for start := uint64(0); start < n; {
		end := nextChunkEnd(v.Offsets, start, w)
		if bytes := v.Offsets[end] - v.Offsets[start] + (end-start+1)*w; bytes > safeVariableChunk {
			// shrink to a power of two that fits (never reached by Lance's
			// own inputs, which panic instead)
			k := uint64(1)
			for start+2*k < n && v.Offsets[start+2*k]-v.Offsets[start]+(2*k+1)*w <= aimVariableChunk {
				k *= 2
			}
			end = start + k
		}
		var buf []byte
		base := (end - start + 1) * w
		for i := start; i <= end; i++ {
			o := v.Offsets[i] - v.Offsets[start] + base
			if w == 4 {
				buf = binary.LittleEndian.AppendUint32(buf, uint32(o))
			} else {
				buf = binary.LittleEndian.AppendUint64(buf, o)
			}
		}
		buf = append(buf, v.Data[v.Offsets[start]:v.Offsets[end]]...)
		for uint64(len(buf))%w != 0 {
			buf = append(buf, variablePad)
		}
		lg := uint8(0)
		if end != n {
			lg = uint8(trailingZeros(end - start))
		}
		out = append(out, chunkSpec{from: start, to: end, log: lg, values: buf})
		start = end
	}
	return out
}

func trailingZeros(x uint64) int {
	n := 0
	for x&1 == 0 && n < 64 {
		x >>= 1
		n++
	}
	return n
}

// nextChunkEnd is Lance's search for the end of a Variable chunk starting
// at value start (offsets has one entry per value and one past the end).
func nextChunkEnd(offsets []uint64, start, w uint64) uint64 {
	last := uint64(len(offsets)) - 1
	num, next := uint64(1), uint64(2)
	for {
		if start+next >= last+1 {
			size := offsets[last] - offsets[start] + (last+1-start)*w
			if size <= aimVariableChunk {
				return last
			}
			return start + num
		}
		size := offsets[start+next] - offsets[start] + (next+1)*w
		if size > aimVariableChunk {
			break
		}
		num, next = next, next*2
	}
	// Lance 8 (the writer of LanceDB 0.31) ends the chunk at the last count
	// that fitted; older sources took the count that did not.
	return start + num
}

func encodeMiniBlock(v *Values, valid []bool, large bool) (Page, error) {
	var chunks []chunkSpec
	c := compression{flatBits: v.Bits}
	if v.Kind == KindVariable {
		chunks = variableChunks(v)
		c = compression{variable: true, offsetBits: v.OffsetBits}
	} else {
		if err := checkFlatBits(v.Bits); err != nil {
			return Page{}, err
		}
		chunks = flatChunks(v)
	}
	var meta, data []byte
	for _, ch := range chunks {
		start := len(data)
		n := ch.to - ch.from
		if valid != nil {
			data = binary.LittleEndian.AppendUint16(data, uint16(n))
			data = binary.LittleEndian.AppendUint16(data, uint16(2*n))
		} else {
			data = binary.LittleEndian.AppendUint16(data, 0)
		}
		if len(ch.values) > 0xFFFF {
			return Page{}, corrupt("mini-block chunk value buffer of %d bytes", len(ch.values))
		}
		if large {
			data = binary.LittleEndian.AppendUint32(data, uint32(len(ch.values)))
		} else {
			data = binary.LittleEndian.AppendUint16(data, uint16(len(ch.values)))
		}
		data = fill8(data)
		if valid != nil {
			for i := ch.from; i < ch.to; i++ {
				var lvl uint16
				if !valid[i] {
					lvl = 1
				}
				data = binary.LittleEndian.AppendUint16(data, lvl)
			}
			data = fill8(data)
		}
		data = append(data, ch.values...)
		data = fill8(data)
		size := len(data) - start
		if size > maxChunkBytes {
			return Page{}, corrupt("mini-block chunk of %d bytes", size)
		}
		word := uint32(size/miniblockAlign-1)<<4 | uint32(ch.log)
		if large {
			meta = binary.LittleEndian.AppendUint32(meta, word)
		} else {
			meta = binary.LittleEndian.AppendUint16(meta, uint16(word))
		}
	}
	l := pageLayout{kind: layoutMiniBlock, value: c, numBuffers: 1, numItems: v.Len, layers: []uint64{layerAllValidItem}, largeChunk: large}
	if valid != nil {
		l.def = &compression{flatBits: 16}
		l.layers = []uint64{layerNullableItem}
	}
	return Page{Rows: v.Len, Buffers: [][]byte{meta, data}, Encoding: appendPageLayout(nil, l)}, nil
}

func fill8(b []byte) []byte {
	for len(b)%miniblockAlign != 0 {
		b = append(b, miniblockFill)
	}
	return b
}

func encodeFullZip(v *Values, valid []bool) (Page, error) {
	if v.Len > 0xFFFFFFFF {
		return Page{}, corrupt("full-zip page of %d rows", v.Len)
	}
	lw := v.OffsetBits / 8
	cw := uint64(0)
	if valid != nil {
		cw = 1
	}
	// Lance sizes the index by this bound (readers take the width from the
	// buffer: size / (rows + 1)); v may be a slice of larger Values
	bound := v.Offsets[v.Len] - v.Offsets[0] + cw*v.Len + lw*v.Len
	idxW := uint64(8)
	switch {
	case bound <= 0xFF:
		idxW = 1
	case bound <= 0xFFFF:
		idxW = 2
	case bound <= 0xFFFFFFFF:
		idxW = 4
	}
	var data, rep []byte
	appendIdx := func(x uint64) {
		switch idxW {
		case 1:
			rep = append(rep, byte(x))
		case 2:
			rep = binary.LittleEndian.AppendUint16(rep, uint16(x))
		case 4:
			rep = binary.LittleEndian.AppendUint32(rep, uint32(x))
		default:
			rep = binary.LittleEndian.AppendUint64(rep, x)
		}
	}
	for i := uint64(0); i < v.Len; i++ {
		appendIdx(uint64(len(data)))
		ok := valid == nil || valid[i]
		if cw > 0 {
			if ok {
				data = append(data, 0)
			} else {
				data = append(data, 1)
			}
		}
		if ok {
			b := v.Data[v.Offsets[i]:v.Offsets[i+1]]
			if lw == 4 {
				data = binary.LittleEndian.AppendUint32(data, uint32(len(b)))
			} else {
				data = binary.LittleEndian.AppendUint64(data, uint64(len(b)))
			}
			data = append(data, b...)
		}
	}
	appendIdx(uint64(len(data)))
	l := pageLayout{kind: layoutFullZip, bitsDef: cw, bitsPerOffset: v.OffsetBits, numItems: v.Len, numVisible: v.Len,
		value: compression{variable: true, offsetBits: v.OffsetBits}, layers: []uint64{layerAllValidItem}}
	if cw > 0 {
		l.layers = []uint64{layerNullableItem}
	}
	return Page{Rows: v.Len, Buffers: [][]byte{data, rep}, Encoding: appendPageLayout(nil, l)}, nil
}
