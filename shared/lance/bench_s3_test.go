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
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/tablekeep/tablekeep/shared/internal/fakeclock"
	"github.com/tablekeep/tablekeep/shared/internal/faultproxy"
	"github.com/tablekeep/tablekeep/shared/internal/testenv"
	"github.com/tablekeep/tablekeep/shared/lance"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/queue"
	"github.com/tablekeep/tablekeep/shared/table"
)

// BenchmarkLancePruneS3 is BenchmarkLancePrune on versitygw behind the
// fault proxy with S3's latency (GET 20 ms, PUT 30, LIST 40, DeleteObjects
// 120, a single DELETE 30 per request): tablekeep through objstore.S3 and LanceDB through its
// own S3 client talk to the same proxy. Needs the local stack:
//
//	STACK_DIR=$PWD/.stack infra/stack-up.sh && set -a && . .stack/env && set +a
//	go test -run '^$' -bench BenchmarkLancePruneS3 -benchtime 1x ./shared/lance/
func BenchmarkLancePruneS3(b *testing.B) {
	base, cutoff, vs := lanceBenchBase(b)
	ctx := context.Background()
	direct := testenv.S3Store(b)
	bucket := direct.Bucket()
	dsDir := filepath.Join(base, "t.lance")
	var files []string
	_ = filepath.WalkDir(dsDir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dsDir, p)
			files = append(files, filepath.ToSlash(rel))
		}
		return err
	})
	prefixes := []string{"tk1/t.lance/", "tk4/t.lance/", "lance/t.lance/"}
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
	// S3's latency by request kind; a single-object DELETE (LanceDB's
	// object_store deletes one key a request) costs what a PUT does, a
	// DeleteObjects batch (tablekeep's) 120 ms.
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

	p := maintenance.Policy{Grace: time.Hour, KeepLast: 1}
	now := cutoff.Add(lance.NewSource(nil, "").Grace(p.Grace))
	rows := []string{fmt.Sprintf("%d versions on versitygw behind the S3 latency proxy:", len(vs)),
		"| run | plan (under the lock) | drain (no lock) | total | requests | manifests read |", "|---|---|---|---|---|---|"}
	for i, workers := range []int{1, 4} {
		cnt := objstore.NewCounting(st)
		root := prefixes[i]
		src := lance.NewSource(cnt, root)
		t0 := time.Now()
		plan, err := maintenance.PlanSourcePrune(ctx, src, "t", p, now)
		if err != nil {
			b.Fatal(err)
		}
		q := queue.NewEmbedded(queue.EmbeddedOptions{})
		if err := maintenance.ApplySourcePrune(ctx, src, &plan, maintenance.QueueEnqueuer{Q: q}); err != nil {
			b.Fatal(err)
		}
		planDur, planReqs := time.Since(t0), cnt.Counts()
		t1 := time.Now()
		var wg sync.WaitGroup
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := &maintenance.Cleaner{Store: cnt, Requeue: maintenance.QueueEnqueuer{Q: q}, Sources: openLance,
					Tables:   resolver{maintenance.TableRef{Name: "t", Root: root, Policy: p, Format: "lance"}},
					OpenOpts: table.Options{Clock: fakeclock.New(now)}}
				if _, err := maintenance.DrainLocal(ctx, q, c, nil); err != nil {
					b.Error(err)
				}
			}()
		}
		wg.Wait()
		drainDur := time.Since(t1)
		left, _ := lance.Open(st, root).ListVersions(ctx)
		if len(left) != 1 {
			b.Fatalf("%d versions left", len(left))
		}
		total := cnt.Counts()
		rows = append(rows, fmt.Sprintf("| tablekeep, %d cleaner worker(s) | %s | %s | %s | %d (plan %d, drain %d) | %d, once each |",
			workers, planDur.Round(time.Millisecond), drainDur.Round(time.Millisecond), (planDur+drainDur).Round(time.Millisecond),
			total.Total(), planReqs.Total(), total.Total()-planReqs.Total(), src.ManifestsRead))
		b.ReportMetric(drainDur.Seconds(), fmt.Sprintf("drain-s/%dw", workers))
		b.ReportMetric((planDur + drainDur).Seconds(), fmt.Sprintf("total-s/%dw", workers))
	}
	opts, _ := json.Marshal(map[string]string{
		"aws_access_key_id": os.Getenv("AWS_ACCESS_KEY_ID"), "aws_secret_access_key": os.Getenv("AWS_SECRET_ACCESS_KEY"),
		"aws_endpoint": proxy.URL(), "aws_region": "us-east-1", "allow_http": "true",
	})
	var lr struct {
		MS    float64 `json:"ms"`
		Prune struct {
			OldVersionsRemoved int `json:"oldVersionsRemoved"`
		} `json:"prune"`
	}
	s0 := proxy.Stats()
	nodeEnv(b, []string{"LANCE_STORAGE_OPTIONS=" + string(opts)}, &lr, "timed-cleanup", "s3://"+bucket+"/lance", "t", strconv.FormatInt(cutoff.UnixMilli(), 10))
	s1 := proxy.Stats()
	var kinds []string
	for _, k := range []string{"GET", "HEAD", "PUT", "LIST", "DELETE", "other"} {
		if d := s1.ByKind[k] - s0.ByKind[k]; d > 0 {
			kinds = append(kinds, fmt.Sprintf("%s %d", k, d))
		}
	}
	left, _ := lance.Open(st, prefixes[2]).ListVersions(ctx)
	rows = append(rows, fmt.Sprintf("| LanceDB optimize({cleanupOlderThan}) after compaction, inline | - | - | %s | %d (%s; the optimize call, compaction check included) | every manifest (%d); %d versions removed, %d left |",
		(time.Duration(lr.MS*float64(time.Millisecond))).Round(time.Millisecond), s1.Requests-s0.Requests, strings.Join(kinds, ", "), len(vs), lr.Prune.OldVersionsRemoved, len(left)))
	b.ReportMetric(lr.MS/1000, "lance-cleanup-s")
	for _, r := range rows {
		b.Log(r)
	}
}
