package lance_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/catalog"
	"github.com/tablekeep/tablekeep/shared/clock"
	"github.com/tablekeep/tablekeep/shared/embedded"
	"github.com/tablekeep/tablekeep/shared/internal/testkit"
	"github.com/tablekeep/tablekeep/shared/lance"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
)

// BenchmarkLancePass is the embedded default's figure (issue 20): LanceDB
// makes a dataset of LANCE_BENCH_PASS_UPSERTS single-commit upserts
// (default 1,000; the seed's churn), then, on copies on the same local
// disk, one tablekeep maintenance pass the way `tablekeep maintain` runs it
// (embedded.Warehouse.Maintain: compaction and prune under the lease, the
// cleaner's drain, the sweep; policy keep-last 1, the clock past the
// grace), twice: on the local-disk store as it is (not paced: pacing is a
// property of the store), and on the same disk paced at S3's per-prefix
// rates, as every store was before; and LanceDB's optimize({cleanupOlderThan})
// with the same cut-off (compaction, index update, cleanup) in the same
// run. `make bench` runs it with LANCE_BENCH_DOC set to docs/lance.md: the
// figures replace what stands between the lance-pass-bench markers there.
//
//	go test -run '^$' -bench 'BenchmarkLancePass$' -benchtime 1x -timeout 60m ./shared/lance/
func BenchmarkLancePass(b *testing.B) {
	n := 1000
	if s := os.Getenv("LANCE_BENCH_PASS_UPSERTS"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	ctx := context.Background()
	base := b.TempDir()
	var churn struct {
		MS int64 `json:"ms"`
	}
	node(b, &churn, "churn", filepath.Join(base, "lance"), "t", strconv.Itoa(n))
	cutoff := time.Now()
	p := maintenance.Policy{KeepLast: 1, Grace: time.Hour}
	clk := offsetClock{off: lance.NewSource(nil, "").Grace(p.Grace) + time.Minute}
	before, err := lance.Open(testkit.DiskStoreAt(b, base), "lance/t.lance").ListVersions(ctx)
	if err != nil {
		b.Fatal(err)
	}
	rows := []string{
		fmt.Sprintf("dataset: %d single-commit upserts by LanceDB (%.1f s): %d versions", n, float64(churn.MS)/1000, len(before)),
		"| run | time | versions after | requests | keys deleted |",
		"|---|---|---|---|---|",
	}
	pass := func(name string, wrap func(objstore.Store) objstore.Store) time.Duration {
		dir := b.TempDir()
		copyDir(b, base, dir)
		w, err := embedded.Open(ctx, dir, clk, nil, wrap)
		if err != nil {
			b.Fatal(err)
		}
		if err := w.Catalog.RegisterFormat(ctx, "t", "lance/t.lance", p, catalog.FormatLance); err != nil {
			b.Fatal(err)
		}
		cnt := w.Store.(*objstore.Counting)
		c0 := cnt.Counts()
		t0 := time.Now()
		if _, err := w.Maintain(ctx, embedded.Options{}); err != nil {
			b.Fatal(err)
		}
		d := time.Since(t0)
		c := cnt.Counts().Sub(c0)
		after, err := lance.Open(testkit.DiskStoreAt(b, dir), "lance/t.lance").ListVersions(ctx)
		if err != nil {
			b.Fatal(err)
		}
		rows = append(rows, fmt.Sprintf("| %s | %s | %d | %d: %s | %d |", name, d.Round(time.Millisecond), len(after), c.Total(), c, c.DeleteKeys))
		return d
	}
	unpaced := pass("tablekeep pass, local disk (not paced: the embedded default)", nil)
	paced := pass("tablekeep pass, local disk paced at S3's 3,500 keys/s and 5,500 GET/s (every store, before)",
		func(s objstore.Store) objstore.Store { return s3Paced{s} })

	ld := b.TempDir()
	copyDir(b, base, ld)
	var lr struct {
		MS float64 `json:"ms"`
	}
	node(b, &lr, "timed-cleanup", filepath.Join(ld, "lance"), "t", strconv.FormatInt(cutoff.UnixMilli(), 10))
	left, err := lance.Open(testkit.DiskStoreAt(b, ld), "lance/t.lance").ListVersions(ctx)
	if err != nil {
		b.Fatal(err)
	}
	rows = append(rows, fmt.Sprintf("| LanceDB optimize({cleanupOlderThan}) (compaction, index update, cleanup) | %.0f ms | %d | (not countable on disk) | - |", lr.MS, len(left)))
	for _, r := range rows {
		b.Log(r)
	}
	if doc := os.Getenv("LANCE_BENCH_DOC"); doc != "" {
		frag := fmt.Sprintf("Last `make bench` run (`BenchmarkLancePass`, local disk, %s; times indicative on a shared machine, request counts exact):\n\n", time.Now().UTC().Format("2006-01-02 15:04 MST"))
		frag += rows[0] + ".\n\n" + strings.Join(rows[1:], "\n") + "\n"
		if err := spliceMarked(doc, lancePassBegin, lancePassEnd, frag); err != nil {
			b.Fatal(err)
		}
		b.Logf("figures written to %s", doc)
	}
	b.ReportMetric(unpaced.Seconds(), "pass-s")
	b.ReportMetric(paced.Seconds(), "pass-paced-s")
	b.ReportMetric(lr.MS/1000, "lancedb-s")
}

// The markers in docs/lance.md between which BenchmarkLancePass writes.
const (
	lancePassBegin = "<!-- lance-pass-bench -->"
	lancePassEnd   = "<!-- /lance-pass-bench -->"
)

// offsetClock is real time moved by off (past the grace window).
type offsetClock struct{ off time.Duration }

func (c offsetClock) Now() time.Time { return time.Now().Add(c.off) }
func (c offsetClock) Sleep(ctx context.Context, d time.Duration) error {
	return clock.Sleep(ctx, d)
}

var _ clock.Clock = offsetClock{}

// s3Paced is a store that says it takes S3's rates (objstore.Paced), so
// that its callers pace themselves as on S3, with no latency added.
type s3Paced struct{ objstore.Store }

func (s3Paced) Rates() objstore.Rates { return objstore.S3Rates() }
