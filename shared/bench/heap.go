package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tablekeep/tablekeep/shared/internal/fakeclock"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/table"
)

// HeapCase sizes one compaction whose peak heap is measured: Fragments
// appends of Rows rows each, every row carrying PayloadBytes of random
// text (so a fragment stores about Rows x PayloadBytes x 0.75 bytes).
type HeapCase struct {
	Label        string
	Fragments    int
	Rows         int
	PayloadBytes int
	// Wrap, if set, wraps the store compaction runs on (a latency profile).
	Wrap func(objstore.Store) objstore.Store
	// Compactor, if set, configures the compactor (read limits, planner).
	Compactor func(*maintenance.Compactor)
}

// CompactionHeapCases are the two cases: 1,000 one-row fragments,
// and 100 fragments of about 10 MB.
func CompactionHeapCases() []HeapCase {
	return []HeapCase{
		{Label: "1,000 one-row fragments", Fragments: 1000, Rows: 1, PayloadBytes: 32},
		{Label: "100 x 10 MB fragments", Fragments: 100, Rows: 10_000, PayloadBytes: 1400},
	}
}

// HeapResult is one compaction measured for time, requests and peak heap.
type HeapResult struct {
	Case          HeapCase
	FragmentBytes uint64 // mean stored size of an input fragment
	Res           maintenance.CompactionResult
	Reqs          Reqs
	Time          time.Duration
	// BaseHeap and PeakHeap are runtime.MemStats.HeapInuse before the run
	// (after a GC) and the largest value sampled (every 2 ms) during it.
	BaseHeap, PeakHeap uint64
}

func (r HeapResult) String() string {
	return fmt.Sprintf("%s: %d fragments of %.1f MB -> %d committed groups, %d output fragments, %s, peak heap in use %.0f MB (base %.0f MB), requests %v",
		r.Case.Label, r.Case.Fragments, float64(r.FragmentBytes)/1e6, r.Res.Committed, r.Res.OutputFrags, r.Time.Round(time.Millisecond),
		float64(r.PeakHeap)/(1<<20), float64(r.BaseHeap)/(1<<20), r.Reqs.C)
}

// CompactionHeap writes the case's fragments into a fresh table under dir
// and compacts it once with the default policy, sampling the heap.
func CompactionHeap(ctx context.Context, dir string, c HeapCase) (HeapResult, error) {
	res := HeapResult{Case: c}
	if err := fresh(dir); err != nil {
		return res, err
	}
	disk, err := objstore.NewDisk(dir)
	if err != nil {
		return res, err
	}
	opts := table.Options{Clock: fakeclock.NoSleep(nil), Format: 2} // one data file per append: the case's fragments
	t, err := table.Create(ctx, disk, "heap", Schema, "name", opts)
	if err != nil {
		return res, err
	}
	// One batch, appended Fragments times: generating it once keeps the
	// setup fast; compaction reads every fragment all the same.
	rec := payloadRows(c.Rows, c.PayloadBytes)
	for range c.Fragments {
		if _, err := t.Append(ctx, rec); err != nil {
			rec.Release()
			return res, err
		}
	}
	rec.Release()
	var inner objstore.Store = disk
	if c.Wrap != nil {
		inner = c.Wrap(disk)
	}
	cnt := objstore.NewCounting(inner)
	ct, err := table.Open(ctx, cnt, "heap", opts)
	if err != nil {
		return res, err
	}
	for _, f := range ct.Cached().Fragments {
		res.FragmentBytes += f.Bytes
	}
	if n := len(ct.Cached().Fragments); n > 0 {
		res.FragmentBytes /= uint64(n)
	}
	comp := maintenance.NewCompactor(nil, nil)
	if c.Compactor != nil {
		c.Compactor(comp)
	}
	stopHeap := sampleHeap()
	base, t0 := cnt.Counts(), time.Now()
	res.Res, err = comp.Run(ctx, ct, maintenance.DefaultPolicy())
	res.Time, res.Reqs = time.Since(t0), Reqs{C: cnt.Counts().Sub(base), N: 1}
	res.BaseHeap, res.PeakHeap = stopHeap()
	return res, err
}

// sampleHeap collects garbage, reads the heap in use (the base) and samples
// it every 2 ms until the returned stop, which gives the base and the peak
// (slightly under the true peak).
func sampleHeap() (stop func() (base, peak uint64)) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	done := make(chan struct{})
	var wg sync.WaitGroup
	var peak uint64
	wg.Go(func() {
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapInuse)
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	})
	return func() (uint64, uint64) {
		close(done)
		wg.Wait()
		return base, peak
	}
}

// payloadRows builds n rows whose uri is payload bytes of random text.
func payloadRows(n, payload int) arrow.RecordBatch {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_"
	r := rand.New(rand.NewPCG(1, 2))
	b := array.NewRecordBuilder(memory.DefaultAllocator, Schema)
	defer b.Release()
	buf := make([]byte, payload)
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range n {
		b.Field(0).(*array.StringBuilder).Append(fmt.Sprintf("row-%08d", i))
		for j := range buf {
			buf[j] = alphabet[r.IntN(len(alphabet))]
		}
		b.Field(1).(*array.StringBuilder).Append(string(buf))
		b.Field(2).(*array.TimestampBuilder).Append(arrow.Timestamp(at.UnixMicro()))
	}
	return b.NewRecordBatch()
}
