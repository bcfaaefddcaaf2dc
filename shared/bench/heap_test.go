package bench

import (
	"context"
	"os"
	"testing"
)

// heavyHeapEnv runs the 100 x 10 MB case in TestCompactionHeap (about a
// minute on two cores: ~1 GB written, then compacted); make bench and
// BenchmarkCompactionHeap run it always.
const heavyHeapEnv = "TABLEKEEP_HEAP_LARGE"

// TestCompactionHeap logs the peak heap of compacting 1,000 one-row
// fragments and (with TABLEKEEP_HEAP_LARGE=1) of 100 fragments of ~10 MB,
// whose peak must stay under 512 MB (the bound; the Lambda's memory
// setting follows from it). HeapInuse is sampled every 2 ms, so the figure
// is a lower bound of the true peak; the bound is generous (measured: about
// 300-450 MB on two cores with the default 32 MiB groups and 48 MiB read budget).
func TestCompactionHeap(t *testing.T) {
	for _, c := range CompactionHeapCases() {
		t.Run(c.Label, func(t *testing.T) {
			if c.Fragments*c.Rows*c.PayloadBytes > 100<<20 && os.Getenv(heavyHeapEnv) == "" {
				t.Skip("large case: set " + heavyHeapEnv + "=1 (or run make bench)")
			}
			r, err := CompactionHeap(context.Background(), t.TempDir(), c)
			if err != nil {
				t.Fatal(err)
			}
			t.Log(r)
			// The last fragment may be left alone (a lone candidate).
			if r.Res.Committed == 0 || r.Res.InputFrags < c.Fragments-1 {
				t.Fatalf("compaction did not take every fragment: %+v", r.Res)
			}
			if r.PeakHeap > 512<<20 {
				t.Fatalf("peak heap in use %d MB, over 512 MB", r.PeakHeap>>20)
			}
		})
	}
}

// BenchmarkCompactionHeap reports time and peak heap of both cases.
func BenchmarkCompactionHeap(b *testing.B) {
	for _, c := range CompactionHeapCases() {
		b.Run(c.Label, func(b *testing.B) {
			for range b.N {
				r, err := CompactionHeap(context.Background(), b.TempDir(), c)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(r.PeakHeap)/(1<<20), "peak-heap-MB")
				b.ReportMetric(r.Time.Seconds(), "compact-s")
				b.Logf("%v", r)
			}
		})
	}
}
