package lanceenc

import (
	"encoding/binary"
)

// Mini-block limits (encoding.md "Mini Block Page Layout"; Lance's
// MAX_MINIBLOCK_VALUES and the 12-bit chunk size in 8-byte words).
const (
	miniblockAlign     = 8
	maxChunkBytes      = 32 * 1024
	maxValuesPerChunk  = 4096
	miniblockFill      = 0xFE // padding between a chunk's buffers
	variablePad        = 72   // padding of a Variable chunk's bytes to its offset width
	maxMiniBlockValLen = 256  // values this long or longer go to full-zip
)

// Decode decodes one page into its rows. The Values may share memory with
// the page's buffers. Pages describe their own value widths, so no Arrow
// type is needed (but for 2.2 1-byte constants, which are refused).
func Decode(v Version, p Page) (*Values, error) {
	v, err := v.norm()
	if err != nil {
		return nil, err
	}
	if v == V2_0 {
		return decode20(p)
	}
	url, val, err := parseAny(p.Encoding)
	if err != nil {
		return nil, err
	}
	if url != typeURLPageLayout21 {
		return nil, unsupported("page encoding %q in a %s file", url, v)
	}
	l, err := parsePageLayout(val)
	if err != nil {
		return nil, err
	}
	switch l.kind {
	case layoutAllNull:
		if len(p.Buffers) == 0 && !l.hasInline && l.layers[0] == layerNullableItem {
			return &Values{Kind: KindNull, Len: p.Rows}, nil
		}
		if v != V2_2 {
			return nil, unsupported("2.1 AllNullLayout with a value or levels (2.2 ConstantLayout) in a %s file", v)
		}
		return decodeConstant(l, p)
	case layoutMiniBlock:
		if l.largeChunk != (v == V2_2) || l.defRle != (l.defRle && v == V2_2) {
			return nil, unsupported("mini-block chunk grammar (has_large_chunk %v, Rle levels %v) in a %s file", l.largeChunk, l.defRle, v)
		}
		return decodeMiniBlock(l, p)
	default:
		return decodeFullZip(l, p)
	}
}

func decodeMiniBlock(l pageLayout, p Page) (*Values, error) {
	if len(p.Buffers) != 2 {
		return nil, corrupt("mini-block page with %d buffers, want 2 (no dictionary, no repetition index)", len(p.Buffers))
	}
	if l.numItems != p.Rows {
		return nil, corrupt("mini-block page of %d rows with %d items", p.Rows, l.numItems)
	}
	meta, data := p.Buffers[0], p.Buffers[1]
	ws := 2 // 2.2 large chunks: u32 chunk words and value buffer sizes
	if l.largeChunk {
		ws = 4
	}
	if len(meta)%ws != 0 {
		return nil, corrupt("mini-block metadata of %d bytes", len(meta))
	}
	nChunks := len(meta) / ws
	if (nChunks == 0) != (p.Rows == 0) {
		return nil, corrupt("mini-block page of %d rows with %d chunks", p.Rows, nChunks)
	}
	out := &Values{Kind: KindFixed, Bits: l.value.flatBits}
	if l.value.variable {
		out.Kind, out.Bits, out.OffsetBits = KindVariable, 0, l.value.offsetBits
		out.Offsets = []uint64{0}
	} else if err := checkFlatBits(out.Bits); err != nil {
		return nil, err
	}
	if l.def != nil {
		out.Valid = []bool{}
	}
	var pos, done uint64
	for c := 0; c < nChunks; c++ {
		var w uint32
		if ws == 2 {
			w = uint32(binary.LittleEndian.Uint16(meta[2*c:]))
		} else {
			w = binary.LittleEndian.Uint32(meta[4*c:])
		}
		size := (uint64(w>>4) + 1) * miniblockAlign
		n := uint64(1) << (w & 0x0F)
		if c == nChunks-1 {
			if done >= p.Rows {
				return nil, corrupt("mini-block chunks hold more than the page's %d rows", p.Rows)
			}
			n = p.Rows - done
			if w&0x0F != 0 && uint64(1)<<(w&0x0F) != n {
				return nil, corrupt("last mini-block chunk says %d values, %d remain", uint64(1)<<(w&0x0F), n)
			}
		} else if w&0x0F == 0 || n > p.Rows-done {
			return nil, corrupt("mini-block chunk %d of %d values (page %d rows, %d before)", c, n, p.Rows, done)
		}
		if n > maxValuesPerChunk {
			return nil, corrupt("mini-block chunk of %d values", n)
		}
		if size > uint64(len(data))-pos {
			return nil, corrupt("mini-block chunk %d (%d bytes at %d) outside the %d-byte data buffer", c, size, pos, len(data))
		}
		if err := decodeChunk(out, data[pos:pos+size], n, l); err != nil {
			return nil, err
		}
		pos += size
		done += n
	}
	if pos != uint64(len(data)) {
		return nil, corrupt("mini-block data buffer of %d bytes, chunks hold %d", len(data), pos)
	}
	out.Len = p.Rows
	return out, nil
}

