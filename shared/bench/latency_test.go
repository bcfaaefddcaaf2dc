package bench

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
)

// sleepyStore adds S3-like latency per request kind (real sleeps of tens
// of ms: only for the measurement below, never asserted on).
type sleepyStore struct{ objstore.Store }

func (s sleepyStore) Get(ctx context.Context, k string) ([]byte, error) {
	time.Sleep(20 * time.Millisecond)
	return s.Store.Get(ctx, k)
}

func (s sleepyStore) Put(ctx context.Context, k string, b []byte) error {
	time.Sleep(30 * time.Millisecond)
	return s.Store.Put(ctx, k, b)
}

func (s sleepyStore) PutIfAbsent(ctx context.Context, k string, b []byte) error {
	time.Sleep(30 * time.Millisecond)
	return s.Store.PutIfAbsent(ctx, k, b)
}

func (s sleepyStore) List(ctx context.Context, o objstore.ListOptions) (objstore.ListPage, error) {
	time.Sleep(40 * time.Millisecond)
	return s.Store.List(ctx, o)
}

// TestCompactionAtS3Latency logs the time of compacting 1,000 one-row
// fragments at S3-like latency for several read concurrencies
// (TABLEKEEP_LATENCY_CONC=1,8,32; skipped unless set: it sleeps for real).
func TestCompactionAtS3Latency(t *testing.T) {
	spec := os.Getenv("TABLEKEEP_LATENCY_CONC")
	if spec == "" {
		t.Skip("set TABLEKEEP_LATENCY_CONC=1,8,32")
	}
	for _, f := range strings.Split(spec, ",") {
		conc, err := strconv.Atoi(f)
		if err != nil {
			t.Fatal(err)
		}
		c := CompactionHeapCases()[0]
		c.Wrap = func(s objstore.Store) objstore.Store { return sleepyStore{s} }
		c.Compactor = func(cp *maintenance.Compactor) { cp.ReadConcurrency = conc }
		r, err := CompactionHeap(context.Background(), t.TempDir(), c)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("read concurrency %d: %v", conc, r)
	}
}
