package lancefile

import (
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// The seeds are data files LanceDB 0.31 wrote (format 2.1): one row, two
// rows, twenty rows (id double, name string, val double).
func seed(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var seeds = []string{"one-row.lance", "two-rows.lance", "twenty-rows.lance"}

func TestParseLanceDBFiles(t *testing.T) {
	for _, name := range seeds {
		f, err := Parse(name, seed(t, name))
		if err != nil {
			t.Fatal(err)
		}
		if f.Major != 2 || f.Minor != 1 || f.NumColumns != 3 || f.NumGlobalBuffers != 1 {
			t.Fatalf("%s: %+v", name, f)
		}
		if err := Spliceable(name, f); err != nil {
			t.Fatal(err)
		}
		for i, c := range f.Columns {
			if len(c.Pages) != 1 || c.Pages[0].Layout != LayoutMiniBlock || c.Pages[0].Length != f.Rows {
				t.Fatalf("%s column %d: %+v", name, i, c)
			}
		}
	}
}

// TestSplice splices the three seeds and checks the result parses back
// with the same pages, at 64-byte aligned offsets, with their buffers
// byte for byte, priorities rebased and the descriptor's length summed.
func TestSplice(t *testing.T) {
	var files []*File
	for _, name := range seeds {
		f, err := Parse(name, seed(t, name))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	res, err := Splice(seeds, files)
	if err != nil {
		t.Fatal(err)
	}
	if res.Rows != 23 || res.Pages != 9 {
		t.Fatalf("rows %d pages %d", res.Rows, res.Pages)
	}
	g, err := Parse("spliced", res.Data)
	if err != nil {
		t.Fatal(err)
	}
	if err := Spliceable("spliced", g); err != nil {
		t.Fatal(err)
	}
	if g.Rows != 23 || string(g.Schema) != string(files[0].Schema) || g.Global[0].Offset%Alignment != 0 {
		t.Fatalf("spliced: rows %d, fd at %d", g.Rows, g.Global[0].Offset)
	}
	for c := range g.Columns {
		k, base := 0, uint64(0)
		for _, f := range files {
			for _, p := range f.Columns[c].Pages {
				q := g.Columns[c].Pages[k]
				if q.Priority != base+p.Priority || q.Length != p.Length || string(q.Encoding) != string(p.Encoding) {
					t.Fatalf("column %d page %d: %+v, from %+v", c, k, q, p)
				}
				for i, b := range p.Buffers {
					nb := q.Buffers[i]
					if nb.Offset%Alignment != 0 || string(g.data[nb.Offset:nb.Offset+nb.Size]) != string(f.data[b.Offset:b.Offset+b.Size]) {
						t.Fatalf("column %d page %d buffer %d differs", c, k, i)
					}
				}
				k++
			}
			base += f.Rows
		}
	}
	// A spliced file splices again.
	if _, err := Splice([]string{"a", "b"}, []*File{g, files[0]}); err != nil {
		t.Fatal(err)
	}
}

func TestSpliceRefuses(t *testing.T) {
	one, _ := Parse("one", seed(t, "one-row.lance"))
	two, _ := Parse("two", seed(t, "two-rows.lance"))
	// Different schema bytes.
	other := *two
	other.Schema = append([]byte{}, two.Schema...)
	other.Schema[len(other.Schema)-1] ^= 1
	if _, err := Splice([]string{"one", "other"}, []*File{one, &other}); !errors.Is(err, ErrMismatch) {
		t.Fatalf("schema: %v", err)
	}
	v22 := *two
	v22.Minor = 2
	if _, err := Splice([]string{"one", "v22"}, []*File{one, &v22}); !errors.Is(err, ErrMismatch) {
		t.Fatalf("version: %v", err)
	}
	colbuf := *two
	colbuf.Columns = append([]Column{}, two.Columns...)
	colbuf.Columns[1].Buffers = []Buffer{{0, 1}}
	if err := Spliceable("colbuf", &colbuf); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("column buffers: %v", err)
	}
	blob := *two
	blob.Columns = append([]Column{}, two.Columns...)
	blob.Columns[0].Pages = []Page{{Length: 2, TypeURL: TypePageLayout, Layout: LayoutBlob}}
	if err := Spliceable("blob", &blob); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("blob: %v", err)
	}
	gb := *two
	gb.NumGlobalBuffers = 2
	if err := Spliceable("gb", &gb); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("global buffers: %v", err)
	}
	// 2.1 pages in a file that says 2.0, and a version no one wrote.
	v20 := *two
	v20.Major, v20.Minor = 0, 3
	if err := Spliceable("v20", &v20); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("2.0: %v", err)
	}
	v23 := *two
	v23.Minor = 3
	if err := Spliceable("v23", &v23); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("2.3: %v", err)
	}
}

// TestParseCorrupt: truncations, footer fields at the integer limits and
// offsets pointing outside the file are ErrCorrupt or ErrUnsupported,
// never a panic.
func TestParseCorrupt(t *testing.T) {
	b := seed(t, "two-rows.lance")
	for n := 0; n < len(b); n++ {
		if _, err := Parse("trunc", b[:n]); err == nil {
			t.Fatalf("truncated to %d parses", n)
		}
	}
	for _, off := range []int{0, 8, 16, 24, 28} {
		for _, v := range []uint64{0, 1, math.MaxUint32, math.MaxInt64, math.MaxUint64} {
			c := append([]byte{}, b...)
			p := c[len(c)-FooterLen+off:]
			if off >= 24 {
				binary.LittleEndian.PutUint32(p, uint32(v))
			} else {
				binary.LittleEndian.PutUint64(p, v)
			}
			if _, err := Parse("mut", c); err != nil && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnsupported) {
				t.Fatalf("footer+%d=%d: untyped error %v", off, v, err)
			}
		}
	}
	// The global-buffer table's entry for the descriptor at the limits.
	f, _ := Parse("two", b)
	for _, v := range []uint64{math.MaxUint64, math.MaxInt64, f.ColumnMetaStart} {
		c := append([]byte{}, b...)
		binary.LittleEndian.PutUint64(c[f.GBOStart+8:], v)
		if _, err := Parse("gbo", c); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("gbo size %d: %v", v, err)
		}
	}
}