func checkFlatBits(bits uint64) error {
	switch bits {
	case 1, 8, 16, 32, 64, 128:
		return nil
	}
	return unsupported("2.1 Flat of %d bits per value", bits)
}

func pad8(n uint64) uint64 { return (n + miniblockAlign - 1) / miniblockAlign * miniblockAlign }

// decodeChunk appends one mini-block chunk of n items to out.
func decodeChunk(out *Values, chunk []byte, n uint64, l pageLayout) error {
	hasDef, rle := l.def != nil, l.value.rle
	vs := uint64(2) // value buffer sizes: u16, u32 with 2.2 large chunks
	if l.largeChunk {
		vs = 4
	}
	hdr := 2 + vs
	if hasDef {
		hdr += 2
	}
	if rle {
		hdr += vs
	}
	if uint64(len(chunk)) < hdr {
		return corrupt("mini-block chunk of %d bytes", len(chunk))
	}
	numLevels := uint64(binary.LittleEndian.Uint16(chunk))
	var defSize uint64
	off := uint64(2)
	if hasDef {
		defSize = uint64(binary.LittleEndian.Uint16(chunk[off:]))
		off += 2
	}
	size := func() uint64 {
		var x uint64
		if vs == 2 {
			x = uint64(binary.LittleEndian.Uint16(chunk[off:]))
		} else {
			x = uint64(binary.LittleEndian.Uint32(chunk[off:]))
		}
		off += vs
		return x
	}
	valSize := size()
	var runSize uint64
	if rle {
		runSize = size()
	}
	off = pad8(off)
	take := func(size uint64) ([]byte, error) {
		if off > uint64(len(chunk)) || size > uint64(len(chunk))-off {
			return nil, corrupt("mini-block chunk buffer of %d bytes at %d outside the %d-byte chunk", size, off, len(chunk))
		}
		b := chunk[off : off+size]
		off = pad8(off + size)
		return b, nil
	}
	if hasDef {
		if numLevels != n || (!l.defRle && defSize != 2*n) {
			return corrupt("mini-block chunk of %d items with %d levels in %d bytes", n, numLevels, defSize)
		}
		def, err := take(defSize)
		if err != nil {
			return err
		}
		if l.defRle {
			if def, err = rleBlockLevels(def, n); err != nil {
				return err
			}
		}
		for i := uint64(0); i < n; i++ {
			switch binary.LittleEndian.Uint16(def[2*i:]) {
			case 0:
				out.Valid = append(out.Valid, true)
			case 1:
				out.Valid = append(out.Valid, false)
			default:
				return corrupt("definition level %d in a single NULLABLE_ITEM layer", binary.LittleEndian.Uint16(def[2*i:]))
			}
		}
	} else if numLevels != 0 {
		return corrupt("mini-block chunk with %d levels and no level buffers", numLevels)
	}
	vals, err := take(valSize)
	if err != nil {
		return err
	}
	if rle {
		runs, err := take(runSize)
		if err != nil {
			return err
		}
		return decodeRle(out, vals, runs, n)
	}
	if off > uint64(len(chunk)) {
		return corrupt("mini-block chunk padding outside the chunk")
	}
	if out.Kind == KindFixed {
		need := (n*out.Bits + 7) / 8
		if uint64(len(vals)) < need {
			return corrupt("Flat chunk of %d %d-bit values in %d bytes", n, out.Bits, len(vals))
		}
		have := out.Len
		out.Data = appendBits(out.Data, have, vals, n, out.Bits)
		out.Len += n
		return nil
	}
	// Variable: n+1 offsets (relative to the chunk's value buffer), then bytes.
	w := out.OffsetBits / 8
	if (n+1)*w > uint64(len(vals)) {
		return corrupt("Variable chunk of %d values: %d bytes cannot hold the offsets", n, len(vals))
	}
	get := func(i uint64) uint64 {
		if w == 4 {
			return uint64(binary.LittleEndian.Uint32(vals[i*4:]))
		}
		return binary.LittleEndian.Uint64(vals[i*8:])
	}
	prev := get(0)
	if prev < (n+1)*w || prev > uint64(len(vals)) {
		return corrupt("Variable chunk: first offset %d (offsets end at %d, buffer %d)", prev, (n+1)*w, len(vals))
	}
	base := uint64(len(out.Data))
	for i := uint64(1); i <= n; i++ {
		o := get(i)
		if o < prev || o > uint64(len(vals)) {
			return corrupt("Variable chunk: offset %d after %d (buffer %d)", o, prev, len(vals))
		}
		prev = o
	}
	first := get(0)
	out.Data = append(out.Data, vals[first:prev]...)
	for i := uint64(1); i <= n; i++ {
		out.Offsets = append(out.Offsets, base+get(i)-first)
	}
	out.Len += n
	return nil
}

