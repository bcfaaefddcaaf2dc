package lance_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tablekeep/tablekeep/shared/internal/testkit"
	"github.com/tablekeep/tablekeep/shared/lance"
	"github.com/tablekeep/tablekeep/shared/lance/lancefile"
)

// latestRows is the fixture's `rows` of the latest version, every column,
// without _rowid (a compaction gives rows new row ids), in scan order.
func latestRows(t testing.TB, dir string) []string {
	t.Helper()
	var r struct {
		Rows []map[string]any `json:"rows"`
	}
	node(t, &r, "rows", dir, "t")
	out := make([]string, len(r.Rows))
	for i, row := range r.Rows {
		delete(row, "_rowid")
		b, err := json.Marshal(row)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = string(b)
	}
	return out
}

// newFilePages parses the data file of each fragment the compaction made
// and returns its pages per column.
func newFilePages(t testing.TB, dir string, rep *lance.CompactReport) [][]int {
	t.Helper()
	m := latestManifest(t, lance.Open(testkit.DiskStoreAt(t, dir), "t.lance"))
	var out [][]int
	for _, g := range rep.Groups {
		for _, f := range m.Fragments {
			if f.ID != g.NewID || g.NewID == 0 {
				continue
			}
			name := filepath.Join(dir, "t.lance", "data", f.Files[0])
			b, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			lf, err := lancefile.Parse(name, b)
			if err != nil {
				t.Fatal(err)
			}
			var pages []int
			for _, c := range lf.Columns {
				pages = append(pages, len(c.Pages))
			}
			out = append(out, pages)
		}
	}
	return out
}

// TestCompactMergesPages: 200 one-row adds of the wide schema (every type
// lanceenc decodes, nulls, all-null and mostly-null columns, strings over
// 256 bytes) fold into one fragment whose file has one page per column
// (2.2: but the Bool column, whose one-row constant pages lanceenc does
// not decode and keeps byte for byte); LanceDB then reads every version
// exactly, the latest's every column and random access by offset, and its
// own optimize() runs. Fails before the splicer merged pages (200 pages a
// column).
func TestCompactMergesPages(t *testing.T) {
	for _, v := range []string{"2.1", "2.2", "2.0"} {
		t.Run(v, func(t *testing.T) {
			dir := t.TempDir()
			nodeEnv(t, []string{"LANCE_FILE_VERSION=" + v}, nil, "pages", dir, "t", "wide", "200", "1")
			before := dumpDataset(t, dir)
			rowsBefore := latestRows(t, dir)
			rep, err := lance.Open(testkit.DiskStoreAt(t, dir), "t.lance").Compact(context.Background(), lance.CompactOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Committed != 1 || rep.FragmentsAfter != 1 || len(rep.Groups) != 1 {
				t.Fatalf("report: %+v", rep)
			}
			g := rep.Groups[0]
			t.Logf("pages %d of %d, unmerged %v", g.Pages, g.PagesIn, g.Unmerged)
			pages := newFilePages(t, dir, rep)
			if len(pages) != 1 {
				t.Fatalf("new files: %v", pages)
			}
			for c, n := range pages[0] {
				want := 1
				if v == "2.2" && c == 4 { // flag: Bool constants, kept
					want = 200
				}
				if n != want {
					t.Fatalf("column %d: %d pages, want %d (all: %v; unmerged %v)", c, n, want, pages[0], g.Unmerged)
				}
			}
			if wantUnmerged := map[string]int{"2.2": 1}[v]; len(g.Unmerged) != wantUnmerged {
				t.Fatalf("unmerged %v", g.Unmerged)
			}
			checkCompacted(t, before, dumpDataset(t, dir), rep.Version)
			if got := latestRows(t, dir); !slices.Equal(got, rowsBefore) {
				t.Fatalf("LanceDB reads %d rows after, %d before; first %v / %v", len(got), len(rowsBefore), got[:1], rowsBefore[:1])
			}
			var took struct {
				Rows []map[string]any `json:"rows"`
			}
			node(t, &took, "take", dir, "t", "0,1,63,64,127,128,199")
			for i, off := range []int{0, 1, 63, 64, 127, 128, 199} {
				r := took.Rows[i]
				delete(r, "_rowid")
				b, _ := json.Marshal(r)
				if string(b) != rowsBefore[off] {
					t.Fatalf("take %d: %s, want %s", off, b, rowsBefore[off])
				}
			}
			var opt struct {
				Latest uint64 `json:"latest"`
			}
			node(t, &opt, "compact", dir, "t")
			if got := latestRows(t, dir); !slices.Equal(got, rowsBefore) {
				t.Fatalf("after LanceDB's optimize: %d rows", len(got))
			}
		})
	}
}
