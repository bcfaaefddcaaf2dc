package lanceenc

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"testing"
)

// row is a canonical form of one decoded row: nil for null.
func rowsOf(t testing.TB, v *Values) [][]byte {
	t.Helper()
	out := make([][]byte, v.Len)
	for i := uint64(0); i < v.Len; i++ {
		switch {
		case v.IsNull(i):
		case v.Kind == KindFixed && v.Bits == 1:
			out[i] = []byte{byte(v.Uint64(i)) + 1}
		default:
			out[i] = append([]byte{1}, v.Bytes(i)...)
		}
	}
	return out
}

type colType struct {
	kind       Kind
	bits       uint64
	offsetBits uint64
}

func randomValues(r *rand.Rand, ct colType, n int, nullRate float64, maxLen int) *Values {
	v := &Values{Kind: ct.kind, Bits: ct.bits, OffsetBits: ct.offsetBits}
	if ct.kind == KindVariable {
		v.Offsets = []uint64{0}
	}
	if r.Float64() < 0.2 {
		// an all-null page (AllNullLayout)
		return &Values{Kind: KindNull, Len: uint64(n)}
	}
	for i := 0; i < n; i++ {
		null := r.Float64() < nullRate
		src := &Values{Kind: ct.kind, Bits: ct.bits, OffsetBits: ct.offsetBits, Len: 1}
		if null {
			src.Valid = []bool{false}
		}
		switch ct.kind {
		case KindFixed:
			src.Data = make([]byte, (ct.bits+7)/8)
			if !null {
				r.Read(src.Data)
				if ct.bits == 1 {
					src.Data[0] &= 1
				}
			}
		case KindVariable:
			var b []byte
			if !null {
				b = make([]byte, r.Intn(maxLen+1))
				r.Read(b)
			}
			src.Data, src.Offsets = b, []uint64{0, uint64(len(b))}
		}
		if err := appendValues(v, src); err != nil {
			panic(err)
		}
	}
	return v
}

var colTypes = []colType{
	{KindFixed, 1, 0}, {KindFixed, 8, 0}, {KindFixed, 16, 0}, {KindFixed, 32, 0}, {KindFixed, 64, 0}, {KindFixed, 128, 0},
	{KindVariable, 0, 32}, {KindVariable, 0, 64},
}

// TestMergeRandom: pages of random rows (every supported type, nulls,
// all-null pages, short and long strings) merged under random limits decode
// to the concatenation of the inputs, and every output page is within the
// limits.
func TestMergeRandom(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for iter := 0; iter < 300; iter++ {
		ver := []Version{V2_1, V2_0, V2_2}[iter%3]
		ct := colTypes[r.Intn(len(colTypes))]
		maxLen := []int{0, 5, 40, 300, 700}[r.Intn(5)]
		nullRate := []float64{0, 0, 0.1, 0.5, 1}[r.Intn(5)]
		var pages []Page
		var want [][]byte
		for p, np := 0, 1+r.Intn(30); p < np; p++ {
			n := 1 + r.Intn([]int{1, 3, 50, 700, 5000}[r.Intn(5)])
			v := randomValues(r, ct, n, nullRate, maxLen)
			page, err := encodePage(ver, v)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Decode(ver, page)
			if err != nil {
				t.Fatalf("iter %d: decode a %s page: %v", iter, v.describe(), err)
			}
			if !equalRows(rowsOf(t, got), rowsOf(t, v)) {
				t.Fatalf("iter %d: a %s page does not round-trip", iter, v.describe())
			}
			pages = append(pages, page)
			want = append(want, rowsOf(t, v)...)
		}
		lim := Limits{PageBytes: uint64(1 + r.Intn(200000)), PageRows: uint64(1 + r.Intn(20000)), MergeRows: 1 << 24}
		merged, err := MergeLimits(ver, pages, lim)
		if err != nil {
			t.Fatalf("iter %d (%+v): %v", iter, ct, err)
		}
		var got [][]byte
		for _, p := range merged {
			if p.Rows > lim.PageRows {
				t.Fatalf("iter %d: page of %d rows, limit %d", iter, p.Rows, lim.PageRows)
			}
			v, err := Decode(ver, p)
			if err != nil {
				t.Fatalf("iter %d: merged page %s: %v", iter, Describe(ver, p), err)
			}
			got = append(got, rowsOf(t, v)...)
		}
		if !equalRows(got, want) {
			t.Fatalf("iter %d (%+v): merged rows differ", iter, ct)
		}
		if len(merged) > len(pages) && lim.PageRows > 5000 && lim.PageBytes > 1<<17 {
			t.Logf("iter %d: %d pages became %d", iter, len(pages), len(merged))
		}
	}
}

