package maintenance_test

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tablekeep/tablekeep/shared/internal/fakeclock"
	"github.com/tablekeep/tablekeep/shared/lock"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/queue"
	"github.com/tablekeep/tablekeep/shared/table"
)

var discard = slog.New(slog.DiscardHandler)

type fakeClock = fakeclock.Clock

func newFakeClock() *fakeClock { return fakeclock.New(time.Now()) }

var kvSchema = arrow.NewSchema([]arrow.Field{
	{Name: "name", Type: arrow.BinaryTypes.String},
	{Name: "val", Type: arrow.BinaryTypes.String},
}, nil)

// kv builds a batch from alternating name, value strings.
func kv(pairs ...string) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, kvSchema)
	defer b.Release()
	for i := 0; i+1 < len(pairs); i += 2 {
		b.Field(0).(*array.StringBuilder).Append(pairs[i])
		b.Field(1).(*array.StringBuilder).Append(pairs[i+1])
	}
	return b.NewRecordBatch()
}

func upsert(t testing.TB, tb *table.Table, name, val string) *table.CommitResult {
	t.Helper()
	rec := kv(name, val)
	defer rec.Release()
	res, err := tb.Upsert(context.Background(), rec)
	if err != nil {
		t.Fatalf("upsert %s: %v", name, err)
	}
	return res
}

// scanSnap reads every live row of a snapshot, failing on duplicate keys.
func scanSnap(ctx context.Context, s *table.Snapshot) (map[string]string, error) {
	out := map[string]string{}
	err := s.Scan(ctx, table.ScanOptions{}, func(rec arrow.RecordBatch) error {
		n := rec.Column(0).(*array.String)
		v := rec.Column(1).(*array.String)
		for i := range int(rec.NumRows()) {
			if _, dup := out[n.Value(i)]; dup {
				return fmt.Errorf("duplicate key %q", n.Value(i))
			}
			out[n.Value(i)] = v.Value(i)
		}
		return nil
	})
	return out, err
}

func latestRows(t testing.TB, tb *table.Table) map[string]string {
	t.Helper()
	snap, err := tb.Latest(context.Background())
	if err != nil {
		t.Fatalf("latest: %v", err)
	}
	rows, err := scanSnap(context.Background(), snap)
	if err != nil {
		t.Fatalf("scan v%d: %v", snap.Version(), err)
	}
	return rows
}

func diffRows(got, want map[string]string) error {
	var msgs []string
	for k, v := range want {
		if g, ok := got[k]; !ok {
			msgs = append(msgs, fmt.Sprintf("lost %s=%s", k, v))
		} else if g != v {
			msgs = append(msgs, fmt.Sprintf("%s=%s, want %s", k, g, v))
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			msgs = append(msgs, fmt.Sprintf("resurrected/extra %s=%s", k, v))
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	sort.Strings(msgs)
	if len(msgs) > 8 {
		msgs = append(msgs[:8], fmt.Sprintf("... %d more", len(msgs)-8))
	}
	return fmt.Errorf("%d rows, want %d: %s", len(got), len(want), strings.Join(msgs, "; "))
}

// memCatalog is an in-memory maintenance.Catalog, so tests can set every
// policy field (the real catalog stores only some).
type memCatalog struct {
	mu    sync.Mutex
	refs  []maintenance.TableRef
	stats map[string]maintenance.TableStats
}

func (c *memCatalog) Resolve(ctx context.Context, name string) (maintenance.TableRef, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.refs {
		if r.Name == name {
			return r, nil
		}
	}
	return maintenance.TableRef{}, fmt.Errorf("%w: %q", maintenance.ErrUnknownTable, name)
}

func (c *memCatalog) Tables(ctx context.Context) ([]maintenance.TableRef, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]maintenance.TableRef(nil), c.refs...), nil
}

func (c *memCatalog) Stats(ctx context.Context) (map[string]maintenance.TableStats, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]maintenance.TableStats{}
	for k, v := range c.stats {
		out[k] = v
	}
	return out, nil
}

func (c *memCatalog) PutStats(ctx context.Context, s maintenance.TableStats) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stats == nil {
		c.stats = map[string]maintenance.TableStats{}
	}
	c.stats[s.Name] = s
	return nil
}

// bodies is an Enqueuer that records message bodies.
type bodies struct {
	mu sync.Mutex
	b  [][]byte
}

func (q *bodies) Send(ctx context.Context, bs [][]byte) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, b := range bs {
		q.b = append(q.b, append([]byte(nil), b...))
	}
	return nil
}

func (q *bodies) take() [][]byte {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.b
	q.b = nil
	return out
}

// env is one table in a directory store with maintenance wired around it.
type env struct {
	dir    string
	disk   objstore.Store
	faulty *objstore.Faulty // wraps disk; what maintenance uses
	clock  *fakeClock
	locker *lock.InProcess
	q      *queue.Embedded
	cat    *memCatalog
	ref    maintenance.TableRef
	runner *maintenance.Runner
	clean  *maintenance.Cleaner
	// format and inlineMax are what create makes (newEnv: format 2; inlineMax 0: the default).
	format, inlineMax uint64
}

const tblName = "tbl"

func testPolicy() maintenance.Policy {
	return maintenance.Policy{KeepLast: 3, Grace: time.Hour, TargetRows: 1000}.WithDefaults()
}

