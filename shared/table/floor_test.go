package table

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/tablekeep/tablekeep/shared/internal/fakeclock"
	"github.com/tablekeep/tablekeep/shared/internal/testkit"
	"github.com/tablekeep/tablekeep/shared/objstore"
)

// Tests of the floor (SetFloor, SetFloorFrom, the post-put floor read) and
// of what stands below it: checkout, tags and held snapshots.

// TestFloorNeverDecreases: a stale lease holder that read the floor before
// a newer holder raised it cannot lower it; the legacy floor object counts
// and is migrated; Floor costs one request.
func TestFloorNeverDecreases(t *testing.T) {
	ctx := context.Background()
	inner := testkit.DiskStore(t)
	f := objstore.NewFaulty(inner)
	clk := fakeclock.New(time.Now())
	stale := must(Create(ctx, f, "t", regSchema, "name", Options{Clock: clk}))
	fresh := must(Open(ctx, inner, "t", Options{Clock: clk}))
	if err := stale.SetFloor(ctx, 15); err != nil {
		t.Fatal(err)
	}
	// The stale holder reads the floor (15); meanwhile the new holder
	// raises it to 29; then the stale holder writes 20.
	var once sync.Once
	f.SetAfter(func(n int64, op objstore.Op) error {
		if strings.Contains(op.Key, "_refs/floor") && (op.Kind == objstore.KindGet || op.Kind == objstore.KindList) {
			once.Do(func() {
				if err := fresh.SetFloor(ctx, 29); err != nil {
					t.Error(err)
				}
			})
		}
		return nil
	})
	if err := stale.SetFloor(ctx, 20); err != nil {
		t.Fatal(err)
	}
	f.SetAfter(nil)
	for _, h := range []*Table{stale, fresh} {
		if got := must(h.Floor(ctx)); got != 29 {
			t.Fatalf("floor %d after SetFloor(29) then a stale SetFloor(20)", got)
		}
	}
	if err := stale.SetFloor(ctx, 20); err != nil {
		t.Fatal(err)
	}
	if got := must(fresh.Floor(ctx)); got != 29 {
		t.Fatalf("floor %d", got)
	}
	// Floor is one request.
	c := objstore.NewCounting(inner)
	ch := must(Open(ctx, c, "t", Options{}))
	c.Reset()
	must(ch.Floor(ctx))
	if n := c.Counts().Total(); n != 1 {
		t.Fatalf("Floor: %d requests (%s)", n, c.Counts())
	}
	// A legacy floor object counts, and SetFloor migrates it to a marker.
	noErr(t, inner.Put(ctx, "t/"+legacyFloorKey, []byte(`{"floor":35}`)))
	if got := must(fresh.Floor(ctx)); got != 35 {
		t.Fatalf("floor with legacy 35: %d", got)
	}
	// (Stamped markers, as maintenance writes them: only those settle.)
	stamp := ManifestStamp{Size: 100, Unix: 1}
	if err := fresh.SetFloorFrom(ctx, 30, stamp, must(fresh.ReadFloor(ctx))); err != nil {
		t.Fatal(err)
	}
	if got := must(fresh.Floor(ctx)); got != 35 {
		t.Fatalf("floor after SetFloor(30) over legacy 35: %d", got)
	}
	// Lower markers and the legacy object go once a higher marker has
	// existed for floorMarkerKeep (a concurrent reader's List may predate it).
	clk.Advance(floorMarkerKeep + time.Minute)
	if err := fresh.SetFloorFrom(ctx, 40, stamp, must(fresh.ReadFloor(ctx))); err != nil {
		t.Fatal(err)
	}
	if got := must(stale.Floor(ctx)); got != 40 {
		t.Fatalf("floor %d, want 40", got)
	}
	keys := 0
	_ = objstore.ListAll(ctx, inner, "t/"+floorDir, "", func(objstore.ObjectInfo) error { keys++; return nil })
	if keys != 1 {
		t.Fatalf("%d floor markers left, want 1", keys)
	}
	if _, err := inner.Head(ctx, "t/"+legacyFloorKey); !errors.Is(err, objstore.ErrNotExist) {
		t.Fatalf("legacy floor object not migrated: %v", err)
	}
}

