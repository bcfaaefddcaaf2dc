package maintenance_test

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/queue"
	"github.com/tablekeep/tablekeep/shared/table"
)

// inflightStore records the most GET requests in flight at once among those
// whose key match accepts. Until that number reached need, such a request
// waits (at most gateWait) for others to join it: so a caller that sends
// requests concurrently is seen doing so however fast the store is, and a
// serial caller is not (each of its requests waits gateWait alone).
type inflightStore struct {
	objstore.Store
	match func(key string) bool
	need  int

	mu       sync.Mutex
	cond     *sync.Cond
	cur, max int
	open     bool
}

const gateWait = 2 * time.Second // only a serial caller ever waits this long

func newInflight(s objstore.Store, match string, need int) *inflightStore {
	return newInflightFunc(s, func(k string) bool { return strings.Contains(k, match) }, need)
}

func newInflightFunc(s objstore.Store, match func(string) bool, need int) *inflightStore {
	st := &inflightStore{Store: s, match: match, need: need}
	st.cond = sync.NewCond(&st.mu)
	return st
}

func (s *inflightStore) enter(key string) func() {
	if !s.match(key) {
		return func() {}
	}
	s.mu.Lock()
	s.cur++
	s.max = max(s.max, s.cur)
	if s.cur >= s.need {
		s.open = true
		s.cond.Broadcast()
	}
	if !s.open {
		timer := time.AfterFunc(gateWait, func() {
			s.mu.Lock()
			s.open = true
			s.cond.Broadcast()
			s.mu.Unlock()
		})
		for !s.open {
			s.cond.Wait()
		}
		timer.Stop()
	}
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		s.cur--
		s.mu.Unlock()
	}
}

func (s *inflightStore) peak() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.max
}

func (s *inflightStore) Get(ctx context.Context, key string) ([]byte, error) {
	defer s.enter(key)()
	return s.Store.Get(ctx, key)
}

// fragmentShape is what a fragment holds, without its random file name.
type fragmentShape struct {
	Rows, Bytes, Deleted uint64
	MinKey, MaxKey       string
}

func shapes(m *table.Manifest) []fragmentShape {
	var out []fragmentShape
	for _, f := range m.Fragments {
		s := fragmentShape{Rows: f.Rows, Bytes: f.Bytes, MinKey: string(f.MinKey), MaxKey: string(f.MaxKey)}
		if f.Deletion != nil {
			s.Deleted = f.Deletion.Rows
		}
		out = append(out, s)
	}
	return out
}

// compactionTable writes 40 one-row fragments and a six-row fragment with
// a deletion vector, so that compaction reads several groups of several
// fragments and a vector.
func compactionTable(t *testing.T) *env {
	t.Helper()
	ctx := context.Background()
	e := newEnv(t, t.TempDir(), testPolicy(), queue.EmbeddedOptions{})
	tb := e.create(t)
	rec := kv("a0", "x", "a1", "x", "a2", "x", "a3", "x", "a4", "x", "a5", "x")
	if _, err := tb.Upsert(ctx, rec); err != nil {
		t.Fatal(err)
	}
	rec.Release()
	if _, err := tb.Delete(ctx, "a2"); err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		upsert(t, tb, fmt.Sprintf("k%02d", i), fmt.Sprint("v", i))
	}
	return e
}

type compactionRun struct {
	res    maintenance.CompactionResult
	counts objstore.Counts
	shapes []fragmentShape
	rows   map[string]string
	peak   int // data GETs in flight at once
}

func runCompaction(t *testing.T, src string, concurrency int, p maintenance.Policy) compactionRun {
	t.Helper()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "c")
	copyDir(t, src, dir)
	e := newEnv(t, dir, p, queue.EmbeddedOptions{})
	need := 2
	if concurrency == 1 {
		need = 1 // a serial run never has two in flight: do not make it wait
	}
	in := newInflight(e.disk, "/data/", need)
	cs := objstore.NewCounting(in)
	tb, err := table.Open(ctx, cs, e.ref.Root, e.opts())
	if err != nil {
		t.Fatal(err)
	}
	cs.Reset()
	c := maintenance.NewCompactor(nil, e.clock)
	c.ReadConcurrency = concurrency
	res, err := c.Run(ctx, tb, p)
	if err != nil {
		t.Fatal(err)
	}
	counts := cs.Counts()
	m, err := tb.Refresh(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return compactionRun{res: res, counts: counts, shapes: shapes(m), rows: latestRows(t, tb), peak: in.peak()}
}