func equalRows(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if (a[i] == nil) != (b[i] == nil) || !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// TestMergeRefuses: pages of another type, unsupported encodings and
// versions give typed errors; nothing is merged.
func TestMergeRefuses(t *testing.T) {
	a, _ := encodePage21(&Values{Kind: KindFixed, Bits: 64, Len: 1, Data: make([]byte, 8)})
	b, _ := encodePage21(&Values{Kind: KindFixed, Bits: 32, Len: 1, Data: make([]byte, 4)})
	if _, err := Merge(V2_1, []Page{a, b}); !errors.Is(err, ErrUnsupported) {
		t.Errorf("64-bit and 32-bit pages: %v", err)
	}
	if _, err := Merge(Version{3, 0}, []Page{a}); !errors.Is(err, ErrUnsupported) {
		t.Errorf("version 3.0: %v", err)
	}
	// InlineBitpacking (field 5) in a mini-block layout
	var inner []byte
	inner = appendBytesField(inner, 3, appendBytesField(nil, 5, appendVarintField(nil, 1, 64)))
	inner = appendLayers(inner, 6, layerAllValidItem)
	inner = appendVarintField(inner, 7, 1)
	inner = appendVarintField(inner, 9, 1)
	bp := Page{Rows: 1, Buffers: a.Buffers, Encoding: appendAny(nil, typeURLPageLayout21, appendBytesField(nil, 1, inner))}
	_, err := Merge(V2_1, []Page{a, bp})
	var u *UnsupportedError
	if !errors.As(err, &u) || u.Encoding != "2.1 InlineBitpacking" {
		t.Errorf("bitpacked page: %v", err)
	}
	big := Page{Rows: 1 << 30, Encoding: appendPageLayout(nil, pageLayout{kind: layoutAllNull, layers: []uint64{layerNullableItem}})}
	if _, err := Merge(V2_1, []Page{big}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("2^30 all-null rows: %v", err)
	}
}

// TestFilter drops rows and keeps the rest in order, for every type.
func TestFilter(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	for iter := 0; iter < 100; iter++ {
		ver := []Version{V2_1, V2_0, V2_2}[iter%3]
		ct := colTypes[r.Intn(len(colTypes))]
		v := randomValues(r, ct, 1+r.Intn(3000), 0.2, 300)
		p, err := encodePage(ver, v)
		if err != nil {
			t.Fatal(err)
		}
		rows := rowsOf(t, v)
		mod := 1 + r.Intn(5)
		keep := func(i uint64) bool { return i%uint64(mod) != 0 }
		var want [][]byte
		for i, row := range rows {
			if keep(uint64(i)) {
				want = append(want, row)
			}
		}
		fp, err := Filter(ver, p, keep)
		if err != nil {
			t.Fatal(err)
		}
		if fp.Rows != uint64(len(want)) {
			t.Fatalf("iter %d: %d rows kept, want %d", iter, fp.Rows, len(want))
		}
		if fp.Rows == 0 {
			continue
		}
		got, err := Decode(ver, fp)
		if err != nil {
			t.Fatal(err)
		}
		if !equalRows(rowsOf(t, got), want) {
			t.Fatalf("iter %d (%+v): filtered rows differ", iter, ct)
		}
	}
}

// TestDecodeCorrupt: truncated and altered pages give typed errors.
func TestDecodeCorrupt(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	for iter := 0; iter < 2000; iter++ {
		ver := []Version{V2_1, V2_0, V2_2}[iter%3]
		ct := colTypes[r.Intn(len(colTypes))]
		p, err := encodePage(ver, randomValues(r, ct, 1+r.Intn(600), 0.3, 300))
		if err != nil {
			t.Fatal(err)
		}
		mutate(r, &p)
		_, err = Decode(ver, p)
		if err != nil && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnsupported) {
			t.Fatalf("iter %d: untyped error %v", iter, err)
		}
	}
}

