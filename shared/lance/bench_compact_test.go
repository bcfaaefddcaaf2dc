package lance_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/tablekeep/tablekeep/shared/internal/faultproxy"
	"github.com/tablekeep/tablekeep/shared/internal/testenv"
	"github.com/tablekeep/tablekeep/shared/internal/testkit"
	"github.com/tablekeep/tablekeep/shared/lance"
	"github.com/tablekeep/tablekeep/shared/objstore"
)

// BenchmarkLanceCompaction is issue 21's figures, LanceDB side by side in
// one run. LanceDB makes the dataset once: one write of LANCE_BENCH_ROWS
// rows (default 10,000), a btree index on id, a tag, then
// LANCE_BENCH_UPSERTS single-row upserts (mergeInsert, default 2,000; the
// seed's churn: half of them update one of ten indexed keys, half add a
// key) and a second tag. Then, on copies of it, tablekeep's compaction
// (the policy's defaults: TargetRows 1,048,576, deleted threshold 0.1)
// against LanceDB's optimize(), each followed by LanceDB's open +
// get-by-key, twice:
//
//   - at S3 latency: versitygw (the stack's, S3_ENDPOINT) behind the fault
//     proxy with the S3 profile (GET 20 ms, PUT 30, LIST 40, DeleteObjects
//     120), which counts every request of both tools by kind;
//   - on local disk (tablekeep's requests counted by objstore.Counting).
//
// It reports fragments and latest manifest bytes before and after, the
// times, the requests, the open + get latencies and the goals.
// `make bench-lance` (which `make bench` runs) starts a private stack, runs
// it with LANCE_BENCH_DOC=docs/lance.md, whose lance-compaction-bench
// markers then receive the figures, and stops the stack. By hand:
//
//	make stack-up && set -a && . .stack/env && set +a
//	go test -run '^$' -bench 'BenchmarkLanceCompaction$' -benchtime 1x -timeout 60m ./shared/lance/
func BenchmarkLanceCompaction(b *testing.B) {
	n, bulk := envInt(b, "LANCE_BENCH_UPSERTS", 2000), envInt(b, "LANCE_BENCH_ROWS", 10000)
	direct := testenv.S3Store(b) // first: without the stack, fail before LanceDB's long build
	base := b.TempDir()
	var made struct {
		Latest uint64 `json:"latest"`
		MS     int64  `json:"ms"`
		Rows   int    `json:"rows"`
	}
	t0 := time.Now()
	node(b, &made, "upserts", base, "t", strconv.Itoa(n), strconv.Itoa(bulk))
	build := time.Since(t0)
	s3Rows, s3Goals := compactionFiguresS3(b, direct, base)
	diskRows, _ := compactionFiguresDisk(b, base)
	head := fmt.Sprintf("Dataset: LanceDB 0.31 wrote %d rows in one write, a btree index on `id` and a tag, then %d single-row mergeInsert upserts (%.0f s; %.0f s in all) and a second tag: %d rows, %d versions.",
		bulk, n, float64(made.MS)/1000, build.Seconds(), made.Rows, made.Latest)
	all := append(append([]string{head, "", "**At S3 latency** (versitygw behind the fault proxy: GET 20 ms, PUT 30, LIST 40, DeleteObjects 120; every request of both tools counted by the proxy):", ""}, s3Rows...),
		append(append([]string{"", "Goals (at S3 latency): " + s3Goals, "", "**On local disk** (same dataset; tablekeep's requests counted by `objstore.Counting`, LanceDB's not countable):", ""}, diskRows...), "")...)
	for _, r := range all {
		b.Log(r)
	}
	if doc := os.Getenv("LANCE_BENCH_DOC"); doc != "" {
		frag := fmt.Sprintf("Last `make bench` run (`BenchmarkLanceCompaction`, %s; times indicative on a shared 2-core machine, request counts exact):\n\n", time.Now().UTC().Format("2006-01-02 15:04 MST"))
		frag += strings.Join(all, "\n") + "\n"
		if err := spliceMarked(doc, lanceBenchBegin, lanceBenchEnd, frag); err != nil {
			b.Fatal(err)
		}
		b.Logf("figures written to %s", doc)
	}
}

// benchCompactOptions are the policy's defaults (maintenance's TargetRows
// and DeletedThreshold).
var benchCompactOptions = lance.CompactOptions{TargetRows: 1 << 20, DropDeletedAt: 0.1}

