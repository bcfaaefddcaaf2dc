package lanceenc

import (
	"math/rand"
	"testing"
)

// fuzzPage builds a page from fuzz input: rows, encoding and up to three
// buffers, each prefixed by a 2-byte length.
func fuzzPage(rows uint64, enc, data []byte) Page {
	p := Page{Rows: rows % (1 << 20), Encoding: enc}
	for len(data) >= 2 && len(p.Buffers) < 3 {
		n := int(data[0]) | int(data[1])<<8
		data = data[2:]
		if n > len(data) {
			n = len(data)
		}
		p.Buffers = append(p.Buffers, data[:n])
		data = data[n:]
	}
	return p
}

func packBuffers(bufs [][]byte) []byte {
	var out []byte
	for _, b := range bufs {
		out = append(out, byte(len(b)), byte(len(b)>>8))
		out = append(out, b...)
	}
	return out
}

// FuzzDecodeMerge: Decode, Merge and Filter of arbitrary pages never panic
// and fail only with typed errors.
func FuzzDecodeMerge(f *testing.F) {
	r := rand.New(rand.NewSource(4))
	for _, ver := range []Version{V2_1, V2_0, V2_2} {
		for _, ct := range colTypes {
			for _, n := range []int{1, 7, 600} {
				p, err := encodePage(ver, randomValues(r, ct, n, 0.3, 300))
				if err != nil {
					f.Fatal(err)
				}
				if len(packBuffers(p.Buffers)) < 60000 {
					f.Add(p.Rows, p.Encoding, packBuffers(p.Buffers), uint8(ver.Minor))
				}
			}
		}
	}
	rp := rlePage([]uint64{1, 1, 1, 2, 3, 3})
	f.Add(rp.Rows, rp.Encoding, packBuffers(rp.Buffers), uint8(1))
	f.Fuzz(func(t *testing.T, rows uint64, enc, data []byte, minor uint8) {
		v := Version{2, uint32(minor % 3)}
		p := fuzzPage(rows, enc, data)
		d, err := Decode(v, p)
		if err == nil && d.Len != p.Rows {
			t.Fatalf("a page of %d rows decodes to %d", p.Rows, d.Len)
		}
		lim := Limits{PageBytes: 1 << 16, PageRows: 1 << 12, MergeRows: 1 << 21}
		if _, err := MergeLimits(v, []Page{p, p}, lim); err == nil {
			// fine
		}
		_, _ = Filter(v, p, func(i uint64) bool { return i%3 != 1 })
	})
}