// TestCompactionParallelReadsSameResult compacts the same table with
// serial reads and with parallel reads (and the read-ahead pipeline): the
// outputs (rows, fragments), the result and the requests of each kind are
// the same; the parallel run had several data GETs in flight, never more
// than its limit.
func TestCompactionParallelReadsSameResult(t *testing.T) {
	e := compactionTable(t)
	p := testPolicy()
	p.TargetRows = 8 // several groups: the pipeline reads one ahead
	serial := runCompaction(t, e.dir, 1, p)
	const limit = 4
	par := runCompaction(t, e.dir, limit, p)
	if serial.res.Committed < 3 || serial.res.InputFrags < 20 {
		t.Fatalf("too little compaction to compare: %+v", serial.res)
	}
	if fmt.Sprint(serial.res) != fmt.Sprint(par.res) {
		t.Fatalf("results differ:\nserial   %+v\nparallel %+v", serial.res, par.res)
	}
	if serial.counts != par.counts {
		t.Fatalf("request counts differ: serial %+v, parallel %+v", serial.counts, par.counts)
	}
	if !slices.Equal(serial.shapes, par.shapes) {
		t.Fatalf("fragments differ:\nserial   %+v\nparallel %+v", serial.shapes, par.shapes)
	}
	if err := diffRows(par.rows, serial.rows); err != nil {
		t.Fatal(err)
	}
	if serial.peak != 1 {
		t.Fatalf("serial run had %d data requests in flight", serial.peak)
	}
	if par.peak < 2 || par.peak > limit {
		t.Fatalf("parallel run had at most %d data requests in flight, want 2..%d", par.peak, limit)
	}
	t.Logf("requests %+v; data requests in flight: serial 1, parallel %d (limit %d)", par.counts, par.peak, limit)
}

type sweepRun struct {
	res    maintenance.SweepResult
	counts objstore.Counts
	peak   int // change-record GETs in flight at once
	left   map[string]int64
}

// TestSweepParallelSameResult sweeps the same table (a history with a tag,
// maintained so that many files are unreferenced) serially and in
// parallel: same result, same deletions, same requests of each kind; the
// parallel sweep had several change records in flight, never more than its
// limit.
func TestSweepParallelSameResult(t *testing.T) {
	p := crashPolicy()
	h := buildHistory(t, p)
	// Compact and raise the floor (the ranges are not drained): the files
	// of versions below the floor are left for the sweep.
	pending := h.withCleanupPending(t, p)
	run := func(concurrency int, dryRun bool) sweepRun {
		t.Helper()
		dir := filepath.Join(t.TempDir(), "s")
		copyDir(t, pending.dir, dir)
		e := newEnv(t, dir, p, queue.EmbeddedOptions{})
		need := 2
		if concurrency == 1 {
			need = 1
		}
		in := newInflight(e.disk, "/_changes/", need)
		cs := objstore.NewCounting(in)
		ctx := maintenance.WithConcurrency(context.Background(), concurrency)
		tb, err := table.Open(ctx, cs, e.ref.Root, e.opts())
		if err != nil {
			t.Fatal(err)
		}
		cs.Reset()
		res, err := maintenance.Sweep(ctx, tb, p, time.Now().Add(72*time.Hour), 0, dryRun)
		if err != nil {
			t.Fatal(err)
		}
		return sweepRun{res: res, counts: cs.Counts(), peak: in.peak(), left: listing(t, e.disk, e.ref.Root)}
	}
	const limit = 4
	for _, dry := range []bool{true, false} {
		serial, par := run(1, dry), run(limit, dry)
		if serial.res.Listed == 0 || serial.res.Referenced == 0 || (dry && len(serial.res.Planned) == 0) || (!dry && serial.res.Deleted == 0) {
			t.Fatalf("dry run %v: too little to sweep: %+v", dry, serial.res)
		}
		if fmt.Sprint(serial.res) != fmt.Sprint(par.res) {
			t.Fatalf("dry run %v: results differ:\nserial   %+v\nparallel %+v", dry, serial.res, par.res)
		}
		if serial.counts != par.counts {
			t.Fatalf("dry run %v: request counts differ: serial %+v, parallel %+v", dry, serial.counts, par.counts)
		}
		if err := sameListing(serial.left, par.left); err != nil {
			t.Fatalf("dry run %v: files left differ: %v", dry, err)
		}
		if serial.peak != 1 || par.peak < 2 || par.peak > limit {
			t.Fatalf("dry run %v: change records in flight: serial %d, parallel %d, want 1 and 2..%d", dry, serial.peak, par.peak, limit)
		}
		t.Logf("dry run %v: requests %+v; change records in flight: parallel %d (limit %d)", dry, par.counts, par.peak, limit)
	}
}