// TestFloorConcurrentAndCrash: SetFloor crashed at every request never
// lowers the floor and a retry completes it; concurrent SetFloor calls end
// at the highest, and no reader ever sees the floor go down.
func TestFloorConcurrentAndCrash(t *testing.T) {
	ctx := context.Background()
	for _, after := range []bool{false, true} {
		for n := int64(1); ; n++ {
			inner := testkit.DiskStore(t)
			f := objstore.NewFaulty(inner)
			tbl := must(Create(ctx, f, "t", regSchema, "name", Options{}))
			noErr(t, tbl.SetFloor(ctx, 10))
			noErr(t, tbl.SetFloor(ctx, 20))
			noErr(t, inner.Put(ctx, "t/"+legacyFloorKey, []byte(`{"floor":25}`)))
			f.Reset()
			fault := objstore.FailNth(n, nil)
			if after {
				f.SetAfter(fault)
			} else {
				f.SetBefore(fault)
			}
			opErr := tbl.SetFloor(ctx, 29)
			sent := f.Requests()
			f.Reset()
			got := must(tbl.Floor(ctx))
			if got != 25 && got != 29 {
				t.Fatalf("n=%d after=%v: floor %d (err %v)", n, after, got, opErr)
			}
			if opErr == nil && got != 29 {
				t.Fatalf("n=%d after=%v: SetFloor(29) succeeded, floor %d", n, after, got)
			}
			noErr(t, tbl.SetFloor(ctx, 29))
			if got := must(tbl.Floor(ctx)); got != 29 {
				t.Fatalf("n=%d after=%v: retry: floor %d", n, after, got)
			}
			if sent < n {
				break
			}
		}
	}

	st := testkit.DiskStore(t)
	tbl := must(Create(ctx, st, "t", regSchema, "name", Options{}))
	var wg sync.WaitGroup
	var highest atomic.Uint64
	stop := make(chan struct{})
	var readerErr atomic.Value
	go func() {
		var last uint64
		for {
			select {
			case <-stop:
				return
			default:
			}
			f, err := tbl.Floor(ctx)
			if err != nil {
				readerErr.Store(err)
				return
			}
			if f < last {
				readerErr.Store(fmt.Errorf("floor went %d -> %d", last, f))
				return
			}
			last = f
		}
	}()
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := must(Open(ctx, st, "t", Options{}))
			r := rand.New(rand.NewPCG(uint64(w), 9))
			for range 20 {
				v := r.Uint64N(1000) + 1
				if err := h.SetFloor(ctx, v); err != nil {
					t.Error(err)
					return
				}
				for {
					old := highest.Load()
					if v <= old || highest.CompareAndSwap(old, v) {
						break
					}
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	if e := readerErr.Load(); e != nil {
		t.Fatal(e)
	}
	if got := must(tbl.Floor(ctx)); got != highest.Load() {
		t.Fatalf("floor %d, want the highest set %d", got, highest.Load())
	}
}

// TestPostPutFloorReadErrorIsCommitUnknown: a slow commit whose floor
// re-read after the manifest write fails must not report success.
func TestPostPutFloorReadErrorIsCommitUnknown(t *testing.T) {
	ctx := context.Background()
	inner := testkit.DiskStore(t)
	f := objstore.NewFaulty(inner)
	clk := fakeclock.New(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	tbl := must(Create(ctx, f, "t", regSchema, "name", Options{Clock: clk, Format: 2}))
	var manifestPut atomic.Bool
	f.SetBefore(func(n int64, op objstore.Op) error {
		switch {
		case op.Kind == objstore.KindPut && strings.Contains(op.Key, dataDir):
			clk.Advance(40 * time.Minute) // the upload stalls: commit > Grace/2 after the read
		case op.Kind == objstore.KindPut && strings.Contains(op.Key, versionsDir):
			manifestPut.Store(true)
		case manifestPut.Load() && strings.Contains(op.Key, "_refs/floor"):
			return objstore.ErrInjected
		}
		return nil
	})
	_, err := tbl.Append(ctx, regBatch(row{"a", "1", 1}))
	if !errors.Is(err, ErrCommitUnknown) {
		t.Fatalf("floor unreadable after a slow commit: %v, want ErrCommitUnknown", err)
	}
}

// longLivedSetup: handle a created the table and has cached version 1 only;
// another handle wrote versions 2..5 and raised the floor to 4.
func longLivedSetup(t *testing.T, st objstore.Store) (a, b *Table) {
	ctx := context.Background()
	a = must(Create(ctx, st, "t", regSchema, "name", Options{}))
	b = must(Open(ctx, st, "t", Options{}))
	must(b.Append(ctx, regBatch(row{"a", "1", 1})))
	must(b.Upsert(ctx, regBatch(row{"a", "2", 2})))
	must(b.Append(ctx, regBatch(row{"b", "3", 3})))
	must(b.Append(ctx, regBatch(row{"c", "4", 4})))
	noErr(t, b.SetFloor(ctx, 4))
	if a.Cached().Version != 1 {
		t.Fatalf("a cached %d", a.Cached().Version)
	}
	return a, b
}

// TestCheckoutBelowFloorLongLivedHandle: a handle whose cache is older than
// the floor still gets ErrVersionPruned for a version below it whose
// manifest is not yet deleted, and so does Restore.
func TestCheckoutBelowFloorLongLivedHandle(t *testing.T) {
	ctx := context.Background()
	a, _ := longLivedSetup(t, testkit.DiskStore(t))
	for _, v := range []uint64{2, 3} {
		if _, err := a.Checkout(ctx, v); !errors.Is(err, ErrVersionPruned) {
			t.Fatalf("checkout %d below floor 4 from a handle cached at 1: %v", v, err)
		}
		if _, err := a.Restore(ctx, v); !errors.Is(err, ErrVersionPruned) {
			t.Fatalf("restore %d below floor 4: %v", v, err)
		}
	}
	if _, err := a.Checkout(ctx, 4); err != nil {
		t.Fatalf("checkout at the floor: %v", err)
	}
}

// TestTagNeverDangles: Tag never leaves a tag on a version below the floor,
// whatever the handle has cached, even when the floor re-check fails.
func TestTagNeverDangles(t *testing.T) {
	ctx := context.Background()
	inner := testkit.DiskStore(t)
	f := objstore.NewFaulty(inner)
	a, b := longLivedSetup(t, f)
	var tagPut atomic.Bool
	f.SetBefore(func(n int64, op objstore.Op) error {
		if op.Kind == objstore.KindPut && strings.Contains(op.Key, tagsDir) {
			tagPut.Store(true)
		}
		if tagPut.Load() && strings.Contains(op.Key, "_refs/floor") {
			return objstore.ErrInjected
		}
		return nil
	})
	if err := a.Tag(ctx, "x", 3); err == nil {
		t.Fatal("tagged version 3 below floor 4")
	}
	if tags := must(b.Tags(ctx)); len(tags) != 0 {
		t.Fatalf("tag left on a version below the floor: %v", tags)
	}
	// At or above the floor, but the re-check fails: withdrawn, not left.
	if err := a.Tag(ctx, "y", 5); err == nil {
		t.Fatal("tag reported despite a failed floor re-check")
	}
	if tags := must(b.Tags(ctx)); len(tags) != 0 {
		t.Fatalf("tag left after a failed floor re-check: %v", tags)
	}
	f.SetBefore(nil)
	noErr(t, a.Tag(ctx, "y", 5))
	// A version below the floor that another tag keeps is still refused.
	noErr(t, b.SetFloor(ctx, 6))
	if err := a.Tag(ctx, "z", 5); !errors.Is(err, ErrVersionPruned) {
		t.Fatalf("second tag on tagged version below the floor: %v", err)
	}
}

// TestSnapshotFilesCleanedIsPruned: a held snapshot whose version fell
// below the floor and whose files were deleted returns ErrVersionPruned,
// never ErrNotExist and never a prefix of its rows as success.
func TestSnapshotFilesCleanedIsPruned(t *testing.T) {
	ctx := context.Background()
	st := testkit.DiskStore(t)
	tbl := must(Create(ctx, st, "t", regSchema, "name", Options{Format: 2}))
	must(tbl.Append(ctx, regBatch(row{"a", "1", 1})))
	must(tbl.Append(ctx, regBatch(row{"b", "2", 2})))
	snap := must(tbl.Checkout(ctx, 3))
	must(tbl.Upsert(ctx, regBatch(row{"b", "22", 22}))) // drops b's one-row fragment
	must(tbl.Append(ctx, regBatch(row{"c", "3", 3})))
	noErr(t, tbl.SetFloor(ctx, 5))
	// The cleaner deletes what only versions below 5 referenced.
	gone := snap.Manifest().Fragments[1].File.DataKey()
	noErr(t, st.Delete(ctx, []string{"t/" + gone}))
	var rows int
	err := snapScan(ctx, snap, &rows)
	if !errors.Is(err, ErrVersionPruned) {
		t.Fatalf("scan of a cleaned snapshot: %v (after %d rows)", err, rows)
	}
	if _, err := snap.Get(ctx, "b"); !errors.Is(err, ErrVersionPruned) {
		t.Fatalf("get from a cleaned snapshot: %v", err)
	}
	// Above the floor a missing file is not "pruned": it is what it is.
	latest := must(tbl.Latest(ctx))
	noErr(t, st.Delete(ctx, []string{"t/" + latest.Manifest().Fragments[len(latest.Manifest().Fragments)-1].File.DataKey()}))
	if err := snapScan(ctx, latest, &rows); errors.Is(err, ErrVersionPruned) || !errors.Is(err, objstore.ErrNotExist) {
		t.Fatalf("missing file of the latest version: %v", err)
	}
}

// snapScan scans s counting rows into *rows.
func snapScan(ctx context.Context, s *Snapshot, rows *int) error {
	*rows = 0
	return s.Scan(ctx, ScanOptions{}, func(r arrow.RecordBatch) error { *rows += int(r.NumRows()); return nil })
}

// TestSetFloorFromPlanRead: the prune planner's floor read stands in for
// SetFloor's own. In the steady state (each raise more than floorMarkerKeep
// after the last) a raise costs one PutIfAbsent and one Delete, no LIST,
// and leaves two markers; a stale read (another holder raised the floor
// since) never lowers the floor, and its leftover marker is deleted by a
// later raise.
func TestSetFloorFromPlanRead(t *testing.T) {
	ctx := context.Background()
	inner := testkit.DiskStore(t)
	clk := fakeclock.New(time.Now())
	c := objstore.NewCounting(inner)
	tb := must(Create(ctx, c, "t", regSchema, "name", Options{Clock: clk}))
	markers := func() int {
		n := 0
		_ = objstore.ListAll(ctx, inner, "t/"+floorDir, "", func(objstore.ObjectInfo) error { n++; return nil })
		return n
	}
	for f := uint64(10); f <= 60; f += 10 {
		clk.Advance(floorMarkerKeep + time.Minute)
		r := must(tb.ReadFloor(ctx))
		c.Reset()
		noErr(t, tb.SetFloorFrom(ctx, f, ManifestStamp{Size: 100, Unix: int64(f)}, r))
		got := c.Counts()
		if got.List != 0 || got.Put != 1 || got.Total() > 2 {
			t.Fatalf("raise to %d: %s, want 1 PUT (+1 DELETE), no LIST", f, got)
		}
		if n := markers(); n > 2 {
			t.Fatalf("raise to %d: %d markers left, want at most 2", f, n)
		}
	}
	// A stale read: another holder raises the floor to 100 after ours.
	r := must(tb.ReadFloor(ctx))
	other := must(Open(ctx, inner, "t", Options{Clock: clk}))
	noErr(t, other.SetFloor(ctx, 100))
	noErr(t, tb.SetFloorFrom(ctx, 70, ManifestStamp{Size: 100, Unix: 70}, r))
	if got := must(tb.Floor(ctx)); got != 100 {
		t.Fatalf("floor %d after a stale SetFloorFrom(70) below 100", got)
	}
	// Later raises (with their own reads) clean the lower markers up.
	for f := uint64(110); f <= 130; f += 10 {
		clk.Advance(floorMarkerKeep + time.Minute)
		noErr(t, tb.SetFloorFrom(ctx, f, ManifestStamp{Size: 100, Unix: int64(f)}, must(tb.ReadFloor(ctx))))
	}
	if n := markers(); n > 2 {
		t.Fatalf("%d markers left after three raises, want at most 2", n)
	}
	if got := must(tb.Floor(ctx)); got != 130 {
		t.Fatalf("floor %d, want 130", got)
	}
}

// TestReadRefsIsReadFloorThenTags: ReadRefs reads what ReadFloor and Tags
// read one after the other (the floor, the markers it saw, whether the
// listing was complete, the tags), in one LIST of _refs/ (a GET more for
// the legacy object and for each tag); keys under _refs/ of neither kind
// are ignored; 9 strays before the first marker are ErrCorruptObject.
func TestReadRefsIsReadFloorThenTags(t *testing.T) {
	ctx := context.Background()
	cases := map[string]func(t *testing.T, st objstore.Store, tbl *Table){
		"empty": func(t *testing.T, st objstore.Store, tbl *Table) {},
		"floor and tags": func(t *testing.T, st objstore.Store, tbl *Table) {
			noErr(t, tbl.SetFloor(ctx, 2))
			noErr(t, tbl.Tag(ctx, "a", 3))
			noErr(t, tbl.Tag(ctx, "b.1", 4))
		},
		"legacy, strays, other keys": func(t *testing.T, st objstore.Store, tbl *Table) {
			for k, b := range map[string]string{
				"t/_refs/floor.json": `{"floor":3}`, "t/_refs/floor-old": "x", "t/_refs/floor/x": "x",
				"t/_refs/branches/main.json": "x", "t/_refs/a": "x", "t/_refs/tags/bad name.json": "x",
				"t/_refs/tags/c.txt": "x", "t/_refs/zz": "x",
			} {
				noErr(t, st.Put(ctx, k, []byte(b)))
			}
			noErr(t, st.Put(ctx, "t/"+floorMarkerKey(2), []byte(`{"floor":2}`)))
			noErr(t, tbl.Tag(ctx, "c", 4))
		},
		"markers only": func(t *testing.T, st objstore.Store, tbl *Table) {
			for _, f := range []uint64{1, 2, 3, 4, 5} {
				noErr(t, st.Put(ctx, "t/"+floorMarkerKey(f), []byte("{}")))
			}
		},
		"strays after the marker": func(t *testing.T, st objstore.Store, tbl *Table) {
			for i := range 9 {
				noErr(t, st.Put(ctx, fmt.Sprintf("t/_refs/floor/s%d", i), []byte("x")))
			}
			noErr(t, st.Put(ctx, "t/"+floorMarkerKey(2), []byte("{}")))
		},
		"9 strays": func(t *testing.T, st objstore.Store, tbl *Table) {
			for i := range 9 {
				noErr(t, st.Put(ctx, fmt.Sprintf("t/_refs/floor/0s%d", i), []byte("x")))
			}
			noErr(t, st.Put(ctx, "t/"+floorMarkerKey(2), []byte("{}")))
		},
	}
	for name, setup := range cases {
		t.Run(name, func(t *testing.T) {
			st := newMemStore()
			tbl := must(Create(ctx, st, "t", regSchema, "name", inlineOpts()))
			for range 5 {
				upsertRows(t, tbl, regRow(1))
			}
			setup(t, st, tbl)
			wantFloor, ferr := tbl.ReadFloor(ctx)
			wantTags, terr := tbl.Tags(ctx)
			cnt := objstore.NewCounting(st)
			h := newTable(cnt, "t", inlineOpts())
			fr, tags, err := h.ReadRefs(ctx)
			if ferr != nil || terr != nil {
				if !errors.Is(err, ErrCorruptObject) || !errors.Is(ferr, ErrCorruptObject) {
					t.Fatalf("ReadRefs %v; ReadFloor %v, Tags %v", err, ferr, terr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			// ReadFloor's one page (MaxKeys 4) may stop before the last
			// marker (incomplete); ReadRefs lists every key of _refs/, so
			// it sees those markers too.
			sawMore := !wantFloor.complete && len(fr.markers) > len(wantFloor.markers)
			if fr.Floor != wantFloor.Floor || fr.legacy != wantFloor.legacy || (fr.complete != wantFloor.complete && !sawMore) ||
				fmt.Sprint(fr.markers[:len(wantFloor.markers)]) != fmt.Sprint(wantFloor.markers) || !fr.MarkerTime().Equal(wantFloor.MarkerTime()) {
				t.Errorf("floor read %+v, want %+v", fr, wantFloor)
			}
			if fmt.Sprint(tags) != fmt.Sprint(wantTags) {
				t.Errorf("tags %v, want %v", tags, wantTags)
			}
			want := objstore.Counts{List: 1, Get: int64(len(wantTags))}
			if fr.legacy {
				want.Get++
			}
			if c := cnt.Counts(); c != want {
				t.Errorf("requests %+v, want %+v", c, want)
			}
		})
	}
}
