package table

// Benchmarks for the table format. The primary figures are object-store
// requests per operation by kind (LIST, GET, PUT, HEAD, DELETE), counted
// through objstore.Counting; time per operation is secondary (local disk
// time by default; TABLEKEEP_BENCH_S3=1 runs on the local S3 endpoint).
// docs/benchmarks.md records the figures and the command that produced them:
//
//	go test -run '^$' -bench BenchmarkTableFormat -benchtime 1s -timeout 30m ./shared/table/
//
// Histories are built by real commits (one-row upserts) once per run, in a
// temporary directory shared by the sub-benchmarks, and only when a selected
// sub-benchmark needs them. Sub-benchmarks run in the order written: the
// open benchmarks run before the commit benchmarks add versions to the same
// histories.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/tablekeep/tablekeep/shared/internal/fakeclock"
	"github.com/tablekeep/tablekeep/shared/internal/testenv"
	"github.com/tablekeep/tablekeep/shared/internal/testkit"
	"github.com/tablekeep/tablekeep/shared/objstore"
)

// benchKeySpace is how many distinct names the history builder upserts:
// a history of n versions has min(n-1, benchKeySpace) rows, one per fragment
// (an upsert of an existing name drops the replaced one-row fragment).
const benchKeySpace = 1000

// benchFixture holds the tables sub-benchmarks share, built on first use.
type benchFixture struct {
	store  objstore.Store
	tables map[string]string // fixture name -> table root
	built  map[string]time.Duration
	seq    int // makes names unique across benchmark rounds
}

// next returns a number no earlier call returned.
func (fx *benchFixture) next() int { fx.seq++; return fx.seq }

