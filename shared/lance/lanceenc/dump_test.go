package lanceenc

import (
	"os"
	"path/filepath"
	"testing"
)

func TestDumpFile(t *testing.T) {
	path := os.Getenv("LANCEENC_DUMP")
	if path == "" {
		t.Skip("set LANCEENC_DUMP to a .lance data file")
	}
	files, _ := filepath.Glob(path)
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		f, err := readTestFile(b)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: version %d.%d, %d columns, %d global", filepath.Base(p), f.Major, f.Minor, len(f.Columns), len(f.Global))
		for i, c := range f.Columns {
			t.Logf(" col %d enc %x", i, c.Encoding)
			for _, pg := range c.Pages {
				var sizes []int
				for _, b := range pg.Buffers {
					sizes = append(sizes, len(b))
				}
				t.Logf("  page rows %d prio %d bufs %v enc %q", pg.Rows, pg.Priority, sizes, pg.Encoding)
				for j, b := range pg.Buffers {
					if len(b) > 64 {
						b = b[:64]
					}
					t.Logf("    buf %d: %x", j, b)
				}
			}
		}
	}
}
