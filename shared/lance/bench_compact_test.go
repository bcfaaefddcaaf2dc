package lance_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/lance"
	"github.com/tablekeep/tablekeep/shared/objstore"
)

// BenchmarkLanceCompaction is issue 21's figures: LanceDB makes a dataset
// of LANCE_BENCH_UPSERTS single-row upserts (mergeInsert, default 2,000;
// the seed's churn: half of them update one of ten indexed keys, half add a
// key); then, on copies, tablekeep's compaction (counted requests) and
// LanceDB's optimize(). It reports fragments and latest manifest bytes
// before and after, the times, the requests by kind, and LanceDB's
// open + get-by-key on each copy. Run it alone:
//
//	go test -run '^$' -bench BenchmarkLanceCompaction -benchtime 1x -timeout 60m ./shared/lance/
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
		ds := lance.Open(mustDisk(b, dir), "t.lance")
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
	cnt := objstore.NewCounting(mustDisk(b, tk))
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
	b.ReportMetric(tkDur.Seconds(), "tablekeep-s")
	b.ReportMetric(lr.MS/1000, "lancedb-s")
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
