package lance_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/internal/testkit"
	"github.com/tablekeep/tablekeep/shared/lance"
	"github.com/tablekeep/tablekeep/shared/objstore"
)

// BenchmarkLanceCompaction is issue 21's figures: LanceDB makes a dataset
// of LANCE_BENCH_UPSERTS single-row upserts (mergeInsert, default 2,000;
// the seed's churn: half of them update one of ten indexed keys, half add a
// key); then, on copies, tablekeep's compaction (counted requests) and
// LanceDB's optimize(). It reports fragments and latest manifest bytes
// before and after, the times, the requests by kind, and LanceDB's
// open + get-by-key on each copy. `make bench` runs it (`make bench-lance`
// alone) with LANCE_BENCH_DOC set to docs/lance.md: the figures then replace
// what stands between the lance-compaction-bench markers there. Run it alone:
//
//	go test -run '^$' -bench 'BenchmarkLanceCompaction$' -benchtime 1x -timeout 60m ./shared/lance/
func BenchmarkLanceCompaction(b *testing.B) {
	n := 2000
	if s := os.Getenv("LANCE_BENCH_UPSERTS"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	ctx := context.Background()
	base := b.TempDir()
	var churn struct {
		MS int64 `json:"ms"`
	}
	node(b, &churn, "churn", base, "t", strconv.Itoa(n))
	latestOf := func(dir string) (lance.VersionFile, int) {
		ds := lance.Open(testkit.DiskStoreAt(b, dir), "t.lance")
		vs, err := ds.ListVersions(ctx)
		if err != nil {
			b.Fatal(err)
		}
		m, err := ds.ReadManifest(ctx, vs[len(vs)-1])
		if err != nil {
			b.Fatal(err)
		}
		return vs[len(vs)-1], len(m.Fragments)
	}
	type openGet struct {
		MS   float64 `json:"ms"`
		Rows int     `json:"rows"`
	}
	og := func(dir string) openGet {
		var r openGet
		node(b, &r, "openget", dir, "t", "5")
		return r
	}
	vb, fb := latestOf(base)
	ogBefore := og(base)

	tk := b.TempDir()
	copyDir(b, base, tk)
	cnt := objstore.NewCounting(testkit.DiskStoreAt(b, tk))
	t0 := time.Now()
	rep, err := lance.Open(cnt, "t.lance").Compact(ctx, lance.CompactOptions{TargetRows: 1 << 20})
	tkDur := time.Since(t0)
	if err != nil || rep.Version == 0 {
		b.Fatalf("compact: %+v %v", rep, err)
	}
	va, fa := latestOf(tk)
	ogTK := og(tk)
	c := cnt.Counts()

	ld := b.TempDir()
	copyDir(b, base, ld)
	var lr struct {
		MS        float64 `json:"ms"`
		Fragments int     `json:"fragments"`
	}
	node(b, &lr, "timed-compact", ld, "t")
	vl, _ := latestOf(ld)
	ogLD := og(ld)

	rows := []string{
		fmt.Sprintf("dataset: %d single-row upserts by LanceDB (%.1f s): %d versions, %d fragments, latest manifest %d B", n, float64(churn.MS)/1000, vb.Version, fb, vb.Size),
		"| run | time | fragments after | latest manifest after | requests | open + get by key (LanceDB, best of 5) |",
		"|---|---|---|---|---|---|",
		fmt.Sprintf("| before | - | %d | %d B | - | %.1f ms |", fb, vb.Size, ogBefore.MS),
		fmt.Sprintf("| tablekeep compaction (%d groups, %s, %d fragments skipped: %v) | %s | %d | %d B | %d: %s | %.1f ms |", rep.Committed, pagesOf(rep), skippedTotal(rep.Skipped), rep.Skipped,
			tkDur.Round(time.Millisecond), fa, va.Size, c.Total(), c, ogTK.MS),
		fmt.Sprintf("| LanceDB optimize() (compaction + index update) | %.0f ms | %d | %d B | (not countable on disk) | %.1f ms |", lr.MS, lr.Fragments, vl.Size, ogLD.MS),
	}
	for _, r := range rows {
		b.Log(r)
	}
	if doc := os.Getenv("LANCE_BENCH_DOC"); doc != "" {
		frag := fmt.Sprintf("Last `make bench` run (`BenchmarkLanceCompaction`, local disk, %s; times indicative on a shared machine, request counts exact):\n\n", time.Now().UTC().Format("2006-01-02 15:04 MST"))
		frag += rows[0] + ".\n\n" + strings.Join(rows[1:], "\n") + "\n"
		if err := spliceMarked(doc, lanceBenchBegin, lanceBenchEnd, frag); err != nil {
			b.Fatal(err)
		}
		b.Logf("figures written to %s", doc)
	}
	b.ReportMetric(tkDur.Seconds(), "tablekeep-s")
	b.ReportMetric(lr.MS/1000, "lancedb-s")
}

// The markers in docs/lance.md between which the benchmark writes its figures.
const (
	lanceBenchBegin = "<!-- lance-compaction-bench -->"
	lanceBenchEnd   = "<!-- /lance-compaction-bench -->"
)

// spliceMarked replaces what stands between the begin and end markers of
// the file at path with content (the markers stay), by a rename; it fails,
// writing nothing, unless each marker appears exactly once, begin first.
func spliceMarked(path, begin, end, content string) error {
	old, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s := string(old)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i || strings.Count(s, begin) != 1 || strings.Count(s, end) != 1 {
		return fmt.Errorf("%s: want one %q before one %q", path, begin, end)
	}
	out := s[:i+len(begin)] + "\n" + content + s[j:]
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(out), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func skippedTotal(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// pagesOf sums the pages the compaction's groups read and wrote.
func pagesOf(rep *lance.CompactReport) string {
	in, out, unmerged := 0, 0, 0
	for _, g := range rep.Groups {
		in, out, unmerged = in+g.PagesIn, out+g.Pages, unmerged+len(g.Unmerged)
	}
	return fmt.Sprintf("pages %d -> %d, %d columns unmerged", in, out, unmerged)
}
