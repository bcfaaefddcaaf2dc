package lancefile

import (
	"bytes"
	"errors"
	"testing"
)

// struct20 are data files LanceDB 0.31 wrote for a 2.0 table (id Int64, v
// Struct<a Int32, b Utf8>, nulls among them): rows 0-2 and 3-4 in two
// adds, and rows 0-4 in one (the fixture's matrix rows of "struct").
var struct20 = []string{"struct20-three.lance", "struct20-two.lance", "struct20-five.lance"}

func expectOf(f *File) Expect {
	return Expect{Rows: f.Rows, Major: f.Major, Minor: f.Minor, Schema: f.Schema}
}

// TestSpliceStructHeader20: the two 2.0 struct files spliced (pages
// copied or merged) make a file whose struct header column is one page,
// and the file is byte for byte the one LanceDB wrote for the same five
// rows in one add. Before the fix its header column had 2 pages (a 2.0
// reader refuses it: "we only support struct columns with 1 page").
func TestSpliceStructHeader20(t *testing.T) {
	var files []*File
	for _, n := range struct20[:2] {
		f, err := Parse(n, seed(t, n))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	five := seed(t, struct20[2])
	for _, merge := range []bool{false, true} {
		res, err := SpliceWith(struct20[:2], files, SpliceOptions{MergePages: merge})
		if err != nil {
			t.Fatal(err)
		}
		g, err := Parse("spliced", res.Data)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(g.Columns[1].Pages); n != 1 || g.Columns[1].Pages[0].Length != 5 {
			t.Fatalf("merge %v: struct header column: %d pages %+v", merge, n, g.Columns[1].Pages)
		}
		if err := Validate("spliced", res.Data, expectOf(files[0])); !errors.Is(err, ErrUnreadable) {
			t.Fatalf("merge %v: 5 rows validated as 3: %v", merge, err)
		}
		want := expectOf(files[0])
		want.Rows = 5
		if err := Validate("spliced", res.Data, want); err != nil {
			t.Fatalf("merge %v: %v", merge, err)
		}
		if merge && !bytes.Equal(res.Data, five) {
			t.Fatalf("merged splice differs from LanceDB's five-row file (%d / %d bytes)", len(res.Data), len(five))
		}
	}
}

// TestValidate: every file LanceDB wrote validates; each reader rule
// broken in a copy of one gives a *RuleError wrapping ErrUnreadable that
// says which.
func TestValidate(t *testing.T) {
	for _, n := range append(append([]string{}, seeds...), struct20...) {
		b := seed(t, n)
		f, err := Parse(n, b)
		if err != nil {
			t.Fatal(err)
		}
		if err := Validate(n, b, expectOf(f)); err != nil {
			t.Errorf("%s: %v", n, err)
		}
	}
	s20, _ := Parse("s20", seed(t, "struct20-five.lance"))
	s21, _ := Parse("s21", seed(t, "twenty-rows.lance"))
	cols := func(f *File) *File {
		g := *f
		g.Columns = append([]Column{}, f.Columns...)
		for i := range g.Columns {
			g.Columns[i].Pages = append([]Page{}, f.Columns[i].Pages...)
		}
		return &g
	}
	cases := []struct {
		name string
		f    *File
		mut  func(f *File, w *Expect)
	}{
		{"struct header of two pages", s20, func(f *File, _ *Expect) {
			p := f.Columns[1].Pages[0]
			p.Length = 2
			f.Columns[1].Pages = []Page{p, {Length: 3, Encoding: p.Encoding, TypeURL: p.TypeURL}}
		}},
		{"struct header with a buffer", s20, func(f *File, _ *Expect) { f.Columns[1].Pages[0].Buffers = []Buffer{{1024, 0}} }},
		{"leaf encoding in the struct's place", s20, func(f *File, _ *Expect) { f.Columns[1].Pages[0].Encoding = f.Columns[2].Pages[0].Encoding }},
		{"a leaf column short of rows", s20, func(f *File, _ *Expect) { f.Columns[3].Pages[0].Length = 4 }},
		{"rows other than the fragment's", s21, func(_ *File, w *Expect) { w.Rows++ }},
		{"other schema", s21, func(_ *File, w *Expect) { w.Schema = append([]byte{}, w.Schema[:len(w.Schema)-1]...) }},
		{"other version", s21, func(_ *File, w *Expect) { w.Minor = 2 }},
		{"a missing column", s21, func(f *File, _ *Expect) { f.Columns = f.Columns[:len(f.Columns)-1] }},
		{"no column encoding", s21, func(f *File, _ *Expect) { f.Columns[0].Encoding = nil }},
		{"a column-level buffer", s21, func(f *File, _ *Expect) { f.Columns[0].Buffers = []Buffer{{0, 1}} }},
		{"misaligned buffer", s21, func(f *File, _ *Expect) { f.Columns[0].Pages[0].Buffers = []Buffer{{8, 1}} }},
		{"overlapping buffers", s21, func(f *File, _ *Expect) {
			f.Columns[1].Pages[0].Buffers = append([]Buffer{}, f.Columns[0].Pages[0].Buffers...)
		}},
		{"overlap behind an empty buffer", s21, func(f *File, _ *Expect) {
			f.Columns[0].Pages[0].Buffers = []Buffer{{0, 200}}
			f.Columns[1].Pages[0].Buffers = []Buffer{{64, 0}, {128, 8}}
		}},
		{"misaligned descriptor", s21, func(f *File, _ *Expect) { f.Global = []Buffer{{f.Global[0].Offset + 1, f.Global[0].Size - 1}} }},
		{"two global buffers", s21, func(f *File, _ *Expect) { f.NumGlobalBuffers = 2 }},
		{"priority not the first row", s21, func(f *File, _ *Expect) { f.Columns[0].Pages[0].Priority = 1 }},
		{"mini-block without its chunks", s21, func(f *File, _ *Expect) { f.Columns[0].Pages[0].Buffers = f.Columns[0].Pages[0].Buffers[:1] }},
		{"blob layout", s21, func(f *File, _ *Expect) { f.Columns[0].Pages[0].Layout = LayoutBlob }},
		{"2.0 page in a 2.1 file", s21, func(f *File, _ *Expect) { f.Columns[0].Pages[0].TypeURL = TypeArrayEncoding }},
	}
	for _, c := range cases {
		f := cols(c.f)
		w := expectOf(c.f)
		c.mut(f, &w)
		err := validateFile("mut", f, w)
		var re *RuleError
		if !errors.Is(err, ErrUnreadable) || !errors.As(err, &re) || re.Reason == "" {
			t.Errorf("%s: %v, want a RuleError wrapping ErrUnreadable", c.name, err)
			continue
		}
		t.Logf("%s: %v", c.name, err)
	}
	// Spliceable refuses the inputs by the same rules, as ErrUnsupported.
	bad := cols(s20)
	bad.Columns[3].Pages[0].Length = 4
	if err := Spliceable("bad", bad); !errors.Is(err, ErrUnsupported) || errors.Is(err, ErrUnreadable) {
		t.Fatalf("Spliceable: %v", err)
	}
}
