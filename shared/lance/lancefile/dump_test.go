package lancefile

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

// dumpProto renders a message generically (field numbers, nested messages
// guessed), for TestDump.
func dumpProto(b []byte, depth int) string {
	var sb strings.Builder
	err := walk("", "", b, func(num protowire.Number, typ protowire.Type, v []byte, u uint64) error {
		if typ == protowire.BytesType {
			inner := dumpProto(v, depth+1)
			if depth < 12 && inner != "" && !strings.HasPrefix(inner, "!") {
				fmt.Fprintf(&sb, "%d{%s} ", num, inner)
			} else {
				fmt.Fprintf(&sb, "%d:%q ", num, v)
			}
		} else {
			fmt.Fprintf(&sb, "%d=%d ", num, u)
		}
		return nil
	})
	if err != nil || (len(b) > 0 && sb.Len() == 0) {
		return "!"
	}
	return strings.TrimSpace(sb.String())
}

// TestDump parses and prints (-v) the container of every file LANCEFILE_DUMP
// names (a glob); by default the LanceDB-written files in testdata, which
// must all parse.
func TestDump(t *testing.T) {
	glob := os.Getenv("LANCEFILE_DUMP")
	if glob == "" {
		glob = filepath.Join("testdata", "*.lance")
	}
	paths, _ := filepath.Glob(glob)
	if len(paths) == 0 {
		t.Fatalf("no file matches %s", glob)
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		f, err := Parse(p, b)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		t.Logf("%s: %d B, version %d.%d, %d rows, %d columns, %d global buffers %v, cm %d cmo %d gbo %d", filepath.Base(p), f.Size, f.Major, f.Minor, f.Rows, f.NumColumns, f.NumGlobalBuffers, f.Global, f.ColumnMetaStart, f.CMOStart, f.GBOStart)
		t.Logf("  schema: %s", dumpProto(f.Schema, 0))
		for i, c := range f.Columns {
			t.Logf("  column %d: plain %v, buffers %v, encoding %s", i, c.Plain, c.Buffers, dumpProto(c.Encoding, 0))
			for j, pg := range c.Pages {
				t.Logf("    page %d: rows %d prio %d bufs %v layout %d %s", j, pg.Length, pg.Priority, pg.Buffers, pg.Layout, dumpProto(pg.Encoding, 0))
			}
		}
	}
}
