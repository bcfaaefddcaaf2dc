package lance_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/internal/fakeclock"
	"github.com/tablekeep/tablekeep/shared/internal/testkit"
	"github.com/tablekeep/tablekeep/shared/lance"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/queue"
	"github.com/tablekeep/tablekeep/shared/table"
)

// BenchmarkLancePrune is issue 14's figures: a LanceDB dataset of
// LANCE_BENCH_VERSIONS versions (default 5,000) made by single-commit
// upserts (the seed's churn), compacted once; then, on copies of it on the
// same local disk, tablekeep's prune (plan + drain, 1 and 4 cleaner
// workers) and LanceDB's own cleanup (optimize({cleanupOlderThan}) after
// the compaction, so its time is the cleanup's), with the same cut-off:
// every version but the latest. Run it alone:
//
//	go test -run '^$' -bench BenchmarkLancePrune -benchtime 1x ./shared/lance/
func BenchmarkLancePrune(b *testing.B) {
	base, cutoff, vs := lanceBenchBase(b)
	ctx := context.Background()
	p := maintenance.Policy{Grace: time.Hour, KeepLast: 1}
	now := cutoff.Add(lance.NewSource(nil, "").Grace(p.Grace))
	rows := []string{"| run | plan | drain | total | requests | manifests read |", "|---|---|---|---|---|---|"}
	for _, workers := range []int{1, 4} {
		dir := b.TempDir()
		copyDir(b, base, dir)
		cnt := objstore.NewCounting(testkit.DiskStoreAt(b, dir))
		src := lance.NewSource(cnt, "t.lance/")
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
					Tables:   resolver{maintenance.TableRef{Name: "t", Root: "t.lance/", Policy: p, Format: "lance"}},
					OpenOpts: table.Options{Clock: fakeclock.New(now)}}
				if _, err := maintenance.DrainLocal(ctx, q, c, nil); err != nil {
					b.Error(err)
				}
			}()
		}
		wg.Wait()
		drainDur := time.Since(t1)
		left, _ := lance.Open(cnt, "t.lance").ListVersions(ctx)
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
	// A second tablekeep pass on the pruned dataset: what an idle pass costs.
	dir := b.TempDir()
	copyDir(b, base, dir)
	lanceDir := b.TempDir()
	copyDir(b, base, lanceDir)
	var lr struct {
		MS    float64 `json:"ms"`
		Prune struct {
			OldVersionsRemoved int `json:"oldVersionsRemoved"`
		} `json:"prune"`
	}
	node(b, &lr, "timed-cleanup", lanceDir, "t", strconv.FormatInt(cutoff.UnixMilli(), 10))
	rows = append(rows, fmt.Sprintf("| LanceDB optimize({cleanupOlderThan}) after compaction, inline | - | - | %s | (not countable on a local disk) | every manifest (%d) |",
		(time.Duration(lr.MS*float64(time.Millisecond))).Round(time.Millisecond), len(vs)))
	b.ReportMetric(lr.MS/1000, "lance-cleanup-s")
	for _, r := range rows {
		b.Log(r)
	}
}

var benchBase struct {
	sync.Once
	dir    string
	cutoff time.Time
	vs     []lance.VersionFile
}

// lanceBenchBase makes the benchmark's dataset once per process: LanceDB,
// LANCE_BENCH_VERSIONS single-commit upserts (default 5,000), compacted.
func lanceBenchBase(b *testing.B) (string, time.Time, []lance.VersionFile) {
	benchBase.Do(func() {
		n := 5000
		if s := os.Getenv("LANCE_BENCH_VERSIONS"); s != "" {
			n, _ = strconv.Atoi(s)
		}
		dir, err := os.MkdirTemp("", "lancebench")
		if err != nil {
			b.Fatal(err)
		}
		var churn struct {
			MS int64 `json:"ms"`
		}
		node(b, &churn, "churn", dir, "t", strconv.Itoa(n))
		node(b, nil, "compact", dir, "t")
		benchBase.dir, benchBase.cutoff = dir, time.Now()
		benchBase.vs, err = lance.Open(testkit.DiskStoreAt(b, dir), "t.lance").ListVersions(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		vs := benchBase.vs
		b.Logf("dataset: %d versions by single-commit upserts (LanceDB, %.1f s), compacted; latest manifest %d B", len(vs), float64(churn.MS)/1000, vs[len(vs)-1].Size)
	})
	if benchBase.dir == "" {
		b.Fatal("no benchmark dataset")
	}
	return benchBase.dir, benchBase.cutoff, benchBase.vs
}

var _ = filepath.Join
