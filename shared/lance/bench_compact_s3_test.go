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
	"github.com/tablekeep/tablekeep/shared/lance"
	"github.com/tablekeep/tablekeep/shared/objstore"
)

// BenchmarkLanceCompactionS3 is BenchmarkLanceCompaction on versitygw
// behind the fault proxy with S3's latency (GET 20 ms, PUT 30, LIST 40):
// the dataset LanceDB made locally (LANCE_BENCH_UPSERTS single-row
// upserts, default 2,000) is uploaded twice; tablekeep compacts one copy
// through objstore.S3, LanceDB's optimize() the other through its own S3
// client, both through the proxy, which counts every request; then
// LanceDB's open + get by key on each. Needs the local stack:
//
//	make stack-up && set -a && . .stack/env && set +a
//	go test -run '^$' -bench BenchmarkLanceCompactionS3 -benchtime 1x -timeout 60m ./shared/lance/
func BenchmarkLanceCompactionS3(b *testing.B) {
	n := 2000
	if s := os.Getenv("LANCE_BENCH_UPSERTS"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	ctx := context.Background()
	direct := testenv.S3Store(b)
	bucket := direct.Bucket()
	base := b.TempDir()
	node(b, nil, "churn", base, "t", strconv.Itoa(n))
	dsDir := filepath.Join(base, "t.lance")
	var files []string
	_ = filepath.WalkDir(dsDir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dsDir, p)
			files = append(files, filepath.ToSlash(rel))
		}
		return err
	})
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
			return s3p.Put
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
	type openGet struct {
		MS float64 `json:"ms"`
	}
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
	latestOf := func(pre string) (lance.VersionFile, int) {
		ds := lance.Open(direct, pre)
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
	vb, fb := latestOf(prefixes[0])
	ogBefore := og(prefixes[1])

	s0 := proxy.Stats()
	t0 := time.Now()
	rep, err := lance.Open(st, prefixes[0]).Compact(ctx, lance.CompactOptions{TargetRows: 1 << 20})
	tkDur := time.Since(t0)
	if err != nil || rep.Version == 0 {
		b.Fatalf("compact: %+v %v", rep, err)
	}
	tkReqs := kinds(s0, proxy.Stats())
	va, fa := latestOf(prefixes[0])
	ogTK := og(prefixes[0])

	var lr struct {
		MS        float64 `json:"ms"`
		Fragments int     `json:"fragments"`
	}
	s0 = proxy.Stats()
	nodeEnv(b, env, &lr, "timed-compact", uri(prefixes[1]), "t")
	ldReqs := kinds(s0, proxy.Stats())
	vl, _ := latestOf(prefixes[1])
	ogLD := og(prefixes[1])
	rows := []string{
		fmt.Sprintf("dataset: %d single-row upserts by LanceDB: %d versions, %d fragments, latest manifest %d B, on versitygw behind the S3 latency proxy", n, vb.Version, fb, vb.Size),
		"| run | time | fragments after | latest manifest after | requests | open + get by key (LanceDB, best of 5) |",
		"|---|---|---|---|---|---|",
		fmt.Sprintf("| before | - | %d | %d B | - | %.1f ms |", fb, vb.Size, ogBefore),
		fmt.Sprintf("| tablekeep compaction (%d group, %s) | %s | %d | %d B | %s | %.1f ms |", rep.Committed, pagesOf(rep), tkDur.Round(time.Millisecond), fa, va.Size, tkReqs, ogTK),
		fmt.Sprintf("| LanceDB optimize() (compaction + index update) | %.0f ms | %d | %d B | %s | %.1f ms |", lr.MS, lr.Fragments, vl.Size, ldReqs, ogLD),
	}
	for _, r := range rows {
		b.Log(r)
	}
	b.ReportMetric(tkDur.Seconds(), "tablekeep-s")
	b.ReportMetric(lr.MS/1000, "lancedb-s")
}