// rleBlockLevels expands a 2.2 Rle block of u16 levels: a u64 byte count
// of the run values, the u16 run values, then one u8 length per run.
func rleBlockLevels(b []byte, n uint64) ([]byte, error) {
	if len(b) < 8 {
		return nil, corrupt("Rle block of %d bytes", len(b))
	}
	vb := binary.LittleEndian.Uint64(b)
	b = b[8:]
	if vb%2 != 0 || vb > uint64(len(b)) || uint64(len(b))-vb != vb/2 {
		return nil, corrupt("Rle block: %d value bytes, %d bytes follow", vb, len(b))
	}
	vals, runs := b[:vb], b[vb:]
	out := make([]byte, 0, 2*n)
	for i, r := range runs {
		if uint64(len(out))/2+uint64(r) > n {
			return nil, corrupt("Rle block runs exceed %d levels", n)
		}
		for k := byte(0); k < r; k++ {
			out = append(out, vals[2*i], vals[2*i+1])
		}
	}
	if uint64(len(out)) != 2*n {
		return nil, corrupt("Rle block holds %d levels, want %d", len(out)/2, n)
	}
	return out, nil
}

// decodeConstant decodes a 2.2 ConstantLayout page: one value for every
// valid row, inline (fixed width: 2, 4, 8 or 16 bytes; a 1-byte inline value
// is a boolean or an 8-bit integer, which the page does not say) or in
// buffer 0 (variable: u32 buffer count 2, u32 sizes, the two offsets, the
// bytes); NULLABLE_ITEM pages add a repetition buffer (empty) and u16
// definition levels.
func decodeConstant(l pageLayout, p Page) (*Values, error) {
	if p.Rows > DefaultLimits.MergeRows {
		return nil, ErrTooLarge
	}
	nullable := l.layers[0] == layerNullableItem
	bufs := p.Buffers
	var out *Values
	if l.hasInline {
		switch len(l.inline) {
		case 2, 4, 8, 16:
		case 1:
			return nil, unsupported("2.2 ConstantLayout with a 1-byte value (boolean or 8-bit integer)")
		default:
			return nil, corrupt("ConstantLayout inline value of %d bytes", len(l.inline))
		}
		out = &Values{Kind: KindFixed, Bits: 8 * uint64(len(l.inline))}
	} else {
		if len(bufs) == 0 {
			return nil, corrupt("ConstantLayout without a value")
		}
		val, err := constantVariable(bufs[0])
		if err != nil {
			return nil, err
		}
		out = val
		bufs = bufs[1:]
	}
	var valid []bool
	if nullable {
		if len(bufs) != 2 || len(bufs[0]) != 0 {
			return nil, unsupported("2.2 ConstantLayout with %d level buffers (lists)", len(bufs))
		}
		def := bufs[1]
		if uint64(len(def)) != 2*p.Rows {
			return nil, corrupt("ConstantLayout: %d bytes of levels for %d rows", len(def), p.Rows)
		}
		valid = make([]bool, p.Rows)
		for i := range valid {
			switch binary.LittleEndian.Uint16(def[2*i:]) {
			case 0:
				valid[i] = true
			case 1:
			default:
				return nil, corrupt("definition level %d in a single NULLABLE_ITEM layer", binary.LittleEndian.Uint16(def[2*i:]))
			}
		}
	} else if len(bufs) != 0 {
		return nil, corrupt("all-valid ConstantLayout with %d extra buffers", len(bufs))
	}
	if out.Kind == KindFixed {
		zero := make([]byte, len(l.inline))
		for i := uint64(0); i < p.Rows; i++ {
			if valid == nil || valid[i] {
				out.Data = append(out.Data, l.inline...)
			} else {
				out.Data = append(out.Data, zero...)
			}
		}
	} else {
		one := out.Data
		out.Data, out.Offsets = nil, []uint64{0}
		for i := uint64(0); i < p.Rows; i++ {
			if valid == nil || valid[i] {
				out.Data = append(out.Data, one...)
			}
			out.Offsets = append(out.Offsets, uint64(len(out.Data)))
		}
	}
	out.Len, out.Valid = p.Rows, valid
	return out, nil
}

