package bench

import (
	"context"
	"testing"
)

// TestCompactionHeap checks the peak heap of compacting 1,000 one-row
// fragments. The 100 x ~10 MB case (~1 GB written, then compacted), whose
// peak must stay under 512 MB (the Lambda's memory setting follows from
// it), runs in make bench ("Compaction peak heap") and
// BenchmarkCompactionHeap, not in make test. HeapInuse is sampled every 2 ms, so the figure
// is a lower bound of the true peak; the bound is generous (measured: about
// 300-450 MB on two cores with the default 32 MiB groups and 48 MiB read budget).
func TestCompactionHeap(t *testing.T) {
	for _, c := range CompactionHeapCases()[:1] {
		t.Run(c.Label, func(t *testing.T) {
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
