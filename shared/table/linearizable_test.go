package table

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/internal/fakeclock"
	"github.com/tablekeep/tablekeep/shared/objstore"
)

// staleHandles is a table of the given format with two handles A and B on
// it (two processes of a registry), A's cache one version behind: B
// upserted key k a minute after A last read, within A's cache time (G/2).
// The store counts requests.
func staleHandles(t *testing.T, format uint64, k string) (a, b *Table, st *objstore.Counting, clk *fakeclock.Clock) {
	t.Helper()
	ctx := context.Background()
	clk = fakeclock.New(time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC))
	st = objstore.NewCounting(newMemStore())
	opts := Options{Format: format, Clock: fakeclock.NoSleep(clk)}
	a, err := Create(ctx, st, "reg", regSchema, "name", opts)
	if err != nil {
		t.Fatal(err)
	}
	upsertRows(t, a, regRow(1), regRow(2))
	b, err = Open(ctx, st, "reg", opts)
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Minute)
	upsertRows(t, b, row{Name: k, URI: "s3://bucket/" + k, At: 7})
	clk.Advance(time.Minute)
	st.Reset()
	return a, b, st, clk
}

// TestStaleHandleDeleteSeesLatest is issue 29 item 1: a delete through a
// handle whose cached version predates another handle's upsert of k
// deletes k (before: it matched nothing in its cache and returned "nothing
// to commit" with no error; k stayed live). Formats 2 and 3, Delete and
// DeleteWhere(KeyPrefix).
func TestStaleHandleDeleteSeesLatest(t *testing.T) {
	ctx := context.Background()
	for _, format := range []uint64{2, 3} {
		for _, how := range []string{"Delete", "DeleteWhere"} {
			t.Run(fmt.Sprintf("format%d/%s", format, how), func(t *testing.T) {
				a, b, _, _ := staleHandles(t, format, "k")
				var res *CommitResult
				var err error
				if how == "Delete" {
					res, err = a.Delete(ctx, "k")
				} else {
					res, err = a.DeleteWhere(ctx, KeyPrefix("k"))
				}
				if err != nil {
					t.Fatal(err)
				}
				if !res.Committed || res.RowsDeleted != 1 || res.Version != 4 {
					t.Errorf("delete of k through the stale handle: %+v, want committed version 4, 1 row deleted", res)
				}
				latestRowsAre(t, map[string]row{regRow(1).Name: regRow(1), regRow(2).Name: regRow(2)}, a, b)
			})
		}
	}
}

