package lancefile

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/tablekeep/tablekeep/shared/lance/lanceenc"
)

// columnValues decodes column c of f, every page, into one row list
// (fixed values as bytes, strings as bytes, nulls as nil).
func columnValues(t *testing.T, f *File, c int) [][]byte {
	t.Helper()
	ma, mi := f.Version()
	var rows [][]byte
	for k, p := range f.Columns[c].Pages {
		anyb, ok := directEncoding(p.Encoding)
		if !ok {
			t.Fatalf("column %d page %d: no direct encoding", c, k)
		}
		bufs := make([][]byte, len(p.Buffers))
		for i, b := range p.Buffers {
			bufs[i] = f.data[b.Offset : b.Offset+b.Size]
		}
		v, err := lanceenc.Decode(lanceenc.Version{Major: ma, Minor: mi}, lanceenc.Page{Rows: p.Length, Buffers: bufs, Encoding: anyb})
		if err != nil {
			t.Fatalf("column %d page %d: %v", c, k, err)
		}
		for r := uint64(0); r < v.Len; r++ {
			switch {
			case v.Kind == lanceenc.KindNull || (v.Valid != nil && !v.Valid[r]):
				rows = append(rows, nil)
			case v.Kind == lanceenc.KindFixed:
				w := v.Bits / 8
				rows = append(rows, v.Data[r*w:(r+1)*w])
			default:
				rows = append(rows, v.Data[v.Offsets[r]:v.Offsets[r+1]])
			}
		}
	}
	return rows
}