// newBenchFixture stores tables on local disk, or on the local S3 endpoint
// (versitygw, see shared/internal/testenv) when TABLEKEEP_BENCH_S3=1.
func newBenchFixture(b *testing.B) *benchFixture {
	var st objstore.Store
	if os.Getenv("TABLEKEEP_BENCH_S3") == "1" {
		st = testenv.S3Store(b)
	} else {
		disk, err := objstore.NewDisk(b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		st = disk
	}
	return &benchFixture{store: st, tables: map[string]string{}, built: map[string]time.Duration{}}
}

func benchName(i int) string { return fmt.Sprintf("rollout-%06d", i) }

func benchRow(name string, i int) arrow.RecordBatch {
	return regBatch(row{Name: name, URI: "s3://bucket/rollouts/" + name, At: int64(1_700_000_000_000_000 + i)})
}

// table returns the root of fixture name, building it with build on first use.
func (fx *benchFixture) table(b *testing.B, name string, build func(ctx context.Context, tbl *Table) error) string {
	b.Helper()
	if root, ok := fx.tables[name]; ok {
		return root
	}
	ctx := context.Background()
	start := time.Now()
	tbl, err := Create(ctx, fx.store, name, regSchema, "name", Options{Clock: fakeclock.NoSleep(nil)})
	if err != nil {
		b.Fatal(err)
	}
	if err := build(ctx, tbl); err != nil {
		b.Fatalf("build %s: %v", name, err)
	}
	fx.built[name] = time.Since(start)
	if fx.built[name] > time.Second {
		b.Logf("fixture %s: built in %s (version %d, %d fragments)", name, fx.built[name].Round(time.Millisecond),
			tbl.Cached().Version, len(tbl.Cached().Fragments))
	}
	fx.tables[name] = tbl.Root()
	return tbl.Root()
}

// history is a registry table with exactly versions versions: Create, then
// versions-1 one-row upserts over benchKeySpace names. Histories of 20,000
// versions are built once and shared; smaller ones are built afresh for
// each caller that asks for fresh, so that a benchmark round that commits
// starts from exactly versions versions.
func (fx *benchFixture) history(b *testing.B, versions int, fresh bool) string {
	name := fmt.Sprintf("hist%d", versions)
	if fresh && versions < 20000 {
		name = fmt.Sprintf("hist%d-%d", versions, fx.next())
	}
	return fx.table(b, name, func(ctx context.Context, tbl *Table) error {
		for i := 0; i < versions-1; i++ {
			if _, err := tbl.Upsert(ctx, benchRow(benchName(i%benchKeySpace), i)); err != nil {
				return err
			}
		}
		return nil
	})
}

// oneFragment is a 1,000-row table written by one append: one fragment.
func (fx *benchFixture) oneFragment(b *testing.B) string {
	return fx.table(b, "frags1", func(ctx context.Context, tbl *Table) error {
		rows := make([]row, 1000)
		for i := range rows {
			rows[i] = row{Name: benchName(i), URI: "s3://bucket/rollouts/" + benchName(i), At: int64(i)}
		}
		_, err := tbl.Append(ctx, regBatch(rows...))
		return err
	})
}

// manyFragments is a 1,000-row table written by 1,000 one-row upserts:
// 1,000 fragments, never compacted (the seed's registry shape).
func (fx *benchFixture) manyFragments(b *testing.B) string {
	return fx.table(b, "frags1000", func(ctx context.Context, tbl *Table) error {
		for i := range 1000 {
			if _, err := tbl.Upsert(ctx, benchRow(benchName(i), i)); err != nil {
				return err
			}
		}
		return nil
	})
}

// reportCounts reports requests per operation by kind.
func reportCounts(b *testing.B, c objstore.Counts, ops int) {
	per := func(n int64) float64 { return float64(n) / float64(ops) }
	b.ReportMetric(per(c.List), "LIST/op")
	b.ReportMetric(per(c.Get), "GET/op")
	b.ReportMetric(per(c.Put), "PUT/op")
	b.ReportMetric(per(c.Head), "HEAD/op")
	b.ReportMetric(per(c.DeleteRequests), "DELETE/op")
}

func latestManifestBytes(b *testing.B, st objstore.Store, root string, v uint64) int64 {
	info, err := st.Head(context.Background(), root+manifestKey(v))
	if err != nil {
		b.Fatal(err)
	}
	return info.Size
}

func BenchmarkTableFormat(b *testing.B) {
	fx := newBenchFixture(b)

	// Opening the latest version costs one LIST (max-keys 1: the inverted
	// names put the newest manifest first) and one GET, at any version count.
	for _, versions := range []int{10, 1000, 20000} {
		b.Run(fmt.Sprintf("Open/versions=%d", versions), func(b *testing.B) {
			root := fx.history(b, versions, false)
			timed := &timedStore{Store: fx.store}
			c := objstore.NewCounting(timed)
			ctx := context.Background()
			b.ResetTimer()
			var tbl *Table
			for range b.N {
				var err error
				if tbl, err = Open(ctx, c, root, Options{}); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			got := c.Counts()
			if got.List != int64(b.N) || got.Get != int64(b.N) || got.Total() != 2*int64(b.N) {
				b.Fatalf("open at %d versions: %s for %d opens, want 1 LIST + 1 GET each", versions, got, b.N)
			}
			reportCounts(b, got, b.N)
			b.ReportMetric(float64(timed.list.Microseconds())/float64(b.N), "list-us/op")
			b.ReportMetric(float64(tbl.Cached().Version), "versions")
			b.ReportMetric(float64(latestManifestBytes(b, fx.store, root, tbl.Cached().Version)), "manifest-bytes")
		})
	}

	// One commit from a handle whose cached version is the latest (a single
	// writer): no LIST and no manifest GET. An append writes the data file,
	// the manifest (put-if-absent) and the change record; an upsert of an
	// existing name also GETs the one fragment whose key bounds hold it.
	for _, kind := range []string{"append", "upsert"} {
		for _, versions := range []int{10, 20000} {
			b.Run(fmt.Sprintf("Commit/%s/versions=%d", kind, versions), func(b *testing.B) {
				root := fx.history(b, versions, true)
				c := objstore.NewCounting(fx.store)
				ctx := context.Background()
				tbl, err := Open(ctx, c, root, Options{Clock: fakeclock.NoSleep(nil)})
				if err != nil {
					b.Fatal(err)
				}
				startVersion := tbl.Cached().Version
				keys := min(versions-1, benchKeySpace)
				c.Reset()
				b.ResetTimer()
				for i := range b.N {
					var rec arrow.RecordBatch
					if kind == "append" {
						rec = benchRow(fmt.Sprintf("append-%09d", fx.next()), i)
					} else {
						rec = benchRow(benchName(i%keys), i)
					}
					var res *CommitResult
					if kind == "append" {
						res, err = tbl.Append(ctx, rec)
					} else {
						res, err = tbl.Upsert(ctx, rec)
					}
					rec.Release()
					if err != nil {
						b.Fatal(err)
					}
					if res.Attempts != 1 {
						b.Fatalf("commit took %d attempts", res.Attempts)
					}
				}
				b.StopTimer()
				reportCounts(b, c.Counts(), b.N)
				b.ReportMetric(float64(startVersion), "versions")
			})
		}
	}

	// The seed's POST /rollouts on a 20,000-version registry: open latest,
	// look the new name up (absent), upsert it. And GET /rollouts/{name}:
	// open latest, look an existing name up.
	b.Run("RegistryCreate/versions=20000", func(b *testing.B) {
		root := fx.history(b, 20000, false)
		c := objstore.NewCounting(fx.store)
		ctx := context.Background()
		tbl, err := Open(ctx, c, root, Options{Clock: fakeclock.NoSleep(nil)})
		if err != nil {
			b.Fatal(err)
		}
		c.Reset()
		b.ResetTimer()
		for i := range b.N {
			snap, err := tbl.Latest(ctx)
			if err != nil {
				b.Fatal(err)
			}
			name := fmt.Sprintf("created-%09d", fx.next())
			if _, err := snap.Get(ctx, name); !errors.Is(err, ErrNotFound) {
				b.Fatalf("get new name: %v", err)
			}
			rec := benchRow(name, i)
			_, err = tbl.Upsert(ctx, rec)
			rec.Release()
			if err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		reportCounts(b, c.Counts(), b.N)
	})
	b.Run("RegistryLookup/versions=20000", func(b *testing.B) {
		root := fx.history(b, 20000, false)
		c := objstore.NewCounting(fx.store)
		ctx := context.Background()
		tbl, err := Open(ctx, c, root, Options{})
		if err != nil {
			b.Fatal(err)
		}
		c.Reset()
		b.ResetTimer()
		for i := range b.N {
			snap, err := tbl.Latest(ctx)
			if err != nil {
				b.Fatal(err)
			}
			rec, err := snap.Get(ctx, benchName(i%benchKeySpace))
			if err != nil {
				b.Fatal(err)
			}
			rec.Release()
		}
		b.StopTimer()
		reportCounts(b, c.Counts(), b.N)
	})

	// 1,000 upserts of new names into a fresh registry table, each timed:
	// the table grows by one fragment per upsert (never compacted), as the
	// seed's registry did. One op is the whole run of 1,000 upserts. On
	// disk, file-creation latency (shared with whatever else the machine
	// runs) dominates; the in-memory store isolates the format's own cost.
	for _, kind := range []string{"disk", "memory"} {
		b.Run("UpsertGrowth/upserts=1000/store="+kind, func(b *testing.B) {
			const n = 1000
			store := fx.store
			if kind == "memory" {
				store = newMemStore()
			}
			ctx := context.Background()
			var first, last []time.Duration
			var counts objstore.Counts
			var lastBytes int64
			for range b.N {
				b.StopTimer()
				c := objstore.NewCounting(store)
				tbl, err := Create(ctx, c, fmt.Sprintf("growth%d", fx.next()), regSchema, "name", Options{Clock: fakeclock.NoSleep(nil)})
				if err != nil {
					b.Fatal(err)
				}
				recs := make([]arrow.RecordBatch, n)
				for i := range recs {
					recs[i] = benchRow(benchName(i), i)
				}
				c.Reset()
				b.StartTimer()
				for i, rec := range recs {
					start := time.Now()
					if _, err := tbl.Upsert(ctx, rec); err != nil {
						b.Fatal(err)
					}
					d := time.Since(start)
					switch {
					case i < n/10:
						first = append(first, d)
					case i >= n-n/10:
						last = append(last, d)
					}
				}
				b.StopTimer()
				counts = counts.Add(c.Counts())
				for _, r := range recs {
					r.Release()
				}
				lastBytes = latestManifestBytes(b, store, tbl.Root(), tbl.Cached().Version)
				b.StartTimer()
			}
			b.StopTimer()
			firstUS, lastUS := meanUS(first), meanUS(last)
			b.ReportMetric(firstUS, "first-tenth-us/upsert")
			b.ReportMetric(lastUS, "last-tenth-us/upsert")
			b.ReportMetric(lastUS/firstUS, "growth-x")
			// Medians resist the outliers a shared machine adds to the means.
			b.ReportMetric(medianUS(last)/medianUS(first), "median-growth-x")
			reportCounts(b, counts, b.N*n) // per upsert
			b.ReportMetric(float64(lastBytes), "final-manifest-bytes")
		})
	}

	// Manifest bytes per fragment, from the real manifest of a table with
	// 1,000 one-row fragments: the manifest's size minus the same manifest
	// with no fragments, divided by 1,000. ns/op is decoding the manifest.
	b.Run("ManifestBytes/fragments=1000", func(b *testing.B) {
		root := fx.manyFragments(b)
		ctx := context.Background()
		tbl, err := Open(ctx, fx.store, root, Options{})
		if err != nil {
			b.Fatal(err)
		}
		m := tbl.Cached()
		key := root + manifestKey(m.Version)
		data, err := fx.store.Get(ctx, key)
		if err != nil {
			b.Fatal(err)
		}
		empty := *m
		empty.Fragments = nil
		perFrag := float64(len(data)-len(encodeManifest(&empty))) / float64(len(m.Fragments))
		var keyBytes int
		for _, f := range m.Fragments {
			keyBytes += len(appendBytes(nil, f.MinKey)) + len(appendBytes(nil, f.MaxKey))
		}
		if len(m.Fragments) != 1000 {
			b.Fatalf("%d fragments", len(m.Fragments))
		}
		b.ResetTimer()
		for range b.N {
			if _, err := decodeManifest(key, data); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		b.ReportMetric(float64(len(data)), "manifest-bytes")
		b.ReportMetric(perFrag, "bytes/fragment")
		b.ReportMetric(perFrag-float64(keyBytes)/float64(len(m.Fragments)), "bytes/fragment-excl-keys")
	})

	// Get by key on a 1,000-row table stored as one fragment and as 1,000
	// one-row fragments. "warm" reuses a snapshot; "cold" opens the latest
	// version first (the seed's GET /rollouts/{name}).
	for _, frags := range []int{1, 1000} {
		for _, mode := range []string{"warm", "cold"} {
			b.Run(fmt.Sprintf("GetByKey/fragments=%d/%s", frags, mode), func(b *testing.B) {
				var root string
				if frags == 1 {
					root = fx.oneFragment(b)
				} else {
					root = fx.manyFragments(b)
				}
				c := objstore.NewCounting(fx.store)
				ctx := context.Background()
				tbl, err := Open(ctx, c, root, Options{})
				if err != nil {
					b.Fatal(err)
				}
				if got := len(tbl.Cached().Fragments); got != frags {
					b.Fatalf("%d fragments, want %d", got, frags)
				}
				snap := tbl.Snapshot()
				c.Reset()
				b.ResetTimer()
				for i := range b.N {
					if mode == "cold" {
						if snap, err = tbl.Latest(ctx); err != nil {
							b.Fatal(err)
						}
					}
					// Spread lookups over the key space (7919 is prime).
					rec, err := snap.Get(ctx, benchName(i*7919%1000))
					if err != nil {
						b.Fatal(err)
					}
					rec.Release()
				}
				b.StopTimer()
				reportCounts(b, c.Counts(), b.N)
			})
		}
	}

	if len(fx.built) > 0 {
		names := make([]string, 0, len(fx.built))
		for n := range fx.built {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			b.Logf("fixture %s built in %s", n, fx.built[n].Round(time.Millisecond))
		}
	}
}

// timedStore accumulates the time spent in List calls.
type timedStore struct {
	objstore.Store
	list time.Duration
}

func (s *timedStore) List(ctx context.Context, opts objstore.ListOptions) (objstore.ListPage, error) {
	start := time.Now()
	p, err := s.Store.List(ctx, opts)
	s.list += time.Since(start)
	return p, err
}

func meanUS(ds []time.Duration) float64 {
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return float64(sum.Microseconds()) / float64(len(ds))
}

func medianUS(ds []time.Duration) float64 {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return float64(s[len(s)/2].Microseconds())
}

// newMemStore is an in-memory store (testkit.MemStore) for tests and
// benchmarks that measure the format's own cost without file-system
// latency.
func newMemStore() *testkit.MemStore { return testkit.NewMemStore() }