// TestNoOpDeleteRequests pins the requests of a delete that matches nothing
// (issue 29 item 1), formats 2 and 3. On an up-to-date handle: LIST 1 (was
// no request at all); on a handle one version behind: LIST 1, GET 1 (the
// latest manifest; a new data file whose key bounds exclude the key is not
// read); the stale handle's delete of the key the other handle wrote: that,
// on format 2 one GET of the new data file's keys, and the commit. A
// delete that matches in the cache, or on a handle whose cache is older
// than G/2 (base refreshes: LIST 1, GET 1), lists nothing more. A cache is
// taken as listed since the delete began only if loadedAt > start (the
// handle's clock): at equality it lists.
func TestNoOpDeleteRequests(t *testing.T) {
	ctx := context.Background()
	for _, format := range []uint64{2, 3} {
		t.Run(fmt.Sprintf("format%d", format), func(t *testing.T) {
			a, b, st, clk := staleHandles(t, format, "k")
			newKeys := objstore.Counts{} // reading the keys of B's new row
			if format == 2 {
				newKeys.Get = 1
			}
			del := func(h *Table, key string) *CommitResult {
				t.Helper()
				st.Reset()
				res, err := h.Delete(ctx, key)
				if err != nil {
					t.Fatal(err)
				}
				return res
			}
			// B is up to date: nothing matches.
			res := del(b, "absent")
			wantCounts(t, "no-op delete, up-to-date handle", st.Counts(), objstore.Counts{List: 1})
			if res.Committed || res.Version != 3 {
				t.Errorf("no-op delete: %+v", res)
			}
			if _, at := b.CachedAt(); !at.Equal(clk.Now()) {
				t.Errorf("cache load time %s after the no-op delete's LIST, want %s", at, clk.Now())
			}
			// A is one version behind: nothing matches there either.
			res = del(a, "absent")
			wantCounts(t, "no-op delete, handle one version behind", st.Counts(), objstore.Counts{List: 1, Get: 1})
			if res.Committed || res.Version != 3 || a.Cached().Version != 3 {
				t.Errorf("no-op delete on the stale handle: %+v, cached version %d", res, a.Cached().Version)
			}
			// The bug's case, A behind again: B upserted k2.
			upsertRows(t, b, row{Name: "k2", URI: "s3://bucket/k2", At: 8})
			res = del(a, "k2")
			commit := objstore.Counts{Put: 2} // manifest, change record
			if format == 3 {
				commit = objstore.Counts{Put: 1} // manifest (inline: no change record)
			}
			wantCounts(t, "delete of a key only the latest holds", st.Counts(), objstore.Counts{List: 1, Get: 1}.Add(newKeys).Add(commit))
			if !res.Committed || res.RowsDeleted != 1 {
				t.Errorf("delete of k2: %+v", res)
			}
			// A delete that matches in the cache lists nothing.
			res = del(a, "k")
			wantCounts(t, "delete that matches in the cache", st.Counts(), newKeys.Add(commit))
			if !res.Committed || res.RowsDeleted != 1 {
				t.Errorf("delete of k: %+v", res)
			}
			// A cache older than G/2 is refreshed: no second LIST.
			clk.Advance(DefaultGrace/2 + time.Second)
			res = del(a, "absent")
			wantCounts(t, "no-op delete, cache older than G/2", st.Counts(), objstore.Counts{List: 1, Get: 1})
			if res.Committed {
				t.Errorf("no-op delete: %+v", res)
			}
			// The boundary of loadedAt > start: a cache loaded at the very
			// instant the delete begins (the fake clock unmoved since the
			// last call's LIST) does not show it was listed after: LIST 1.
			res = del(a, "absent")
			wantCounts(t, "no-op delete, cache loaded at the delete's start", st.Counts(), objstore.Counts{List: 1})
			if res.Committed {
				t.Errorf("no-op delete: %+v", res)
			}
		})
	}
}