// constantVariable parses a variable constant: u32 2, u32 offsets size
// (8 or 16), u32 bytes size, the offsets (0 and the length), the bytes.
func constantVariable(b []byte) (*Values, error) {
	if len(b) < 12 || binary.LittleEndian.Uint32(b) != 2 {
		return nil, corrupt("ConstantLayout value buffer of %d bytes", len(b))
	}
	offSize, dataSize := uint64(binary.LittleEndian.Uint32(b[4:])), uint64(binary.LittleEndian.Uint32(b[8:]))
	if (offSize != 8 && offSize != 16) || 12+offSize+dataSize != uint64(len(b)) {
		return nil, corrupt("ConstantLayout value: offsets %d, bytes %d in %d", offSize, dataSize, len(b))
	}
	w := offSize / 2
	var o0, o1 uint64
	if w == 4 {
		o0, o1 = uint64(binary.LittleEndian.Uint32(b[12:])), uint64(binary.LittleEndian.Uint32(b[16:]))
	} else {
		o0, o1 = binary.LittleEndian.Uint64(b[12:]), binary.LittleEndian.Uint64(b[20:])
	}
	if o0 != 0 || o1 != dataSize {
		return nil, corrupt("ConstantLayout value offsets %d, %d for %d bytes", o0, o1, dataSize)
	}
	return &Values{Kind: KindVariable, OffsetBits: 8 * w, Data: b[12+offSize:]}, nil
}

// decodeRle appends n values of a run-length chunk: run value i (Bits
// wide) repeated runs[i] times.
func decodeRle(out *Values, vals, runs []byte, n uint64) error {
	w := out.Bits / 8
	if uint64(len(runs))*w != uint64(len(vals)) {
		return corrupt("Rle chunk with %d runs and %d value bytes", len(runs), len(vals))
	}
	var total uint64
	for _, r := range runs {
		total += uint64(r)
	}
	if total != n {
		return corrupt("Rle chunk runs hold %d values, the chunk %d", total, n)
	}
	for i, r := range runs {
		v := vals[uint64(i)*w : uint64(i+1)*w]
		for k := byte(0); k < r; k++ {
			out.Data = append(out.Data, v...)
		}
	}
	out.Len += n
	return nil
}

