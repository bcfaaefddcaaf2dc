package lanceenc

import (
	"os"
	"path/filepath"
	"testing"
)

// TestDumpFile reads and prints (-v) the pages of every file LANCEENC_DUMP
// names (a glob); by default the LanceDB-written files in
// ../lancefile/testdata, which must all read.
func TestDumpFile(t *testing.T) {
	path := os.Getenv("LANCEENC_DUMP")
	if path == "" {
		path = filepath.Join("..", "lancefile", "testdata", "*.lance")
	}
	files, _ := filepath.Glob(path)
	if len(files) == 0 {
		t.Fatalf("no file matches %s", path)
	}
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