func envInt(b *testing.B, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 0 {
		b.Fatalf("%s=%q: want a count", name, s)
	}
	return v
}

// openGet is the fixture's open + get by key (best of 5).
type openGet struct {
	MS   float64 `json:"ms"`
	Rows int     `json:"rows"`
}

// timedOptimize is the fixture's timed-compact answer.
type timedOptimize struct {
	MS        float64 `json:"ms"`
	Fragments int     `json:"fragments"`
}

// benchTable is the figures' table: rows before, after tablekeep's
// compaction and after LanceDB's optimize().
type benchRun struct {
	time      string
	fragments int
	manifest  int64
	requests  string
	openGetMS float64
}

func benchTable(rep *lance.CompactReport, before, tk, ld benchRun) []string {
	line := func(name string, r benchRun) string {
		return fmt.Sprintf("| %s | %s | %d | %d B | %s | %.1f ms |", name, r.time, r.fragments, r.manifest, r.requests, r.openGetMS)
	}
	return []string{
		"| run | time | fragments | latest manifest | requests | LanceDB open + get by key (best of 5) |",
		"|---|---|---|---|---|---|",
		line("before", before),
		line(fmt.Sprintf("tablekeep compaction (%d group, %s, %d fragments skipped: %v)", rep.Committed, pagesOf(rep), skippedTotal(rep.Skipped), rep.Skipped), tk),
		line("LanceDB optimize() on a copy (compaction + index update)", ld),
	}
}

// goals checks issue 21's goals on one environment's figures.
func goals(before, tk, ld benchRun, tkDur time.Duration, ldMS float64) string {
	mark := func(ok bool) string {
		if ok {
			return "met"
		}
		return "NOT met"
	}
	speed := ldMS / float64(tkDur.Milliseconds()+1)
	og := tk.openGetMS / ld.openGetMS
	return fmt.Sprintf("fragments %d -> %d (the indexed bulk fragment is left, the upserts' fold to one; LanceDB %d): %s; latest manifest %d B <= 4 KB: %s; "+
		"tablekeep %.1fx faster than optimize() (>= 5x): %s; open + get after tablekeep's %.2fx LanceDB's own (<= 1.5x): %s.",
		before.fragments, tk.fragments, ld.fragments, mark(tk.fragments <= 2 && tk.fragments <= ld.fragments+1), tk.manifest, mark(tk.manifest <= 4096),
		speed, mark(speed >= 5), og, mark(og <= 1.5))
}

