package table

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/objstore"
)

// outputFiles lists the objects of out's data file and its deletion vectors.
func outputFiles(t *testing.T, st objstore.Store, out Fragment) []string {
	t.Helper()
	var keys []string
	err := objstore.ListAll(context.Background(), st, "", "", func(o objstore.ObjectInfo) error {
		if o.Key == out.File.DataKey() || strings.HasPrefix(o.Key, fmt.Sprintf("%s%016x-", deletionsDir, uint64(out.File))) {
			keys = append(keys, o.Key)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

var errFenceTest = errors.New("lease ended (test)")

// TestLostRewriteDeletesItsFiles: a compaction commit that commits nothing
// deletes what it uploaded, at once (one Delete request): a group whose
// input another compaction rewrote first (ErrRewriteInvalidated) loses its
// output; a commit the fence refuses after re-applying a concurrent delete
// loses its output and the remapped deletion vector it wrote. The winner's
// files stay, and the table reads the same.
func TestLostRewriteDeletesItsFiles(t *testing.T) {
	ctx := context.Background()
	t.Run("invalidated", func(t *testing.T) {
		st, _ := objstore.NewDisk(t.TempDir())
		tbl := must(Create(ctx, st, "", regSchema, "name", Options{Format: 2}))
		must(tbl.Append(ctx, regBatch(row{"a", "1", 1}, row{"b", "2", 2})))
		must(tbl.Append(ctx, regBatch(row{"c", "3", 3})))
		read := tbl.Cached()
		rec, inputs, err := tbl.ReadGroup(ctx, read, read.Fragments)
		noErr(t, err)
		out := must(tbl.WriteRewriteOutput(ctx, read, rec))
		w := must(Open(ctx, st, "", Options{}))
		rec2, inputs2, err := w.ReadGroup(ctx, read, read.Fragments)
		noErr(t, err)
		out2 := must(w.WriteRewriteOutput(ctx, read, rec2))
		must(w.CommitRewrite(ctx, &Rewrite{Groups: []RewriteGroup{{Inputs: inputs2, Output: out2}}}, time.Now()))
		rw := &Rewrite{Groups: []RewriteGroup{{Inputs: inputs, Output: out}}}
		if _, err := tbl.CommitRewrite(ctx, rw, time.Now()); !errors.Is(err, ErrRewriteInvalidated) {
			t.Fatalf("stale rewrite: %v", err)
		}
		if left := outputFiles(t, st, out); len(left) != 0 || rw.Discarded != 1 {
			t.Fatalf("the lost rewrite left %v (discarded %d)", left, rw.Discarded)
		}
		if len(outputFiles(t, st, out2)) != 1 {
			t.Fatal("the winner's output is gone")
		}
		snap := must(tbl.Latest(ctx))
		noErr(t, sameRows(rowsOf(t, snap), map[string]row{"a": {"a", "1", 1}, "b": {"b", "2", 2}, "c": {"c", "3", 3}}))
	})
	t.Run("fence after a remap", func(t *testing.T) {
		st, _ := objstore.NewDisk(t.TempDir())
		var lost atomic.Bool
		fence := func(context.Context) error {
			if lost.Load() {
				return errFenceTest
			}
			return nil
		}
		tbl := must(Create(ctx, st, "", regSchema, "name", Options{Format: 2, Fence: fence}))
		must(tbl.Append(ctx, regBatch(row{"a", "1", 1}, row{"b", "2", 2})))
		must(tbl.Append(ctx, regBatch(row{"c", "3", 3})))
		read := tbl.Cached()
		readAt := time.Now()
		rec, inputs, err := tbl.ReadGroup(ctx, read, read.Fragments)
		noErr(t, err)
		out := must(tbl.WriteRewriteOutput(ctx, read, rec))
		must(tbl.Delete(ctx, "b")) // the commit's base has it: remapped onto the output
		lost.Store(true)
		rw := &Rewrite{Groups: []RewriteGroup{{Inputs: inputs, Output: out}}, ReadVersion: read.Version}
		if _, err := tbl.CommitRewrite(ctx, rw, readAt); !errors.Is(err, errFenceTest) {
			t.Fatalf("fenced rewrite: %v", err)
		}
		if rw.Remapped != 1 {
			t.Fatalf("remapped %d rows, want 1 (the vector is written before the fence)", rw.Remapped)
		}
		if left := outputFiles(t, st, out); len(left) != 0 || rw.Discarded != 2 {
			t.Fatalf("the fenced rewrite left %v (discarded %d, want the output and its vector)", left, rw.Discarded)
		}
		lost.Store(false)
		snap := must(tbl.Latest(ctx))
		noErr(t, sameRows(rowsOf(t, snap), map[string]row{"a": {"a", "1", 1}, "c": {"c", "3", 3}}))
	})
}

// TestRewriteUnknownOutcomeKeepsFiles: the manifest PUT lands but its
// answer is lost, and the look that follows fails too (ErrCommitUnknown):
// nothing is deleted, and the version that landed reads, output included.
func TestRewriteUnknownOutcomeKeepsFiles(t *testing.T) {
	ctx := context.Background()
	disk, _ := objstore.NewDisk(t.TempDir())
	st := objstore.NewFaulty(disk)
	tbl := must(Create(ctx, st, "", regSchema, "name", Options{Format: 2}))
	must(tbl.Append(ctx, regBatch(row{"a", "1", 1})))
	must(tbl.Append(ctx, regBatch(row{"b", "2", 2})))
	read := tbl.Cached()
	rec, inputs, err := tbl.ReadGroup(ctx, read, read.Fragments)
	noErr(t, err)
	out := must(tbl.WriteRewriteOutput(ctx, read, rec))
	next := manifestKey(read.Version + 1)
	st.SetAfter(func(_ int64, op objstore.Op) error {
		if op.Kind == objstore.KindPut && op.Key == next {
			return objstore.ErrInjected // applied, answer lost
		}
		return nil
	})
	st.SetBefore(func(_ int64, op objstore.Op) error {
		if op.Kind == objstore.KindGet && op.Key == next {
			return objstore.ErrInjected // the look fails
		}
		return nil
	})
	rw := &Rewrite{Groups: []RewriteGroup{{Inputs: inputs, Output: out}}, ReadVersion: read.Version}
	if _, err := tbl.CommitRewrite(ctx, rw, time.Now()); !errors.Is(err, ErrCommitUnknown) {
		t.Fatalf("commit: %v, want ErrCommitUnknown", err)
	}
	st.SetAfter(nil)
	st.SetBefore(nil)
	if left := outputFiles(t, st, out); len(left) != 1 || rw.Discarded != 0 {
		t.Fatalf("after an unknown outcome: %v left, %d discarded", left, rw.Discarded)
	}
	fresh := must(Open(ctx, st, "", Options{}))
	m := fresh.Cached()
	if m.Version != read.Version+1 || len(m.Fragments) != 1 || m.Fragments[0].File != out.File {
		t.Fatalf("latest %d with %d fragments", m.Version, len(m.Fragments))
	}
	noErr(t, sameRows(rowsOf(t, fresh.Snapshot()), map[string]row{"a": {"a", "1", 1}, "b": {"b", "2", 2}}))
}