func mutate(r *rand.Rand, p *Page) {
	switch r.Intn(5) {
	case 0:
		p.Rows = uint64(r.Int63n(1 << 40))
	case 1:
		if len(p.Buffers) > 0 {
			i := r.Intn(len(p.Buffers))
			b := p.Buffers[i]
			p.Buffers[i] = b[:r.Intn(len(b)+1)]
		}
	case 2:
		if len(p.Buffers) > 0 {
			b := append([]byte(nil), p.Buffers[r.Intn(len(p.Buffers))]...)
			if len(b) > 0 {
				b[r.Intn(len(b))] ^= byte(1 + r.Intn(255))
			}
			p.Buffers[0] = b
		}
	case 3:
		e := append([]byte(nil), p.Encoding...)
		e[r.Intn(len(e))] ^= byte(1 + r.Intn(255))
		p.Encoding = e
	case 4:
		p.Buffers = append(p.Buffers, []byte(fmt.Sprint(r.Int())))
	}
}

// rlePage builds a one-chunk mini-block Rle page of 64-bit values (no
// nulls) as Lance lays it out: run values, then u8 run lengths.
func rlePage(vals []uint64) Page {
	var runVals, runs []byte
	for i := 0; i < len(vals); {
		j := i
		for j < len(vals) && vals[j] == vals[i] && j-i < 255 {
			j++
		}
		var b [8]byte
		for k := 0; k < 8; k++ {
			b[k] = byte(vals[i] >> (8 * k))
		}
		runVals = append(runVals, b[:]...)
		runs = append(runs, byte(j-i))
		i = j
	}
	var data []byte
	data = append(data, 0, 0, byte(len(runVals)), byte(len(runVals)>>8), byte(len(runs)), byte(len(runs)>>8))
	data = fill8(data)
	data = fill8(append(data, runVals...))
	data = fill8(append(data, runs...))
	meta := []byte{byte((len(data)/8 - 1) << 4), byte((len(data)/8 - 1) >> 4)}
	var inner []byte
	rle := appendBytesField(nil, 1, appendFlat(nil, 64))
	rle = appendBytesField(rle, 2, appendFlat(nil, 8))
	inner = appendBytesField(inner, 3, appendBytesField(nil, 8, rle))
	inner = appendLayers(inner, 6, layerAllValidItem)
	inner = appendVarintField(inner, 7, 2)
	inner = appendVarintField(inner, 9, uint64(len(vals)))
	return Page{Rows: uint64(len(vals)), Buffers: [][]byte{meta, data}, Encoding: appendAny(nil, typeURLPageLayout21, appendBytesField(nil, 1, inner))}
}

// TestRleDecode: mini-block Rle pages (Lance writes them for small pages of
// repeated values) decode, merge into Flat pages, and corrupt runs are
// typed errors.
func TestRleDecode(t *testing.T) {
	r := rand.New(rand.NewSource(5))
	var want []uint64
	var pages []Page
	for p := 0; p < 10; p++ {
		var vals []uint64
		for i, n := 0, 1+r.Intn(1000); i < n; i++ {
			if i == 0 || r.Intn(4) == 0 {
				vals = append(vals, r.Uint64())
			} else {
				vals = append(vals, vals[i-1])
			}
		}
		page := rlePage(vals)
		got, err := Decode(V2_1, page)
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range vals {
			if got.Uint64(uint64(i)) != v {
				t.Fatalf("page %d row %d: %d, want %d", p, i, got.Uint64(uint64(i)), v)
			}
		}
		want = append(want, vals...)
		pages = append(pages, page)
	}
	merged, err := Merge(V2_1, pages)
	if err != nil {
		t.Fatal(err)
	}
	var i uint64
	for _, p := range merged {
		v, err := Decode(V2_1, p)
		if err != nil {
			t.Fatal(err)
		}
		if d := Describe(V2_1, p); d != "MiniBlock Flat(64) ALL_VALID_ITEM" {
			t.Errorf("merged page %s", d)
		}
		for k := uint64(0); k < v.Len; k++ {
			if v.Uint64(k) != want[i] {
				t.Fatalf("merged row %d differs", i)
			}
			i++
		}
	}
	bad := rlePage([]uint64{1, 1, 2})
	bad.Rows = 4
	if _, err := Decode(V2_1, bad); !errors.Is(err, ErrCorrupt) {
		t.Errorf("runs short of the rows: %v", err)
	}
}

