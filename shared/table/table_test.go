package table

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/tablekeep/tablekeep/shared/internal/fakeclock"
	"github.com/tablekeep/tablekeep/shared/internal/testenv"
	"github.com/tablekeep/tablekeep/shared/objstore"
)

func s3Store(t *testing.T) objstore.Store { return testenv.S3Store(t) }

func TestBasicOperations(t *testing.T) {
	storeKinds(t, func(t *testing.T, newStore func(*testing.T) objstore.Store) {
		ctx := context.Background()
		st := newStore(t)
		tbl, err := Create(ctx, st, "reg", regSchema, "name", Options{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Create(ctx, st, "reg", regSchema, "name", Options{}); !errors.Is(err, ErrTableExists) {
			t.Fatalf("second create: %v, want ErrTableExists", err)
		}
		if _, err := tbl.Append(ctx, regBatch(row{"a", "s3://a", 1}, row{"b", "s3://b", 2})); err != nil {
			t.Fatal(err)
		}
		res, err := tbl.Upsert(ctx, regBatch(row{"b", "s3://b2", 3}, row{"c", "s3://c", 4}))
		if err != nil {
			t.Fatal(err)
		}
		if res.Version != 3 || res.RowsAdded != 2 || res.RowsDeleted != 1 {
			t.Fatalf("upsert result %+v", res)
		}
		if _, err := tbl.Delete(ctx, "a"); err != nil {
			t.Fatal(err)
		}
		// Deleting a missing key commits nothing.
		res, err = tbl.Delete(ctx, "zzz")
		if err != nil || res.Version != 4 {
			t.Fatalf("no-op delete: %+v %v", res, err)
		}
		other, err := Open(ctx, st, "reg", Options{})
		if err != nil {
			t.Fatal(err)
		}
		snap, err := other.Latest(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]row{"b": {"b", "s3://b2", 3}, "c": {"c", "s3://c", 4}}
		if err := sameRows(rowsOf(t, snap), want); err != nil {
			t.Fatal(err)
		}
		rec, err := snap.Get(ctx, "b")
		if err != nil {
			t.Fatal(err)
		}
		if rec.NumRows() != 1 || rec.Column(1).(*array.String).Value(0) != "s3://b2" {
			t.Fatalf("get b: %v", rec)
		}
		rec.Release()
		if _, err := snap.Get(ctx, "a"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("get deleted: %v", err)
		}
		// Projection reads only the named columns.
		err = snap.Scan(ctx, ScanOptions{Columns: []string{"uri"}}, func(r arrow.RecordBatch) error {
			if r.NumCols() != 1 || r.Schema().Field(0).Name != "uri" {
				return fmt.Errorf("projected schema %s", r.Schema())
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}

// committedOp is one successful write, for replaying the model in version order.
type committedOp struct {
	version uint64
	upsert  *row
	delete  string
}

// TestConcurrentWriters: 8 goroutines x 250 mixed upserts/deletes over two
// handles on one table; the final scan equals the model replayed in version
// order, every successful commit is its own version, every version reads
// back exactly the model at that version, and no conflict error escapes.
func TestConcurrentWriters(t *testing.T) {
	for _, format := range []uint64{2, 3} {
		t.Run(fmt.Sprintf("format=%d", format), func(t *testing.T) { concurrentWriters(t, format) })
	}
}

func concurrentWriters(t *testing.T, format uint64) {
	storeKinds(t, func(t *testing.T, newStore func(*testing.T) objstore.Store) {
		ctx := context.Background()
		st := newStore(t)
		opts := Options{BackoffBase: 100 * time.Microsecond, BackoffMax: 5 * time.Millisecond, Format: format}
		h1, err := Create(ctx, st, "t", regSchema, "name", opts)
		if err != nil {
			t.Fatal(err)
		}
		h2, err := Open(ctx, st, "t", opts)
		if err != nil {
			t.Fatal(err)
		}
		const workers, perWorker, keySpace = 8, 250, 40
		var mu sync.Mutex
		var ops []committedOp
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				h := h1
				if w%2 == 1 {
					h = h2
				}
				rng := rand.New(rand.NewPCG(uint64(w), 7))
				for i := range perWorker {
					name := fmt.Sprintf("k%02d", rng.IntN(keySpace))
					if rng.IntN(3) == 0 {
						res, err := h.Delete(ctx, name)
						if err != nil {
							errs <- fmt.Errorf("worker %d delete: %w", w, err)
							return
						}
						if res.RowsDeleted > 0 {
							mu.Lock()
							ops = append(ops, committedOp{version: res.Version, delete: name})
							mu.Unlock()
						}
						continue
					}
					r := row{name, fmt.Sprintf("s3://%d/%d", w, i), int64(w*1000 + i)}
					res, err := h.Upsert(ctx, regBatch(r))
					if err != nil {
						errs <- fmt.Errorf("worker %d upsert: %w", w, err)
						return
					}
					mu.Lock()
					ops = append(ops, committedOp{version: res.Version, upsert: &r})
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		sort.Slice(ops, func(i, j int) bool { return ops[i].version < ops[j].version })
		for i := 1; i < len(ops); i++ {
			if ops[i].version == ops[i-1].version {
				t.Fatalf("two commits claim version %d", ops[i].version)
			}
		}
		vs, err := h1.Versions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(vs) != len(ops)+1 {
			t.Fatalf("%d versions for %d commits (+create)", len(vs), len(ops))
		}
		// Replay in version order; check a sample of versions and the last.
		model := map[string]row{}
		for i, op := range ops {
			if op.upsert != nil {
				model[op.upsert.Name] = *op.upsert
			} else {
				delete(model, op.delete)
			}
			if i%97 == 0 || i == len(ops)-1 {
				snap, err := h2.Checkout(ctx, op.version)
				if err != nil {
					t.Fatal(err)
				}
				if err := sameRows(rowsOf(t, snap), model); err != nil {
					t.Fatalf("version %d: %v", op.version, err)
				}
			}
		}
	})
}

// TestTimeTravel: every version reads back exactly the rows it had.
func TestTimeTravel(t *testing.T) {
	ctx := context.Background()
	st, _ := objstore.NewDisk(t.TempDir())
	tbl, err := Create(ctx, st, "", regSchema, "name", Options{})
	if err != nil {
		t.Fatal(err)
	}
	models := map[uint64]map[string]row{1: {}}
	model := map[string]row{}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 60 {
		name := fmt.Sprintf("k%d", rng.IntN(15))
		var res *CommitResult
		switch rng.IntN(4) {
		case 0:
			if res, err = tbl.Delete(ctx, name); err == nil && res.RowsDeleted > 0 {
				delete(model, name)
			}
		case 1:
			p, _ := KeyRange(regSchema.Field(0).Type, "k1", "k2")
			if res, err = tbl.DeleteWhere(ctx, p); err == nil {
				for k := range model {
					if k >= "k1" && k < "k2" {
						delete(model, k)
					}
				}
			}
		default:
			r := row{name, fmt.Sprint("u", i), int64(i)}
			if res, err = tbl.Upsert(ctx, regBatch(r)); err == nil {
				model[name] = r
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		models[res.Version] = cloneRows(model)
	}
	for v, want := range models {
		snap, err := tbl.Checkout(ctx, v)
		if err != nil {
			t.Fatal(err)
		}
		if err := sameRows(rowsOf(t, snap), want); err != nil {
			t.Fatalf("version %d: %v", v, err)
		}
	}
}

// TestCrashAtEveryRequest: for every N, fail the Nth request of a commit
// (before it is sent, and after it was applied); the table stays readable at
// its previous version or shows the whole commit, never a part, and a retry
// converges to the model.
func TestCrashAtEveryRequest(t *testing.T) {
	for _, format := range []uint64{2, 3} {
		t.Run(fmt.Sprintf("format=%d", format), func(t *testing.T) { crashAtEveryRequest(t, format) })
	}
}

func crashAtEveryRequest(t *testing.T, format uint64) {
	storeKinds(t, func(t *testing.T, newStore func(*testing.T) objstore.Store) {
		ctx := context.Background()
		for _, after := range []bool{false, true} {
			for n := int64(1); ; n++ {
				st := newStore(t)
				f := objstore.NewFaulty(st)
				tbl, err := Create(ctx, f, "t", regSchema, "name", Options{Clock: fakeclock.NoSleep(nil), Format: format})
				if err != nil {
					t.Fatal(err)
				}
				base := map[string]row{"a": {"a", "1", 1}, "b": {"b", "2", 2}, "c": {"c", "3", 3}}
				if _, err := tbl.Append(ctx, regBatch(base["a"], base["b"])); err != nil {
					t.Fatal(err)
				}
				if _, err := tbl.Append(ctx, regBatch(base["c"])); err != nil {
					t.Fatal(err)
				}
				f.Reset()
				fault := objstore.FailNth(n, objstore.ErrInjected)
				if after {
					f.SetAfter(fault)
				} else {
					f.SetBefore(fault)
				}
				upd := row{"b", "22", 22}
				_, opErr := tbl.Upsert(ctx, regBatch(upd, row{"d", "4", 4}))
				sent := f.Requests()
				f.SetBefore(nil)
				f.SetAfter(nil)
				want := cloneRows(base)
				want["b"], want["d"] = upd, row{"d", "4", 4}
				fresh, err := Open(ctx, st, "t", Options{})
				if err != nil {
					t.Fatalf("n=%d after=%v: reopen: %v", n, after, err)
				}
				got := rowsOf(t, fresh.Snapshot())
				if sameRows(got, base) != nil && sameRows(got, want) != nil {
					t.Fatalf("n=%d after=%v: half a commit visible: %v", n, after, got)
				}
				if opErr != nil {
					if sameRows(got, base) != nil {
						t.Fatalf("n=%d: op failed (%v) but its commit is visible", n, opErr)
					}
					if _, err := fresh.Upsert(ctx, regBatch(upd, row{"d", "4", 4})); err != nil {
						t.Fatalf("n=%d: retry: %v", n, err)
					}
				}
				if err := sameRows(rowsOf(t, fresh.Snapshot()), want); err != nil {
					t.Fatalf("n=%d after=%v: %v", n, after, err)
				}
				if sent < n { // the op finished before request n: every request covered
					break
				}
			}
		}
	})
}

// TestBadInput: typed errors naming the object; nothing committed.
func TestBadInput(t *testing.T) {
	storeKinds(t, func(t *testing.T, newStore func(*testing.T) objstore.Store) {
		ctx := context.Background()
		st := newStore(t)
		tbl, err := Create(ctx, st, "t", regSchema, "name", Options{})
		if err != nil {
			t.Fatal(err)
		}
		// Wrong schema on append.
		b := array.NewRecordBuilder(memory.DefaultAllocator, arrowSchemaOneCol())
		b.Field(0).(*array.StringBuilder).Append("x")
		bad := b.NewRecordBatch()
		if _, err := tbl.Append(ctx, bad); !errors.Is(err, ErrSchemaMismatch) {
			t.Fatalf("wrong schema: %v", err)
		}
		if _, err := tbl.Upsert(ctx, regBatch(row{"a", "1", 1}, row{"a", "2", 2})); !errors.Is(err, ErrDuplicateKey) {
			t.Fatalf("duplicate keys: %v", err)
		}
		if _, err := tbl.Checkout(ctx, 99); !errors.Is(err, ErrVersionNotFound) || !strings.Contains(err.Error(), "_versions/") {
			t.Fatalf("unknown version: %v", err)
		}
		if _, err := Open(ctx, st, "nope", Options{}); !errors.Is(err, ErrNotATable) || !strings.Contains(err.Error(), "nope") {
			t.Fatalf("not a table: %v", err)
		}
		if _, err := tbl.Append(ctx, regBatch(row{"a", "1", 1})); err != nil {
			t.Fatal(err)
		}
		good, err := st.Get(ctx, "t/"+manifestKey(2))
		if err != nil {
			t.Fatal(err)
		}
		cases := map[string]struct {
			body []byte
			want error
		}{
			"truncated": {good[:len(good)/2], ErrCorruptManifest},
			"flipped":   {flip(good, len(good)/2), ErrCorruptManifest},
			"garbage":   {[]byte("hello"), ErrCorruptManifest},
			"format99":  {append([]byte(manifestMagic), 99, 0, 0, 0, 0), ErrUnsupportedFormat},
		}
		for name, c := range cases {
			// A damaged newest manifest, as a buggy or foreign writer would leave.
			root := "bad-" + name
			if _, err := Create(ctx, st, root, regSchema, "name", Options{}); err != nil {
				t.Fatal(err)
			}
			if err := st.PutIfAbsent(ctx, root+"/"+manifestKey(2), c.body); err != nil {
				t.Fatal(err)
			}
			_, err := Open(ctx, st, root, Options{})
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), root+"/"+manifestKey(2)) {
				t.Fatalf("%s: %v, want %v naming the manifest", name, err, c.want)
			}
			if _, err := Open(ctx, st, root, Options{}); err == nil {
				t.Fatalf("%s: opened", name)
			}
			if vs, _ := (&Table{store: st, root: root + "/"}).Versions(ctx); len(vs) != 2 {
				t.Fatalf("%s: %d versions: something committed", name, len(vs))
			}
		}
	})
}

func flip(b []byte, i int) []byte {
	out := bytes.Clone(b)
	out[i] ^= 0xff
	return out
}

func arrowSchemaOneCol() *arrow.Schema {
	return arrow.NewSchema([]arrow.Field{{Name: "name", Type: arrow.BinaryTypes.String}}, nil)
}

func TestTagsAndRestore(t *testing.T) {
	ctx := context.Background()
	st, _ := objstore.NewDisk(t.TempDir())
	tbl, _ := Create(ctx, st, "", regSchema, "name", Options{})
	tbl.Append(ctx, regBatch(row{"a", "1", 1}, row{"b", "2", 2}))
	tbl.Delete(ctx, "a")
	if err := tbl.Tag(ctx, "before-wipe", 2); err != nil {
		t.Fatal(err)
	}
	if err := tbl.Tag(ctx, "before-wipe", 3); !errors.Is(err, ErrTagExists) {
		t.Fatalf("dup tag: %v", err)
	}
	if err := tbl.Tag(ctx, "../x", 2); !errors.Is(err, ErrInvalidTag) {
		t.Fatalf("bad tag: %v", err)
	}
	if err := tbl.Tag(ctx, "nope", 42); !errors.Is(err, ErrVersionNotFound) {
		t.Fatalf("tag unknown version: %v", err)
	}
	tbl.Delete(ctx, "b")
	res, err := tbl.Restore(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	snap, _ := tbl.Checkout(ctx, res.Version)
	if err := sameRows(rowsOf(t, snap), map[string]row{"a": {"a", "1", 1}, "b": {"b", "2", 2}}); err != nil {
		t.Fatal(err)
	}
	// Restore copies files: no object is referenced by two separate runs of versions.
	old, _ := tbl.Checkout(ctx, 2)
	for _, f := range snap.Manifest().Fragments {
		for _, g := range old.Manifest().Fragments {
			if f.File == g.File {
				t.Fatalf("restore reused data file %x", f.File)
			}
		}
	}
	tags, _ := tbl.Tags(ctx)
	if tags["before-wipe"] != 2 || len(tags) != 1 {
		t.Fatalf("tags %v", tags)
	}
	if err := tbl.Untag(ctx, "before-wipe"); err != nil {
		t.Fatal(err)
	}
	if err := tbl.Untag(ctx, "before-wipe"); !errors.Is(err, ErrTagNotFound) {
		t.Fatalf("untag twice: %v", err)
	}
	// Below the retention floor: a typed "pruned" error, even while the
	// manifest still exists (cleaners may be deleting its files); a tagged
	// version stays readable.
	if err := tbl.Tag(ctx, "keep", 2); err != nil {
		t.Fatal(err)
	}
	if err := tbl.SetFloor(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.Checkout(ctx, 1); !errors.Is(err, ErrVersionPruned) {
		t.Fatalf("checkout below floor, manifest present: %v", err)
	}
	if _, err := tbl.Checkout(ctx, 2); err != nil {
		t.Fatalf("tagged version below floor: %v", err)
	}
	st.Delete(ctx, []string{manifestKey(1)})
	if _, err := tbl.Checkout(ctx, 1); !errors.Is(err, ErrVersionPruned) {
		t.Fatalf("checkout below floor: %v", err)
	}
	if err := tbl.Tag(ctx, "old", 1); !errors.Is(err, ErrVersionPruned) {
		t.Fatalf("tag below floor: %v", err)
	}
	if _, err := tbl.Restore(ctx, 1); !errors.Is(err, ErrVersionPruned) {
		t.Fatalf("restore below floor: %v", err)
	}
}

// TestStaleReadRefused: a writer whose read version is older than the grace
// window refuses to commit (its version and files may have been cleaned).
func TestStaleReadRefused(t *testing.T) {
	ctx := context.Background()
	st, _ := objstore.NewDisk(t.TempDir())
	clk := fakeclock.New(time.Now())
	if _, err := Create(ctx, st, "", regSchema, "name", Options{Clock: clk}); err != nil {
		t.Fatal(err)
	}
	stall := func(context.Context) error { clk.Advance(2 * time.Hour); return nil } // the writer stalls before committing
	tbl, _ := Open(ctx, st, "", Options{Clock: clk, Grace: time.Hour, Fence: stall})
	if _, err := tbl.Append(ctx, regBatch(row{"a", "1", 1})); !errors.Is(err, ErrStaleRead) {
		t.Fatalf("stale read committed: %v", err)
	}
	if vs, _ := tbl.Versions(ctx); len(vs) != 1 {
		t.Fatalf("%d versions", len(vs))
	}
}

// TestParquetReadable: a data fragment is a plain Parquet file.
func TestParquetReadable(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, _ := objstore.NewDisk(dir)
	tbl, _ := Create(ctx, st, "", regSchema, "name", Options{Format: 2})
	tbl.Append(ctx, regBatch(row{"a", "s3://a", 1}, row{"b", "s3://b", 2}))
	f := tbl.Cached().Fragments[0]
	data, err := st.Get(ctx, f.File.DataKey())
	if err != nil {
		t.Fatal(err)
	}
	pf, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if pf.NumRows() != 2 || pf.MetaData().RowGroups[0].Columns[0].MetaData.Codec.String() != "ZSTD" {
		t.Fatalf("rows %d codec %v", pf.NumRows(), pf.MetaData().RowGroups[0].Columns[0].MetaData.Codec)
	}
	tb, err := pqarrow.ReadTable(ctx, bytes.NewReader(data), parquet.NewReaderProperties(nil), pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Release()
	if tb.Schema().Field(0).Name != "name" || tb.NumRows() != 2 {
		t.Fatalf("schema %s", tb.Schema())
	}
}

// TestManifestBytesPerFragment: at most 41 bytes per fragment plus its key
// bounds (37 bytes in format 1, whose deletion ids had 32 bits).
func TestManifestBytesPerFragment(t *testing.T) {
	m := &Manifest{Version: 1 << 27, Schema: regSchema, KeyColumn: "name", NextFragmentID: 1 << 27}
	base := len(encodeManifest(m))
	for i := range 1000 {
		m.Fragments = append(m.Fragments, Fragment{
			ID: uint64(1<<27 - i), File: FileID(rand.Uint64()), Rows: 1<<27 - 1, Bytes: 1<<27 - 1, CreatedVersion: 1<<27 - 1,
			Deletion: &Deletion{ID: newDeletionID(), Rows: 1<<27 - 1, CreatedVersion: 1<<27 - 1},
			MinKey:   []byte("rollout-000001"), MaxKey: []byte("rollout-999999"),
		})
	}
	b := encodeManifest(m)
	perFrag := float64(len(b)-base) / 1000
	keyBytes := float64(2 * (1 + len("rollout-000001")))
	if perFrag-keyBytes > 41.01 { // + the count uvarint's extra byte
		t.Fatalf("%.1f bytes per fragment excluding key bounds", perFrag-keyBytes)
	}
	got, err := decodeManifest("x", b)
	if err != nil || len(got.Fragments) != 1000 || got.Fragments[7].Deletion.ID != m.Fragments[7].Deletion.ID {
		t.Fatalf("round trip: %v", err)
	}
}

// TestOpenCostsOneListOneGet whatever the number of versions.
func TestOpenCostsOneListOneGet(t *testing.T) {
	ctx := context.Background()
	st, _ := objstore.NewDisk(t.TempDir())
	tbl, _ := Create(ctx, st, "", regSchema, "name", Options{})
	for i := range 50 {
		tbl.Upsert(ctx, regBatch(row{fmt.Sprint("k", i%7), "u", int64(i)}))
	}
	c := objstore.NewCounting(st)
	if _, err := Open(ctx, c, "", Options{}); err != nil {
		t.Fatal(err)
	}
	if got := c.Counts(); got.List != 1 || got.Get != 1 || got.Total() != 2 {
		t.Fatalf("open: %s", got)
	}
}

// TestRewriteRemapsConcurrentDeletes: a delete that lands on a compaction
// input after it was read is re-applied to the output; an append rebases.
func TestRewriteRemapsConcurrentDeletes(t *testing.T) {
	ctx := context.Background()
	st, _ := objstore.NewDisk(t.TempDir())
	tbl, _ := Create(ctx, st, "", regSchema, "name", Options{Format: 2})
	tbl.Append(ctx, regBatch(row{"a", "1", 1}, row{"b", "2", 2}, row{"c", "3", 3}))
	tbl.Append(ctx, regBatch(row{"d", "4", 4}, row{"e", "5", 5}))
	tbl.Delete(ctx, "b")
	read := tbl.Cached()
	readAt := time.Now()
	rec, inputs, err := tbl.ReadGroup(ctx, read, read.Fragments)
	if err != nil {
		t.Fatal(err)
	}
	out, err := tbl.WriteRewriteOutput(ctx, read, rec)
	if err != nil {
		t.Fatal(err)
	}
	// Concurrent writer: deletes rows in both inputs, appends a row.
	w, _ := Open(ctx, st, "", Options{})
	w.Delete(ctx, "c", "e")
	w.Append(ctx, regBatch(row{"f", "6", 6}))
	rw := &Rewrite{Groups: []RewriteGroup{{Inputs: inputs, Output: out}}}
	res, err := tbl.CommitRewrite(ctx, rw, readAt)
	if err != nil {
		t.Fatal(err)
	}
	if rw.Remapped != 2 || rw.Dropped != 0 {
		t.Fatalf("remapped %d dropped %d", rw.Remapped, rw.Dropped)
	}
	snap, _ := tbl.Checkout(ctx, res.Version)
	if n := len(snap.Manifest().Fragments); n != 2 {
		t.Fatalf("%d fragments after rewrite", n)
	}
	want := map[string]row{"a": {"a", "1", 1}, "d": {"d", "4", 4}, "f": {"f", "6", 6}}
	if err := sameRows(rowsOf(t, snap), want); err != nil {
		t.Fatal(err)
	}
	// A group whose input was rewritten by someone else is dropped, not committed stale.
	read = tbl.Cached()
	rec, inputs, _ = tbl.ReadGroup(ctx, read, read.Fragments[:1])
	out, _ = tbl.WriteRewriteOutput(ctx, read, rec)
	rec2, inputs2, _ := w.ReadGroup(ctx, read, read.Fragments)
	out2, _ := w.WriteRewriteOutput(ctx, read, rec2)
	if _, err := w.CommitRewrite(ctx, &Rewrite{Groups: []RewriteGroup{{Inputs: inputs2, Output: out2}}}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.CommitRewrite(ctx, &Rewrite{Groups: []RewriteGroup{{Inputs: inputs, Output: out}}}, time.Now()); !errors.Is(err, ErrRewriteInvalidated) {
		t.Fatalf("stale rewrite: %v", err)
	}
	snap, _ = tbl.Latest(ctx)
	if err := sameRows(rowsOf(t, snap), want); err != nil {
		t.Fatal(err)
	}
}

// TestStrayKeysAmongManifests: a console folder marker or README under
// _versions/ does not break opening the table.
func TestStrayKeysAmongManifests(t *testing.T) {
	ctx := context.Background()
	st, _ := objstore.NewDisk(t.TempDir())
	tbl, _ := Create(ctx, st, "t", regSchema, "name", Options{})
	tbl.Append(ctx, regBatch(row{"a", "1", 1}))
	for _, k := range []string{"t/_versions/!README", "t/_versions/.keep"} {
		if err := st.Put(ctx, k, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	o, err := Open(ctx, st, "t", Options{})
	if err != nil || o.Cached().Version != 2 {
		t.Fatalf("open with stray keys: %v", err)
	}
}

// TestManifestKeyColumnChecked: a manifest naming a key column that is not
// in its schema is corrupt, not a panic later.
func TestManifestKeyColumnChecked(t *testing.T) {
	m := &Manifest{Version: 2, Parent: 1, Schema: regSchema, KeyColumn: "nope", NextFragmentID: 1}
	if _, err := decodeManifest("k", encodeManifest(m)); !errors.Is(err, ErrCorruptManifest) {
		t.Fatalf("bad key column: %v", err)
	}
}

// TestRewriteRemapsRemovedInputs: upserts that replace one-row fragments
// (removing them whole) while a compaction is in flight are remapped as
// deleted rows, not a reason to drop the group; a restore in between is.
func TestRewriteRemapsRemovedInputs(t *testing.T) {
	ctx := context.Background()
	st, _ := objstore.NewDisk(t.TempDir())
	tbl, _ := Create(ctx, st, "", regSchema, "name", Options{Format: 2})
	for _, r := range []row{{"a", "1", 1}, {"b", "2", 2}, {"c", "3", 3}, {"d", "4", 4}} {
		tbl.Upsert(ctx, regBatch(r))
	}
	read := tbl.Cached()
	rec, inputs, _ := tbl.ReadGroup(ctx, read, read.Fragments)
	out, _ := tbl.WriteRewriteOutput(ctx, read, rec)
	w, _ := Open(ctx, st, "", Options{})
	w.Upsert(ctx, regBatch(row{"b", "22", 22})) // removes fragment b whole
	w.Delete(ctx, "c")                          // removes fragment c whole
	rw := &Rewrite{Groups: []RewriteGroup{{Inputs: inputs, Output: out}}, ReadVersion: read.Version}
	res, err := tbl.CommitRewrite(ctx, rw, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if rw.Remapped != 2 || rw.Dropped != 0 {
		t.Fatalf("remapped %d dropped %d", rw.Remapped, rw.Dropped)
	}
	snap, _ := tbl.Checkout(ctx, res.Version)
	want := map[string]row{"a": {"a", "1", 1}, "b": {"b", "22", 22}, "d": {"d", "4", 4}}
	if err := sameRows(rowsOf(t, snap), want); err != nil {
		t.Fatal(err)
	}
	if n := len(snap.Manifest().Fragments); n != 2 {
		t.Fatalf("%d fragments", n)
	}
	// A restore removes inputs too, but not by deleting rows: the group is dropped.
	read = tbl.Cached()
	rec, inputs, _ = tbl.ReadGroup(ctx, read, read.Fragments)
	out, _ = tbl.WriteRewriteOutput(ctx, read, rec)
	w.Restore(ctx, 2)
	rw = &Rewrite{Groups: []RewriteGroup{{Inputs: inputs, Output: out}}, ReadVersion: read.Version}
	if _, err := tbl.CommitRewrite(ctx, rw, time.Now()); !errors.Is(err, ErrRewriteInvalidated) {
		t.Fatalf("rewrite across a restore: %v", err)
	}
}