// decodeFullZip decodes a full-zip page of variable values: per item a
// control word (when there are definition levels), then, for a valid item,
// its length (4 or 8 bytes) and bytes. Buffer 1 is the repetition index, one
// byte-packed offset per row and one past the end.
func decodeFullZip(l pageLayout, p Page) (*Values, error) {
	if len(p.Buffers) != 2 {
		return nil, corrupt("full-zip page with %d buffers, want 2", len(p.Buffers))
	}
	if l.numItems != p.Rows {
		return nil, corrupt("full-zip page of %d rows with %d items", p.Rows, l.numItems)
	}
	data, rep := p.Buffers[0], p.Buffers[1]
	cw := controlWordBytes(l.bitsDef)
	lw := l.bitsPerOffset / 8
	// every item takes at least max(cw, 1) bytes... or lw if valid; bound n
	if p.Rows > uint64(len(data)) && !(cw == 0 && lw == 0) {
		return nil, corrupt("full-zip page of %d rows in %d bytes", p.Rows, len(data))
	}
	idxW, err := repIndexWidth(uint64(len(rep)), p.Rows)
	if err != nil {
		return nil, err
	}
	out := &Values{Kind: KindVariable, OffsetBits: l.bitsPerOffset, Offsets: []uint64{0}}
	if cw > 0 {
		out.Valid = []bool{}
	}
	mask := uint64(1)<<l.bitsDef - 1
	var pos uint64
	for i := uint64(0); i < p.Rows; i++ {
		if got := readPacked(rep, i, idxW); got != pos {
			return nil, corrupt("full-zip repetition index says row %d at %d, it is at %d", i, got, pos)
		}
		valid := true
		if cw > 0 {
			if cw > uint64(len(data))-pos {
				return nil, corrupt("full-zip control word outside the data buffer")
			}
			var word uint64
			for k := uint64(0); k < cw; k++ {
				word |= uint64(data[pos+k]) << (8 * k)
			}
			pos += cw
			switch word & mask {
			case 0:
			case 1:
				valid = false
			default:
				return nil, corrupt("definition level %d in a single NULLABLE_ITEM layer", word&mask)
			}
			if word&^mask != 0 {
				return nil, corrupt("full-zip control word %#x has bits above the definition level", word)
			}
			out.Valid = append(out.Valid, valid)
		}
		if valid {
			if lw > uint64(len(data))-pos {
				return nil, corrupt("full-zip value length outside the data buffer")
			}
			var n uint64
			if lw == 4 {
				n = uint64(binary.LittleEndian.Uint32(data[pos:]))
			} else {
				n = binary.LittleEndian.Uint64(data[pos:])
			}
			pos += lw
			if n > uint64(len(data))-pos {
				return nil, corrupt("full-zip value of %d bytes outside the data buffer", n)
			}
			out.Data = append(out.Data, data[pos:pos+n]...)
			pos += n
		}
		out.Offsets = append(out.Offsets, uint64(len(out.Data)))
	}
	if pos != uint64(len(data)) {
		return nil, corrupt("full-zip data buffer of %d bytes, items end at %d", len(data), pos)
	}
	if got := readPacked(rep, p.Rows, idxW); got != pos {
		return nil, corrupt("full-zip repetition index ends at %d, data at %d", got, pos)
	}
	out.Len = p.Rows
	return out, nil
}

func controlWordBytes(bitsDef uint64) uint64 {
	switch {
	case bitsDef == 0:
		return 0
	case bitsDef <= 8:
		return 1
	case bitsDef <= 16:
		return 2
	}
	return 4
}

func repIndexWidth(size, rows uint64) (uint64, error) {
	if rows+1 == 0 || size%(rows+1) != 0 {
		return 0, corrupt("full-zip repetition index of %d bytes for %d rows", size, rows)
	}
	w := size / (rows + 1)
	switch w {
	case 1, 2, 4, 8:
		return w, nil
	}
	return 0, corrupt("full-zip repetition index of %d bytes per entry", w)
}

func readPacked(b []byte, i, w uint64) uint64 {
	switch w {
	case 1:
		return uint64(b[i])
	case 2:
		return uint64(binary.LittleEndian.Uint16(b[2*i:]))
	case 4:
		return uint64(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return binary.LittleEndian.Uint64(b[8*i:])
}