// TestPruneRepairParallelSameResult removes change records of a history
// and runs maintenance serially and in parallel: the same records are
// repaired, the same ranges enqueued, with the same requests of each kind;
// the parallel run read the manifests of several repairs at once, never
// more than its limit.
func TestPruneRepairParallelSameResult(t *testing.T) {
	p := crashPolicy()
	h := buildHistory(t, p)
	const lo, hi = 3, 10 // change records removed
	manifest := map[string]bool{}
	for v := uint64(lo - 1); v <= hi; v++ {
		manifest[fmt.Sprintf("_versions/%020d.manifest", math.MaxUint64-v)] = true
	}
	type pruneRun struct {
		repaired int
		ranges   []maintenance.RangeMessage
		counts   objstore.Counts
		peak     int
	}
	run := func(concurrency int) pruneRun {
		t.Helper()
		dir := filepath.Join(t.TempDir(), "p")
		copyDir(t, h.dir, dir)
		e := newEnv(t, dir, p, queue.EmbeddedOptions{})
		var del []string
		for v := uint64(lo); v <= hi; v++ {
			del = append(del, e.ref.Root+table.ChangeKey(v))
		}
		if err := e.disk.Delete(context.Background(), del); err != nil {
			t.Fatal(err)
		}
		need := 2
		if concurrency == 1 {
			need = 1
		}
		in := newInflightFunc(e.disk, func(k string) bool { return manifest[strings.TrimPrefix(k, e.ref.Root)] }, need)
		cs := objstore.NewCounting(in)
		e.runner.Store = cs
		rec := &bodies{}
		e.runner.Queue = rec
		e.clock.Advance(2 * time.Hour)
		ctx := maintenance.WithConcurrency(context.Background(), concurrency)
		tr, err := e.runner.MaintainTable(ctx, e.ref)
		if err != nil {
			t.Fatal(err)
		}
		return pruneRun{repaired: tr.Prune.Repaired, ranges: tr.Prune.Ranges, counts: cs.Counts(), peak: in.peak()}
	}
	const limit = 4
	serial, par := run(1), run(limit)
	if serial.repaired < hi-lo || len(serial.ranges) == 0 {
		t.Fatalf("too little repaired: %d records, %d ranges", serial.repaired, len(serial.ranges))
	}
	if serial.repaired != par.repaired || fmt.Sprint(serial.ranges) != fmt.Sprint(par.ranges) {
		t.Fatalf("plans differ: serial %d repaired %v, parallel %d repaired %v", serial.repaired, serial.ranges, par.repaired, par.ranges)
	}
	if serial.counts != par.counts {
		t.Fatalf("request counts differ: serial %+v, parallel %+v", serial.counts, par.counts)
	}
	if serial.peak != 1 || par.peak < 2 || par.peak > limit {
		t.Fatalf("manifest reads of repairs in flight: serial %d, parallel %d, want 1 and 2..%d", serial.peak, par.peak, limit)
	}
	t.Logf("%d change records repaired; requests %+v; repair reads in flight: parallel %d (limit %d)", par.repaired, par.counts, par.peak, limit)
}