// TestFullZipIndexWidthPerPage: a full-zip page cut from larger values
// sizes its repetition index by its own bytes, as Lance does (2 bytes an
// entry for a page of a few hundred bytes, whatever came before it).
func TestFullZipIndexWidthPerPage(t *testing.T) {
	v := &Values{Kind: KindVariable, OffsetBits: 32, Offsets: []uint64{0}}
	for i := 0; i < 400; i++ {
		src := &Values{Kind: KindVariable, OffsetBits: 32, Len: 1, Data: bytes.Repeat([]byte{'x'}, 300), Offsets: []uint64{0, 300}}
		if err := appendValues(v, src); err != nil {
			t.Fatal(err)
		}
	}
	p, err := encodePage21(v.slice(399, 400))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Buffers[1]) != 4 {
		t.Fatalf("index of %d bytes for one 300-byte row, want 2 entries of 2 bytes", len(p.Buffers[1]))
	}
}

// TestMergeRuns: undecodable pages stay in place byte for byte, the runs
// between them are merged, the rows keep their order.
func TestMergeRuns(t *testing.T) {
	one := func(x uint64) Page {
		p, err := encodePage21(&Values{Kind: KindFixed, Bits: 64, Len: 1, Data: []byte{byte(x), 0, 0, 0, 0, 0, 0, 0}})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	// an InlineBitpacking page (not decoded) of 3 rows
	var inner []byte
	inner = appendBytesField(inner, 3, appendBytesField(nil, 5, appendVarintField(nil, 1, 64)))
	inner = appendLayers(inner, 6, layerAllValidItem)
	inner = appendVarintField(inner, 7, 1)
	inner = appendVarintField(inner, 9, 3)
	bp := Page{Rows: 3, Buffers: [][]byte{{0x10, 0}, make([]byte, 16)}, Encoding: appendAny(nil, typeURLPageLayout21, appendBytesField(nil, 1, inner))}
	var in []Page
	for i := 0; i < 5; i++ {
		in = append(in, one(uint64(i)))
	}
	in = append(in, bp)
	for i := 5; i < 25; i++ {
		in = append(in, one(uint64(i)))
	}
	in = append(in, bp, bp)
	lim := DefaultLimits
	lim.MergeRows = 8 // runs cut at 8 rows
	out, kept, err := MergeRuns(V2_1, in, lim)
	if err != nil {
		t.Fatal(err)
	}
	var shape []string
	var next uint64
	for i, p := range out {
		if kept[i] {
			if !bytes.Equal(p.Encoding, bp.Encoding) {
				t.Fatalf("page %d kept but changed", i)
			}
			shape = append(shape, "kept")
			continue
		}
		v, err := Decode(V2_1, p)
		if err != nil {
			t.Fatal(err)
		}
		for k := uint64(0); k < v.Len; k++ {
			if v.Uint64(k) != next {
				t.Fatalf("row %d reads %d", next, v.Uint64(k))
			}
			next++
		}
		shape = append(shape, fmt.Sprint(p.Rows))
	}
	if got := fmt.Sprint(shape); got != "[5 kept 8 8 4 kept kept]" || next != 25 {
		t.Fatalf("pages %s, %d rows", got, next)
	}
}
