package lancefile

import (
	"errors"
	"testing"
)

// FuzzParse: any bytes give a parsed file or a typed error; a parsed file
// that is spliceable splices with itself into a file that parses back
// with twice its rows.
func FuzzParse(f *testing.F) {
	for _, name := range seeds {
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
		res, err := Splice([]string{"a", "b"}, []*File{file, file})
		if err != nil {
			return
		}
		g, err := Parse("spliced", res.Data)
		if err != nil {
			t.Fatalf("spliced file does not parse: %v", err)
		}
		if g.Rows != 2*file.Rows || len(g.Columns) != len(file.Columns) {
			t.Fatalf("spliced: %d rows, %d columns", g.Rows, len(g.Columns))
		}
	})
}
