package maintenance_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/internal/fakeclock"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/queue"
	"github.com/tablekeep/tablekeep/shared/table"
)

type committedOp struct {
	version uint64
	name    string
	val     string // "" for a delete
}

// modelAt replays committed ops in version order up to v.
func modelAt(ops []committedOp, v uint64) map[string]string {
	m := map[string]string{}
	for _, op := range ops {
		if op.version > v {
			break
		}
		if op.val == "" {
			delete(m, op.name)
		} else {
			m[op.name] = op.val
		}
	}
	return m
}

// TestConcurrentWritersDuringMaintenance: writers upsert and delete from
// goroutines while compaction (Runner.MaintainTable) and cleaners (Drain)
// run, in rounds. After each round the latest scan equals the model
// replayed in commit-version order, and every retained version reads
// exactly the model at that version.
func TestConcurrentWritersDuringMaintenance(t *testing.T) {
	for _, format := range []uint64{2, 3} {
		t.Run(fmt.Sprintf("format=%d", format), func(t *testing.T) { concurrentWritersDuringMaintenance(t, format) })
	}
}

// concurrentWritersDuringMaintenance: format 3 with a 60-byte inline
// bound, so that inline rows, writer flushes, compaction flushes and
// files all race the maintenance runs.
func concurrentWritersDuringMaintenance(t *testing.T, format uint64) {
	ctx := context.Background()
	p := testPolicy()
	p.KeepLast = 10
	p.TargetRows = 4
	p.RangeVersions = 15
	p.MaxKeysPerRun = 20
	e := newEnv(t, t.TempDir(), p, queue.EmbeddedOptions{MaxReceives: 5})
	// Objects written here carry fake-clock times, so the grace window
	// protects what writers hold exactly as it would in real time.
	ts := fakeclock.NewStore(e.disk, e.clock)
	e.disk = ts
	e.faulty = objstore.NewFaulty(ts)
	e.runner.Store, e.clean.Store = e.faulty, e.faulty
	if format == 3 {
		e.format, e.inlineMax = 3, 60
	}
	e.create(t)
	// Each maintenance cycle advances the clock by just over grace/2.
	step := p.Grace/2 + time.Minute
	var slowErrs atomic.Int64
	// Writers never outlive the grace window: a clock step waits for the
	// ops in flight (TestSlowWriterCommitBelowFloor covers one that does).
	var inOp sync.RWMutex

	const writers, perRound, rounds, keySpace = 3, 25, 3, 12
	handles := make([]*table.Table, writers)
	for i := range handles {
		handles[i] = e.open(t)
	}
	var mu sync.Mutex
	var ops []committedOp
	var compactions, dropped, cleaned int
	for round := range rounds {
		var wg, wwg sync.WaitGroup
		errs := make(chan error, writers+1)
		writersDone := make(chan struct{})
		for w := range writers {
			wwg.Add(1)
			go func() {
				defer wwg.Done()
				h := handles[w]
				rng := rand.New(rand.NewPCG(uint64(round), uint64(w)))
				for i := range perRound {
					inOp.RLock()
					start := e.clock.Now()
					// An op spanning two clock steps outlived the grace
					// window: it may fail (stale read, pruned base).
					slow := func(err error) bool {
						if e.clock.Now().Sub(start) > step {
							slowErrs.Add(1)
							return true
						}
						return false
					}
					name := fmt.Sprintf("k%02d", rng.IntN(keySpace))
					if rng.IntN(3) == 0 {
						res, err := h.Delete(ctx, name)
						inOp.RUnlock()
						if err != nil && slow(err) {
							continue
						}
						if err != nil {
							errs <- fmt.Errorf("round %d writer %d delete: %w", round, w, err)
							return
						}
						if res.RowsDeleted > 0 {
							mu.Lock()
							ops = append(ops, committedOp{res.Version, name, ""})
							mu.Unlock()
						}
						continue
					}
					val := fmt.Sprintf("r%d-w%d-%d", round, w, i)
					rec := kv(name, val)
					res, err := h.Upsert(ctx, rec)
					rec.Release()
					inOp.RUnlock()
					if err != nil && slow(err) {
						continue
					}
					if err != nil {
						errs <- fmt.Errorf("round %d writer %d upsert: %w", round, w, err)
						return
					}
					mu.Lock()
					ops = append(ops, committedOp{res.Version, name, val})
					mu.Unlock()
				}
			}()
		}
		go func() { wwg.Wait(); close(writersDone) }()
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Maintain while the writers run (at least twice), then once more.
			for cycle := 0; ; cycle++ {
				if cycle >= 2 {
					select {
					case <-writersDone:
						return
					default:
					}
				}
				inOp.Lock()
				e.clock.Advance(step)
				inOp.Unlock()
				tr, err := e.runner.MaintainTable(ctx, e.ref)
				if err != nil {
					errs <- fmt.Errorf("round %d maintain: %w", round, err)
					return
				}
				mu.Lock()
				compactions += tr.Compacted.Committed
				dropped += tr.Compacted.Dropped
				mu.Unlock()
				st, err := queue.Drain(ctx, e.q, e.clean.Handle, queue.DrainOptions{Logger: discard})
				if err != nil || st.DeadLettered > 0 || st.Failed > 0 {
					errs <- fmt.Errorf("round %d drain: %+v %v", round, st, err)
					return
				}
				mu.Lock()
				cleaned += st.Succeeded
				mu.Unlock()
			}
		}()
		wg.Wait()
		<-writersDone
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		sort.Slice(ops, func(i, j int) bool { return ops[i].version < ops[j].version })
		for i := 1; i < len(ops); i++ {
			if ops[i].version == ops[i-1].version {
				vs, _ := e.open(t).Versions(ctx)
				fl, _ := e.open(t).Floor(ctx)
				t.Fatalf("two commits claim version %d: %+v and %+v (floor %d, stored %d..%d)", ops[i].version, ops[i-1], ops[i], fl, vs[0].Version, vs[len(vs)-1].Version)
			}
		}
		tb := e.open(t)
		latest := tb.Cached().Version
		if err := diffRows(latestRows(t, tb), modelAt(ops, latest)); err != nil {
			t.Fatalf("round %d: latest v%d: %v", round, latest, err)
		}
		want := map[uint64]map[string]string{}
		vs, err := tb.Versions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range vs {
			want[v.Version] = modelAt(ops, v.Version)
		}
		checkRetained(t, tb, want)
		for _, h := range handles {
			if err := diffRows(latestRows(t, h), modelAt(ops, latest)); err != nil {
				t.Fatalf("round %d: writer handle: %v", round, err)
			}
		}
	}
	if compactions+dropped == 0 || cleaned == 0 {
		t.Fatalf("maintenance did nothing: %d compactions, %d messages cleaned", compactions, cleaned)
	}
	t.Logf("%d commits, %d compaction commits, %d groups dropped, %d cleanup messages, %d ops failed after outliving grace",
		len(ops), compactions, dropped, cleaned, slowErrs.Load())
}