// TestStaleHandleFlushSeesLatest: FlushInline through a handle whose cached
// version has no inline rows flushes the rows another handle wrote inline
// since (before: "nothing committed", the latest's inline rows left). A
// no-op flush on an up-to-date handle is one LIST (was none).
func TestStaleHandleFlushSeesLatest(t *testing.T) {
	ctx := context.Background()
	a, b, st, _ := staleHandles(t, 3, "k")
	if _, err := b.FlushInline(ctx); err != nil { // every row to a data file, A now two versions behind
		t.Fatal(err)
	}
	if _, err := a.FlushInline(ctx); err != nil { // A's cache: inline rows; it commits (rebased)
		t.Fatal(err)
	}
	upsertRows(t, b, row{Name: "k2", URI: "s3://bucket/k2", At: 8})
	if n := len(a.Cached().Inline); n != 0 {
		t.Fatalf("A's cache holds %d inline rows", n)
	}
	st.Reset()
	res, err := a.FlushInline(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Committed || res.RowsAdded != 0 {
		t.Errorf("flush through the stale handle: %+v, want committed", res)
	}
	if m, err := b.Refresh(ctx); err != nil || len(m.Inline) != 0 {
		t.Errorf("latest after the flush: %v, inline rows left: %v", err, m != nil && len(m.Inline) != 0)
	}
	want := map[string]row{regRow(1).Name: regRow(1), regRow(2).Name: regRow(2),
		"k": {"k", "s3://bucket/k", 7}, "k2": {"k2", "s3://bucket/k2", 8}}
	latestRowsAre(t, want, a, b)
	st.Reset()
	if res, err := a.FlushInline(ctx); err != nil || res.Committed {
		t.Fatalf("second flush: %+v, %v", res, err)
	}
	wantCounts(t, "no-op flush, up-to-date handle", st.Counts(), objstore.Counts{List: 1})
}

// TestTwoHandlesSequentialModel: two handles on one table, each write
// through either one at random, the cache of the other left as it is (the
// fake clock moves a minute a write, within G/2). Every write must act as
// if applied to the latest version, in call order: after each one the
// latest holds exactly the model's rows, and each delete's RowsDeleted is
// the model's. Upserts, Delete, DeleteWhere(KeyPrefix), FlushInline and
// Restore; formats 2 and 3 (issue 29 item 1: before the fix the stale
// handle's deletes of keys the other one wrote matched nothing).
func TestTwoHandlesSequentialModel(t *testing.T) {
	ctx := context.Background()
	for _, format := range []uint64{2, 3} {
		t.Run(fmt.Sprintf("format%d", format), func(t *testing.T) {
			a, b, _, clk := staleHandles(t, format, "a0")
			model := map[string]row{regRow(1).Name: regRow(1), regRow(2).Name: regRow(2), "a0": {"a0", "s3://bucket/a0", 7}}
			history := map[uint64]map[string]row{3: cloneRows(model)}
			rng := rand.New(rand.NewPCG(29, format))
			keys := []string{"a0", "a1", "a2", "b0", "b1"}
			hs := []*Table{a, b}
			check, err := Open(ctx, a.Store(), "reg", Options{Clock: fakeclock.NoSleep(clk)}) // reads the latest: neither writer's cache moves
			if err != nil {
				t.Fatal(err)
			}
			for step := range 300 {
				h := hs[rng.IntN(2)]
				clk.Advance(time.Minute)
				k := keys[rng.IntN(len(keys))]
				var res *CommitResult
				var err error
				what := ""
				want := uint64(0)
				switch op := rng.IntN(10); {
				case op < 4:
					what = "upsert " + k
					r := row{k, fmt.Sprint("s3://bucket/", k, "/", step), int64(step)}
					rec := regBatch(r)
					res, err = h.Upsert(ctx, rec)
					rec.Release()
					if _, ok := model[k]; ok {
						want = 1
					}
					model[k] = r
				case op < 7:
					what = "delete " + k
					res, err = h.Delete(ctx, k)
					if _, ok := model[k]; ok {
						want = 1
						delete(model, k)
					}
				case op < 8:
					p := k[:1]
					what = "delete prefix " + p
					res, err = h.DeleteWhere(ctx, KeyPrefix(p))
					for n := range model {
						if n[:1] == p {
							want++
							delete(model, n)
						}
					}
				case op < 9:
					what = "flush"
					res, err = h.FlushInline(ctx)
				default:
					var vs []uint64
					for v := range history {
						vs = append(vs, v)
					}
					slices.Sort(vs)
					v := vs[rng.IntN(len(vs))]
					what = fmt.Sprint("restore ", v)
					res, err = h.Restore(ctx, v)
					model = cloneRows(history[v])
				}
				if err != nil {
					t.Fatalf("step %d %s: %v", step, what, err)
				}
				if !strings.HasPrefix(what, "upsert") && !strings.HasPrefix(what, "restore") && res.RowsDeleted != want {
					t.Fatalf("step %d %s: %+v, want %d rows deleted", step, what, res, want)
				}
				if res.Committed {
					history[res.Version] = cloneRows(model)
				}
				snap, err := check.Latest(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if err := sameRows(rowsOf(t, snap), model); err != nil {
					t.Fatalf("step %d %s: latest version %d: %v", step, what, snap.Version(), err)
				}
			}
		})
	}
}