// TestSpliceMergesPages: 200 one-row LanceDB files (and the seeds of 1, 2
// and 20 rows) spliced with MergePages make one page per column, at
// 64-byte aligned offsets, priority 0, that decode to exactly the rows of
// the inputs in order; the file parses, is spliceable and splices again.
func TestSpliceMergesPages(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files []string
		rows  uint64
	}{
		{"seeds", seeds, 23},
		{"200 one-row files", repeat("one-row.lance", 200), 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := make([]*File, len(tc.files))
			for i, n := range tc.files {
				f, err := Parse(n, seed(t, n))
				if err != nil {
					t.Fatal(err)
				}
				files[i] = f
			}
			res, err := SpliceWith(tc.files, files, SpliceOptions{MergePages: true})
			if err != nil {
				t.Fatal(err)
			}
			if res.Rows != tc.rows || res.Pages != 3 || res.PagesIn != 3*len(files) || res.MergedColumns != 3 || len(res.Unmerged) != 0 {
				t.Fatalf("rows %d, pages %d of %d, merged %d, unmerged %v", res.Rows, res.Pages, res.PagesIn, res.MergedColumns, res.Unmerged)
			}
			g, err := Parse("merged", res.Data)
			if err != nil {
				t.Fatal(err)
			}
			if err := Spliceable("merged", g); err != nil {
				t.Fatal(err)
			}
			copied, err := Splice(tc.files, files)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Data) >= len(copied.Data) {
				t.Fatalf("merged file %d B, copied %d B", len(res.Data), len(copied.Data))
			}
			plain, _ := Parse("copied", copied.Data)
			for c := range g.Columns {
				p := g.Columns[c].Pages
				if len(p) != 1 || p[0].Length != tc.rows || p[0].Priority != 0 {
					t.Fatalf("column %d: %+v", c, p)
				}
				for _, b := range p[0].Buffers {
					if b.Offset%Alignment != 0 {
						t.Fatalf("column %d buffer at %d", c, b.Offset)
					}
				}
				got, want := columnValues(t, g, c), columnValues(t, plain, c)
				if len(got) != len(want) {
					t.Fatalf("column %d: %d rows, want %d", c, len(got), len(want))
				}
				for r := range got {
					if !bytes.Equal(got[r], want[r]) || (got[r] == nil) != (want[r] == nil) {
						t.Fatalf("column %d row %d: %q, want %q", c, r, got[r], want[r])
					}
				}
			}
			if _, err := SpliceWith([]string{"a", "b"}, []*File{g, files[0]}, SpliceOptions{MergePages: true}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// TestSpliceMergeFallsBack: a column whose page lanceenc finds corrupt
// (the container is fine) is copied byte for byte, and says why; the other
// columns merge. A column over the merge budget is copied too.
func TestSpliceMergeFallsBack(t *testing.T) {
	one, _ := Parse("one", seed(t, "one-row.lance"))
	// Damage column 1's chunk metadata (buffer 0 of its page) in a copy of
	// the two-row file: a chunk size that does not match the chunk buffer.
	b := append([]byte{}, seed(t, "two-rows.lance")...)
	two, _ := Parse("two", b)
	meta := two.Columns[1].Pages[0].Buffers[0]
	b[meta.Offset] ^= 0xF0
	two, err := Parse("two", b)
	if err != nil {
		t.Fatal(err)
	}
	res, err := SpliceWith([]string{"one", "two"}, []*File{one, two}, SpliceOptions{MergePages: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.MergedColumns != 2 || len(res.Unmerged) != 1 || !strings.HasPrefix(res.Unmerged[0], "column 1:") || res.Pages != 4 {
		t.Fatalf("merged %d, unmerged %v, pages %d", res.MergedColumns, res.Unmerged, res.Pages)
	}
	g, err := Parse("spliced", res.Data)
	if err != nil {
		t.Fatal(err)
	}
	for k, f := range []*File{one, two} {
		p, q := f.Columns[1].Pages[0], g.Columns[1].Pages[k]
		for i, pb := range p.Buffers {
			qb := q.Buffers[i]
			if !bytes.Equal(f.data[pb.Offset:pb.Offset+pb.Size], g.data[qb.Offset:qb.Offset+qb.Size]) || !bytes.Equal(p.Encoding, q.Encoding) {
				t.Fatalf("copied page %d differs", k)
			}
		}
		if q.Priority != uint64(k) {
			t.Fatalf("copied page %d priority %d", k, q.Priority)
		}
	}
	// Over the budget: copied.
	files := []*File{one, one, one}
	if _, _, why := mergePages(files, 0, lanceenc.DefaultLimits, 10); !strings.Contains(why, "budget") {
		t.Fatalf("budget 10: %q", why)
	}
	if _, est, why := mergePages(files, 0, lanceenc.DefaultLimits, 1<<20); why != "" || est == 0 {
		t.Fatalf("budget 1 MiB: %q (est %d)", why, est)
	}
}

// TestSpliceDrop: SpliceOptions.Drop leaves out exactly those rows of the
// concatenated files, in every column, the kept rows in order (the
// descriptor's length is theirs); dropping a row past the rows is
// ErrUnfilterable (a page lanceenc cannot decode: TestCompactDropFallback).
func TestSpliceDrop(t *testing.T) {
	names := append(repeat("twenty-rows.lance", 3), seeds...)
	files := make([]*File, len(names))
	for i, n := range names {
		f, err := Parse(n, seed(t, n))
		if err != nil {
			t.Fatal(err)
		}
		files[i] = f
	}
	plainRes, err := Splice(names, files)
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := Parse("copied", plainRes.Data)
	drop := roaring.New()
	for r := uint64(0); r < plainRes.Rows; r++ {
		if r%3 == 1 || r == 0 || r == plainRes.Rows-1 || (r >= 20 && r < 40) {
			drop.Add(uint32(r))
		}
	}
	res, err := SpliceWith(names, files, SpliceOptions{MergePages: true, Drop: drop})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rows != plainRes.Rows-drop.GetCardinality() {
		t.Fatalf("rows %d, want %d", res.Rows, plainRes.Rows-drop.GetCardinality())
	}
	g, err := Parse("dropped", res.Data)
	if err != nil {
		t.Fatal(err)
	}
	if g.Rows != res.Rows {
		t.Fatalf("descriptor says %d rows, want %d", g.Rows, res.Rows)
	}
	for c := range g.Columns {
		all := columnValues(t, plain, c)
		var want [][]byte
		for r := range all {
			if !drop.Contains(uint32(r)) {
				want = append(want, all[r])
			}
		}
		got := columnValues(t, g, c)
		if len(got) != len(want) {
			t.Fatalf("column %d: %d rows, want %d", c, len(got), len(want))
		}
		for r := range got {
			if !bytes.Equal(got[r], want[r]) || (got[r] == nil) != (want[r] == nil) {
				t.Fatalf("column %d row %d: %q, want %q", c, r, got[r], want[r])
			}
		}
	}
	past := roaring.BitmapOf(uint32(plainRes.Rows))
	if _, err := SpliceWith(names, files, SpliceOptions{MergePages: true, Drop: past}); !errors.Is(err, ErrUnfilterable) {
		t.Fatalf("a row past the rows: %v, want ErrUnfilterable", err)
	}
}
