package bench

import (
	"context"
	"strconv"
	"testing"

	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
)

// BenchmarkCompactionAtS3Latency reports the time of compacting 1,000
// one-row fragments at the s3 latency profile (real waits) for several read
// concurrencies: go test -run '^$' -bench CompactionAtS3Latency ./shared/bench
func BenchmarkCompactionAtS3Latency(b *testing.B) {
	for _, conc := range []int{1, 8, 32} {
		b.Run(strconv.Itoa(conc), func(b *testing.B) {
			for range b.N {
				c := CompactionHeapCases()[0]
				c.Wrap = func(s objstore.Store) objstore.Store { return objstore.WithLatency(s, objstore.S3Profile()) }
				c.Compactor = func(cp *maintenance.Compactor) { cp.ReadConcurrency = conc }
				r, err := CompactionHeap(context.Background(), b.TempDir(), c)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(r.Time.Seconds(), "compact-s")
				b.Logf("read concurrency %d: %v", conc, r)
			}
		})
	}
}
