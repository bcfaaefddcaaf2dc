package table

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/internal/fakeclock"
	"github.com/tablekeep/tablekeep/shared/internal/testkit"
	"github.com/tablekeep/tablekeep/shared/objstore"
)

// TestWriterGraceStoredInTable: the writers' grace window is set at Create,
// stored in every manifest (append, delete, compaction, restore), read by
// WriterGrace whatever the handle's options, and a handle configured with a
// longer grace is still held to the table's.
func TestWriterGraceStoredInTable(t *testing.T) {
	ctx := context.Background()
	st := testkit.DiskStore(t)
	clk := fakeclock.New(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	tbl := must(Create(ctx, st, "t", regSchema, "name", Options{Clock: clk, Grace: 2 * time.Hour}))
	must(tbl.Append(ctx, regBatch(row{"a", "1", 1})))
	must(tbl.Append(ctx, regBatch(row{"b", "2", 2})))
	must(tbl.Delete(ctx, "a"))
	m := must(tbl.Refresh(ctx))
	rec, inputs := func() (any, []RewriteInput) {
		r, in, err := tbl.ReadGroup(ctx, m, m.Fragments)
		if err != nil {
			t.Fatal(err)
		}
		out, err := tbl.WriteRewriteOutput(ctx, m, r)
		r.Release()
		if err != nil {
			t.Fatal(err)
		}
		must(tbl.CommitRewrite(ctx, &Rewrite{Groups: []RewriteGroup{{Inputs: in, Output: out}}, ReadVersion: m.Version}, clk.Now()))
		return nil, in
	}()
	_, _ = rec, inputs
	must(tbl.Restore(ctx, 3))
	vs := must(tbl.Versions(ctx))
	if len(vs) != 6 {
		t.Fatalf("%d versions", len(vs))
	}
	for _, v := range vs {
		mv := must(tbl.readManifest(ctx, v.Version))
		if mv.WriterGrace != 2*time.Hour {
			t.Fatalf("version %d (%s) stores writer grace %s", v.Version, mv.Op.Kind, mv.WriterGrace)
		}
	}
	for _, g := range []time.Duration{0, 30 * time.Minute, 3 * time.Hour} {
		h := must(Open(ctx, st, "t", Options{Clock: clk, Grace: g}))
		if got := h.WriterGrace(); got != 2*time.Hour {
			t.Fatalf("Options.Grace %s: WriterGrace %s, want the stored 2h", g, got)
		}
	}
	// A handle configured with 3 h is held to the table's 2 h.
	stall := func(d time.Duration) func(context.Context) error {
		return func(context.Context) error { clk.Advance(d); return nil }
	}
	long := must(Open(ctx, st, "t", Options{Clock: clk, Grace: 3 * time.Hour, Fence: stall(2*time.Hour + time.Minute)}))
	if _, err := long.Append(ctx, regBatch(row{"c", "3", 3})); !errors.Is(err, ErrStaleRead) {
		t.Fatalf("3h handle on a 2h table committed after 2h01m: %v", err)
	}
	// A handle configured with 30 min shortens its own bound.
	short := must(Open(ctx, st, "t", Options{Clock: clk, Grace: 30 * time.Minute, Fence: stall(31 * time.Minute)}))
	if _, err := short.Append(ctx, regBatch(row{"c", "3", 3})); !errors.Is(err, ErrStaleRead) {
		t.Fatalf("30m handle committed after 31m: %v", err)
	}
	// Within the window: commits.
	ok := must(Open(ctx, st, "t", Options{Clock: clk, Fence: stall(90 * time.Minute)}))
	must(ok.Append(ctx, regBatch(row{"c", "3", 3})))
	// A default Create stores DefaultGrace.
	d := must(Create(ctx, st, "u", regSchema, "name", Options{Clock: clk}))
	if d.WriterGrace() != DefaultGrace || d.Cached().WriterGrace != DefaultGrace {
		t.Fatalf("default table: %s", d.WriterGrace())
	}
}

// TestSlowWriterDataAgeBound: a writer whose uploaded file is older than
// the grace window does not commit, even if its read version is fresh (a
// sweep may already have deleted that file as unreferenced).
func TestSlowWriterDataAgeBound(t *testing.T) {
	ctx := context.Background()
	st := testkit.DiskStore(t)
	clk := fakeclock.New(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	tbl := must(Create(ctx, st, "t", regSchema, "name", Options{Clock: clk}))
	must(tbl.Append(ctx, regBatch(row{"a", "1", 1})))
	must(tbl.Append(ctx, regBatch(row{"b", "2", 2})))
	m := must(tbl.Refresh(ctx))
	rec, in, err := tbl.ReadGroup(ctx, m, m.Fragments)
	if err != nil {
		t.Fatal(err)
	}
	out, err := tbl.WriteRewriteOutput(ctx, m, rec)
	rec.Release()
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(DefaultGrace + time.Second)
	must(tbl.Refresh(ctx))
	rw := &Rewrite{Groups: []RewriteGroup{{Inputs: in, Output: out}}, ReadVersion: m.Version}
	if _, err := tbl.CommitRewrite(ctx, rw, clk.Now()); !errors.Is(err, ErrStaleRead) {
		t.Fatalf("rewrite output uploaded %s ago committed: %v", DefaultGrace+time.Second, err)
	}
	if got := must(tbl.Refresh(ctx)).Version; got != m.Version {
		t.Fatalf("latest %d, want %d", got, m.Version)
	}
	// Within the window it commits.
	rec, in, _ = tbl.ReadGroup(ctx, m, m.Fragments)
	out, _ = tbl.WriteRewriteOutput(ctx, m, rec)
	rec.Release()
	clk.Advance(DefaultGrace - time.Second)
	rw = &Rewrite{Groups: []RewriteGroup{{Inputs: in, Output: out}}, ReadVersion: m.Version}
	must(tbl.CommitRewrite(ctx, rw, clk.Now()))
}

// deadlineStore checks that manifest writes carry a deadline within
// MaxCommitDuration, and times the first one out (it does not land).
type deadlineStore struct {
	objstore.Store
	now      func() time.Time
	timedOut atomic.Bool
	err      atomic.Value
}

func (s *deadlineStore) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if strings.Contains(key, versionsDir) {
		dl, ok := ctx.Deadline()
		if !ok || time.Until(dl) > ManifestPutTimeout {
			s.err.Store(fmt.Errorf("manifest put %s: deadline %v (set %v), want within %s", key, dl, ok, ManifestPutTimeout))
		}
		if s.timedOut.CompareAndSwap(false, true) {
			return fmt.Errorf("put %s: %w", key, context.DeadlineExceeded)
		}
	}
	return s.Store.PutIfAbsent(ctx, key, data)
}

// TestManifestPutBounded: every manifest write is bounded by
// ManifestPutTimeout (so that, with the store's StoreApplyAllowance, it
// lands within MaxCommitDuration: issue 19 item 8); one that times out is
// an unknown outcome, looked up and retried, and commits once.
func TestManifestPutBounded(t *testing.T) {
	ctx := context.Background()
	ds := &deadlineStore{Store: testkit.DiskStore(t)}
	ds.timedOut.Store(true) // let Create through
	tbl := must(Create(ctx, ds, "t", regSchema, "name", Options{Clock: fakeclock.NoSleep(nil)}))
	ds.timedOut.Store(false)
	res := must(tbl.Append(ctx, regBatch(row{"a", "1", 1})))
	if res.Version != 2 || res.Attempts != 2 {
		t.Fatalf("%+v", res)
	}
	if e := ds.err.Load(); e != nil {
		t.Fatal(e)
	}
	if vs := must(tbl.Versions(ctx)); len(vs) != 2 {
		t.Fatalf("%d versions", len(vs))
	}
}
