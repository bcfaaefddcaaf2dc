package maintenance_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/table"
)

// prefixCounting counts the requests whose key (or listing prefix) is
// under one prefix.
type prefixCounting struct {
	objstore.Store
	prefix string
	c      *objstore.Counting
}

func newPrefixCounting(inner objstore.Store, prefix string) *prefixCounting {
	return &prefixCounting{Store: inner, prefix: prefix, c: objstore.NewCounting(inner)}
}

func (s *prefixCounting) pick(key string) objstore.Store {
	if strings.HasPrefix(key, s.prefix) {
		return s.c
	}
	return s.Store
}
func (s *prefixCounting) Get(ctx context.Context, k string) ([]byte, error) {
	return s.pick(k).Get(ctx, k)
}
func (s *prefixCounting) Head(ctx context.Context, k string) (objstore.ObjectInfo, error) {
	return s.pick(k).Head(ctx, k)
}
func (s *prefixCounting) Put(ctx context.Context, k string, b []byte) error {
	return s.pick(k).Put(ctx, k, b)
}
func (s *prefixCounting) PutIfAbsent(ctx context.Context, k string, b []byte) error {
	return s.pick(k).PutIfAbsent(ctx, k, b)
}
func (s *prefixCounting) List(ctx context.Context, o objstore.ListOptions) (objstore.ListPage, error) {
	return s.pick(o.Prefix).List(ctx, o)
}
func (s *prefixCounting) Delete(ctx context.Context, keys []string) error {
	if len(keys) == 0 {
		return s.Store.Delete(ctx, keys)
	}
	return s.pick(keys[0]).Delete(ctx, keys)
}

// TestActiveTableRequestsPerMaintenance pins the requests of one
// maintenance of an active table (one write a minute, a pass every 15
// minutes, the default policy: maintained every other pass), as the
// fleet bench prices them, by kind: the scheduled pass's share on the
// table (scan, lock step: compaction and prune plan) and the Lambda
// cleaner's (SkipSizes) for the range it enqueued. Before issue 11's
// second round: 12 LIST + 5 PUT in the pass, 6 LIST + 1 PUT in the
// cleaner. Reader leases (issue 24) add one LIST to a pass that raises the
// floor (7 -> 8) and none to a skipped (idle) table; the open's LIST,
// which repeated the scan's, is gone (8 -> 7).
func TestActiveTableRequestsPerMaintenance(t *testing.T) {
	ctx := context.Background()
	var pc *prefixCounting
	f := newFleet(t, 1, maintenance.DefaultPolicy(), func(s objstore.Store) objstore.Store {
		pc = newPrefixCounting(s, "wh/t000/")
		return pc
	})
	cleanCnt := newPrefixCounting(f.store, "wh/t000/")
	f.clean.Store, f.clean.SkipSizes = cleanCnt, true
	k := 0
	checked := 0
	for pass := 0; pass < 24; pass++ {
		for range 15 {
			f.clock.Advance(time.Minute)
			k++
			f.write(t, "t000", k)
		}
		before := pc.c.Counts()
		rep, _ := f.pass(t)
		run := pc.c.Counts().Sub(before)
		cb, files := cleanCnt.c.Counts(), dataFiles(t, f.store, "wh/t000/")
		if _, err := maintenance.DrainLocal(ctx, f.q, f.clean, discard); err != nil {
			t.Fatal(err)
		}
		cl, gone := cleanCnt.c.Counts().Sub(cb), int64(files-dataFiles(t, f.store, "wh/t000/"))
		if pass < 12 || len(rep.Tables) == 0 {
			if pass >= 12 && run != (objstore.Counts{List: 1}) {
				t.Fatalf("pass %d skipped the table with %v, want 1 LIST", pass, run)
			}
			continue
		}
		tr := rep.Tables[0]
		frags := tr.Compacted.InputFrags
		if frags == 0 || len(tr.Prune.Ranges) != 1 {
			t.Fatalf("pass %d: compacted %d fragments, %d ranges; want a compaction and one range", pass, frags, len(tr.Prune.Ranges))
		}
		// The pass: LIST scan (the open reads the manifest it named: no
		// LIST of its own, table.RefreshListed), floor, versions, leases (the floor
		// rises), prune state, tags (after the raised floor), change
		// records of the range; GET the
		// manifest, the input data files, the prune state, the cleanup
		// state; PUT the output, the manifest, its change record, the floor
		// marker, the prune state; DELETE the floor marker and the prune
		// state below.
		want := objstore.Counts{List: 7, Get: int64(frags) + 3, Put: 5, DeleteRequests: 2, DeleteKeys: 3}
		if run != want {
			t.Errorf("pass %d (maintained): %v, want %v", pass, run, want)
		}
		// The cleaner: LIST _refs/ (the floor and the tags in one
		// listing, table.ReadRefs; was a LIST of each); GET the range's
		// change records;
		// then the latest-version guard (issue 19 item 0: LIST max-keys 1
		// on _versions/, GET the latest manifest; 1 LIST and recs GET
		// before it); DELETE the data, then the change records and
		// manifests; PUT the cleanup state.
		r := tr.Prune.Ranges[0]
		recs := int64(r.To - r.From + 1)
		if cl.List != 3 || cl.Get != recs+1 || cl.Head != 1 || gone < 12 || cl.Put != 1 || cl.DeleteRequests != 2 {
			t.Errorf("pass %d cleaner for [%d, %d]: %v (%d data files deleted), want 3 LIST, %d GET, 1 HEAD, 1 PUT, 2 DELETE", pass, r.From, r.To, cl, gone, recs+1)
		}
		t.Logf("pass %d: pass %v; cleaner %v", pass, run, cl)
		checked++
	}
	if checked < 4 {
		t.Fatalf("%d maintenances checked, want at least 4", checked)
	}
}

// dataFiles is the number of data and deletion files under root.
func dataFiles(t testing.TB, st objstore.Store, root string) int {
	t.Helper()
	return len(listing(t, st, root+table.DataPrefix)) + len(listing(t, st, root+table.DeletionsPrefix))
}
