package maintenance_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
)

// TestActiveTableRequestsPerMaintenanceFormat3 is the format-3 twin of
// TestActiveTableRequestsPerMaintenance (pinned to format 2): the same
// active table (one write a minute, a pass every 15 minutes, the default
// policy) created on format 3, where every one-row upsert is inline. It
// pins, per pass that maintained the table, the pass's requests on the
// table and the cleaner's: no data file is read per write (the GETs of
// format 2's compaction inputs are gone) and the cleaner reads no change
// record of an inline-only version.
func TestActiveTableRequestsPerMaintenanceFormat3(t *testing.T) {
	ctx := context.Background()
	var pc *prefixCounting
	p := maintenance.DefaultPolicy()
	f := newFleet(t, 0, p, func(s objstore.Store) objstore.Store {
		pc = newPrefixCounting(s, "wh/t000/")
		return pc
	})
	f.addFormat3(t, "t000", p)
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
		key := fmt.Sprintf("pass %v; cleaner %v; flushed %d, ranges %d", run, cl, tr.Compacted.FlushedRows, len(tr.Prune.Ranges))
		t.Logf("pass %d: %s", pass, key)
		// Format 3's pass: no GET per write (format 2: one per input
		// fragment). A pass that prunes only (the inline rows under half
		// their bound): LIST 6 (format 2's 7 less the change-record listing); GET the manifest, the prune
		// state, the cleanup state; PUT the floor marker and the prune
		// state; DELETE the floor marker and prune state below. A pass
		// that also flushes the inline rows (every other maintenance at
		// this rate) folds them into the compaction of the existing
		// fragment (one commit, CompactionGroup.Fold): GET 1 more (the
		// existing fragment), PUT 3 more (the output, its manifest and
		// change record). Before the fold: GET 2 and PUT 6 more, a flush
		// commit (file, manifest, record) then a compaction re-reading
		// the flushed file.
		// The change records of a range are checked only when it holds a
		// version the record index names (here: the ranges of the passes
		// that flush, which reach the previous flush's record), by a HEAD
		// of each named record (at most 4) instead of a LIST of the span:
		// HEAD 1, LIST 6 as on the others (was LIST 7).
		// The open reads the manifest the scan's LIST named (no LIST).
		want := objstore.Counts{List: 6, Get: 3, Put: 2, DeleteRequests: 2, DeleteKeys: 3}
		if tr.Compacted.FlushedRows > 0 {
			want.Get, want.Put, want.Head = 4, 5, 1
			if c := tr.Compacted; len(c.Versions) != 1 || c.Committed != 1 || c.InputFrags != 1 {
				t.Errorf("pass %d: flush and compaction in %d commits (%d groups, %d input fragments), want 1", pass, len(c.Versions), c.Committed, c.InputFrags)
			}
		}
		if run != want {
			t.Errorf("pass %d (maintained, flushed %d): %v, want %v", pass, tr.Compacted.FlushedRows, run, want)
		}
		// The cleaner: LIST _refs/ (the floor and the tags in one listing,
		// table.ReadRefs; was a LIST of each), guard; HEAD the floor's
		// manifest and each data file deleted (its age, issue 29 item 5,
		// cleanage.go: fewer than 12 files, so HEADs, not a LIST); GET the latest manifest (guard) and only the records
		// of the range's file-changing versions (none without a flush:
		// GET 1 for ~45 versions); PUT the cleanup state.
		if len(tr.Prune.Ranges) != 1 {
			t.Fatalf("pass %d: %d ranges", pass, len(tr.Prune.Ranges))
		}
		r := tr.Prune.Ranges[0]
		if cl.List != 2 || cl.Head != 1+gone || gone >= 12 || cl.Put != 1 || cl.Get < 1 || cl.Get > 3 || int64(r.To-r.From+1) < 10*cl.Get {
			t.Errorf("pass %d cleaner for [%d, %d]: %v, want 2 LIST, %d HEAD, 1 PUT, 1-3 GET", pass, r.From, r.To, cl, 1+gone)
		}
		checked++
	}
	if checked < 4 {
		t.Fatalf("%d maintenances checked, want at least 4", checked)
	}
}