func latestOf(b *testing.B, store objstore.Store, root string) (lance.VersionFile, int) {
	b.Helper()
	ctx := context.Background()
	ds := lance.Open(store, root)
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

// compactionFiguresDisk: the figures on local disk, on copies of base.
func compactionFiguresDisk(b *testing.B, base string) ([]string, string) {
	og := func(dir string) float64 {
		var r openGet
		node(b, &r, "openget", dir, "t", "5")
		return r.MS
	}
	vb, fb := latestOf(b, testkit.DiskStoreAt(b, base), "t.lance")
	before := benchRun{time: "-", fragments: fb, manifest: vb.Size, requests: "-", openGetMS: og(base)}

	tkDir := b.TempDir()
	copyDir(b, base, tkDir)
	cnt := objstore.NewCounting(testkit.DiskStoreAt(b, tkDir))
	t0 := time.Now()
	rep, err := lance.Open(cnt, "t.lance").Compact(context.Background(), benchCompactOptions)
	tkDur := time.Since(t0)
	if err != nil || rep.Version == 0 {
		b.Fatalf("compact: %+v %v", rep, err)
	}
	va, fa := latestOf(b, testkit.DiskStoreAt(b, tkDir), "t.lance")
	c := cnt.Counts()
	tk := benchRun{time: tkDur.Round(time.Millisecond).String(), fragments: fa, manifest: va.Size, requests: fmt.Sprintf("%d: %s", c.Total(), c), openGetMS: og(tkDir)}

	ldDir := b.TempDir()
	copyDir(b, base, ldDir)
	var lr timedOptimize
	node(b, &lr, "timed-compact", ldDir, "t")
	vl, _ := latestOf(b, testkit.DiskStoreAt(b, ldDir), "t.lance")
	ld := benchRun{time: fmt.Sprintf("%.0f ms", lr.MS), fragments: lr.Fragments, manifest: vl.Size, requests: "(not countable on disk)", openGetMS: og(ldDir)}
	return benchTable(rep, before, tk, ld), goals(before, tk, ld, tkDur, lr.MS)
}

// compactionFiguresS3: the dataset LanceDB made in base uploaded twice to
// versitygw; tablekeep compacts one copy through objstore.S3, LanceDB's
// optimize() the other through its own S3 client, both through the S3
// latency proxy, which counts every request; LanceDB's open + get by key
// before (on LanceDB's copy) and after each.
func compactionFiguresS3(b *testing.B, direct *objstore.S3, base string) ([]string, string) {
	ctx := context.Background()
	bucket := direct.Bucket()
	dsDir := filepath.Join(base, "t.lance")
	var files []string
	if err := filepath.WalkDir(dsDir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dsDir, p)
			files = append(files, filepath.ToSlash(rel))
		}
		return err
	}); err != nil {
		b.Fatal(err)
	}
	prefixes := []string{"tk/t.lance/", "lance/t.lance/"}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(32)
	for _, f := range files {
		g.Go(func() error {
			data, err := os.ReadFile(filepath.Join(dsDir, filepath.FromSlash(f)))
			if err != nil {
				return err
			}
			for _, pre := range prefixes {
				if err := direct.Put(gctx, pre+f, data); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	s3p := objstore.S3Profile()
	proxy, err := faultproxy.Start(testenv.S3Endpoint(b), faultproxy.Options{Delay: func(r *http.Request) time.Duration {
		if r.Method == http.MethodDelete {
			return s3p.Put // a single-object DELETE; DeleteObjects is KindDelete
		}
		return s3p.For(faultproxy.S3Kind(r))
	}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { proxy.Close() })
	st, err := faultproxy.NewS3(ctx, proxy.URL(), bucket)
	if err != nil {
		b.Fatal(err)
	}
	opts, _ := json.Marshal(map[string]string{
		"aws_access_key_id": os.Getenv("AWS_ACCESS_KEY_ID"), "aws_secret_access_key": os.Getenv("AWS_SECRET_ACCESS_KEY"),
		"aws_endpoint": proxy.URL(), "aws_region": "us-east-1", "allow_http": "true",
	})
	env := []string{"LANCE_STORAGE_OPTIONS=" + string(opts)}
	uri := func(pre string) string { return "s3://" + bucket + "/" + strings.TrimSuffix(pre, "/t.lance/") }
	og := func(pre string) float64 {
		var r openGet
		nodeEnv(b, env, &r, "openget", uri(pre), "t", "5")
		return r.MS
	}
	kinds := func(s0, s1 faultproxy.Stats) string {
		var ks []string
		for _, k := range []string{"GET", "HEAD", "PUT", "LIST", "DELETE", "other"} {
			if d := s1.ByKind[k] - s0.ByKind[k]; d > 0 {
				ks = append(ks, fmt.Sprintf("%s %d", k, d))
			}
		}
		return fmt.Sprintf("%d: %s", s1.Requests-s0.Requests, strings.Join(ks, ", "))
	}
	vb, fb := latestOf(b, direct, prefixes[0])
	before := benchRun{time: "-", fragments: fb, manifest: vb.Size, requests: "-", openGetMS: og(prefixes[1])}

	s0 := proxy.Stats()
	t0 := time.Now()
	rep, err := lance.Open(st, prefixes[0]).Compact(ctx, benchCompactOptions)
	tkDur := time.Since(t0)
	if err != nil || rep.Version == 0 {
		b.Fatalf("compact: %+v %v", rep, err)
	}
	tkReqs := kinds(s0, proxy.Stats())
	va, fa := latestOf(b, direct, prefixes[0])
	tk := benchRun{time: tkDur.Round(time.Millisecond).String(), fragments: fa, manifest: va.Size, requests: tkReqs, openGetMS: og(prefixes[0])}

	var lr timedOptimize
	s0 = proxy.Stats()
	nodeEnv(b, env, &lr, "timed-compact", uri(prefixes[1]), "t")
	ldReqs := kinds(s0, proxy.Stats())
	vl, _ := latestOf(b, direct, prefixes[1])
	ld := benchRun{time: fmt.Sprintf("%.0f ms", lr.MS), fragments: lr.Fragments, manifest: vl.Size, requests: ldReqs, openGetMS: og(prefixes[1])}
	b.ReportMetric(tkDur.Seconds(), "tablekeep-s3-s")
	b.ReportMetric(lr.MS/1000, "lancedb-s3-s")
	return benchTable(rep, before, tk, ld), goals(before, tk, ld, tkDur, lr.MS)
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
