package lancefile

import (
	"errors"
	"testing"
)

// FuzzParse: any bytes give a parsed file or a typed error; a parsed file
// that is spliceable splices with itself, pages copied and pages merged,
// into a file that parses back with twice its rows and validates.
func FuzzParse(f *testing.F) {
	for _, name := range append(append([]string{}, seeds...), struct20...) {
		f.Add(seed(f, name))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		file, err := Parse("fuzz", b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnsupported) {
				t.Fatalf("untyped error: %v", err)
			}
			return
		}
		if Spliceable("fuzz", file) != nil || file.Rows > 1<<40 {
			return
		}
		for _, merge := range []bool{false, true} {
			res, err := SpliceWith([]string{"a", "b"}, []*File{file, file}, SpliceOptions{MergePages: merge})
			if err != nil {
				return
			}
			g, err := Parse("spliced", res.Data)
			if err != nil {
				t.Fatalf("spliced file (merge %v) does not parse: %v", merge, err)
			}
			if g.Rows != 2*file.Rows || len(g.Columns) != len(file.Columns) {
				t.Fatalf("spliced (merge %v): %d rows, %d columns", merge, g.Rows, len(g.Columns))
			}
			if err := Spliceable("spliced", g); err != nil {
				t.Fatalf("spliced (merge %v): %v", merge, err)
			}
			if err := Validate("spliced", res.Data, Expect{Rows: 2 * file.Rows, Major: file.Major, Minor: file.Minor, Schema: file.Schema}); err != nil {
				t.Fatalf("spliced (merge %v) of a spliceable file fails validation: %v", merge, err)
			}
		}
	})
}