// newEnv wires maintenance over the table in dir (which may not exist yet).
func newEnv(t testing.TB, dir string, p maintenance.Policy, qopts queue.EmbeddedOptions) *env {
	t.Helper()
	disk, err := objstore.NewDisk(dir)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{dir: dir, disk: disk, faulty: objstore.NewFaulty(disk), clock: newFakeClock(), format: 2} // pinned: tests set format 3 explicitly
	e.locker = lock.NewInProcess(e.clock)
	if qopts.Clock == nil {
		qopts.Clock = e.clock
	}
	e.q = queue.NewEmbedded(qopts)
	e.ref = maintenance.TableRef{Name: tblName, Root: "wh/tbl/", Policy: p}
	e.cat = &memCatalog{refs: []maintenance.TableRef{e.ref}}
	e.runner = &maintenance.Runner{
		Store: e.faulty, Catalog: e.cat, Locker: e.locker, Queue: maintenance.QueueEnqueuer{Q: e.q},
		Clock: e.clock, Logger: discard, Owner: "master-1",
	}
	e.clean = &maintenance.Cleaner{
		Store: e.faulty, Tables: e.cat, Requeue: maintenance.QueueEnqueuer{Q: e.q}, Logger: discard,
		OpenOpts: table.Options{Clock: e.clock},
	}
	return e
}

func (e *env) opts() table.Options {
	return table.Options{Clock: fakeclock.NoSleep(e.clock), Grace: e.ref.Policy.Grace,
		Format: e.format, InlineMaxBytes: e.inlineMax}
}

func (e *env) create(t testing.TB) *table.Table {
	t.Helper()
	tb, err := table.Create(context.Background(), e.disk, e.ref.Root, kvSchema, "name", e.opts())
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

func (e *env) open(t testing.TB) *table.Table {
	t.Helper()
	tb, err := table.Open(context.Background(), e.disk, e.ref.Root, e.opts())
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

func (e *env) drain(t testing.TB) queue.DrainStats {
	t.Helper()
	st, err := maintenance.DrainLocal(context.Background(), e.q, e.clean, discard)
	if err != nil {
		t.Fatalf("drain: %v", err)
	}
	return st
}

// listing returns every key under the table root with its size.
func listing(t testing.TB, st objstore.Store, prefix string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	err := objstore.ListAll(context.Background(), st, prefix, "", func(o objstore.ObjectInfo) error {
		out[o.Key] = o.Size
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameListing(a, b map[string]int64) error {
	var msgs []string
	for k := range a {
		if _, ok := b[k]; !ok {
			msgs = append(msgs, "-"+k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			msgs = append(msgs, "+"+k)
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	sort.Strings(msgs)
	return fmt.Errorf("listings differ: %s", strings.Join(msgs, " "))
}

// checkRetained checks out every stored version at or above the floor and
// every tagged version, and scans it fully; want (if it has the version)
// gives the rows it must hold. It returns the referenced data and deletion
// files (relative to the root) of those versions.
func checkRetained(t testing.TB, tb *table.Table, want map[uint64]map[string]string) map[string]bool {
	t.Helper()
	ctx := context.Background()
	floor, err := tb.Floor(ctx)
	if err != nil {
		t.Fatal(err)
	}
	vs, err := tb.Versions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tags, err := tb.Tags(ctx)
	if err != nil {
		t.Fatal(err)
	}
	keep := map[uint64]bool{}
	for _, v := range vs {
		if v.Version >= floor {
			keep[v.Version] = true
		}
	}
	for name, v := range tags {
		if !keep[v] {
			found := false
			for _, sv := range vs {
				found = found || sv.Version == v
			}
			if !found {
				t.Fatalf("tag %s: version %d manifest is gone", name, v)
			}
		}
		keep[v] = true
	}
	refs := map[string]bool{}
	for v := range keep {
		snap, err := tb.Checkout(ctx, v)
		if err != nil {
			t.Fatalf("retained version %d (floor %d): %v", v, floor, err)
		}
		rows, err := scanSnap(ctx, snap)
		if err != nil {
			t.Fatalf("retained version %d (floor %d): scan: %v", v, floor, err)
		}
		if w, ok := want[v]; ok {
			if err := diffRows(rows, w); err != nil {
				t.Fatalf("version %d: %v", v, err)
			}
		}
		for _, f := range snap.Manifest().Fragments {
			refs[f.File.DataKey()] = true
			if f.Deletion != nil {
				refs[table.DeletionKey(f.File, f.Deletion.ID)] = true
			}
		}
	}
	return refs
}

// checkNoOrphans fails if a data or deletion file older than grace (by
// now) is referenced by no retained version.
func checkNoOrphans(t testing.TB, tb *table.Table, refs map[string]bool, now time.Time, grace time.Duration) {
	t.Helper()
	for _, prefix := range []string{table.DataPrefix, table.DeletionsPrefix} {
		err := objstore.ListAll(context.Background(), tb.Store(), tb.Root()+prefix, "", func(o objstore.ObjectInfo) error {
			rel := strings.TrimPrefix(o.Key, tb.Root())
			if !refs[rel] && now.Sub(o.LastModified) >= grace {
				return fmt.Errorf("unreferenced %s (age %s) survived the sweep", rel, now.Sub(o.LastModified))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// copyDir copies a directory tree (the store of a prepared table).
// copyDir copies the tree under src to dst, with modification times.
func copyDir(t testing.TB, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.Create(target)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		if err := out.Close(); err != nil {
			return err
		}
		// Modification times too: the sweep's age rule reads them.
		info, err := d.Info()
		if err != nil {
			return err
		}
		return os.Chtimes(target, info.ModTime(), info.ModTime())
	})
	if err != nil {
		t.Fatal(err)
	}
}
