package maintenance_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/table"
)

// listRecording records the prefix (relative to root, its first path
// element) of every LIST under root, for the per-maintenance breakdown.
type listRecording struct {
	objstore.Store
	root string
	mu   sync.Mutex
	log  []string
}

func (s *listRecording) List(ctx context.Context, o objstore.ListOptions) (objstore.ListPage, error) {
	if strings.HasPrefix(o.Prefix, s.root) {
		s.mu.Lock()
		s.log = append(s.log, fmt.Sprintf("%s(max %d)", strings.TrimPrefix(o.Prefix, s.root), o.MaxKeys))
		s.mu.Unlock()
	}
	return s.Store.List(ctx, o)
}

func (s *listRecording) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.log
	s.log = nil
	return l
}

// TestActiveTableListsPerMaintenanceFormat3 logs, for each maintenance of
// an active format-3 table (one write a minute, a pass every 15 minutes,
// the default policy), which prefix each LIST of the pass and of its
// cleaner was on, and pins that no prefix is listed twice in one pass or
// in one cleaner run.
func TestActiveTableListsPerMaintenanceFormat3(t *testing.T) {
	ctx := context.Background()
	var rec *listRecording
	p := maintenance.DefaultPolicy()
	f := newFleet(t, 0, p, func(s objstore.Store) objstore.Store {
		rec = &listRecording{Store: s, root: "wh/t000/"}
		return rec
	})
	f.addFormat3(t, "t000", p)
	crec := &listRecording{Store: f.store, root: "wh/t000/"}
	f.clean.Store, f.clean.SkipSizes = crec, true
	k, checked := 0, 0
	for pass := 0; pass < 24; pass++ {
		for range 15 {
			f.clock.Advance(time.Minute)
			k++
			f.write(t, "t000", k)
		}
		rec.take()
		crec.take()
		rep, _ := f.pass(t)
		run := rec.take()
		if _, err := maintenance.DrainLocal(ctx, f.q, f.clean, discard); err != nil {
			t.Fatal(err)
		}
		cl := crec.take()
		if pass < 12 || len(rep.Tables) == 0 {
			continue
		}
		t.Logf("pass %d (flushed %d): pass LISTs %d %v; cleaner LISTs %d %v", pass, rep.Tables[0].Compacted.FlushedRows, len(run), run, len(cl), cl)
		for name, l := range map[string][]string{"pass": run, "cleaner": cl} {
			s := append([]string(nil), l...)
			sort.Strings(s)
			for i := 1; i < len(s); i++ {
				if s[i] == s[i-1] {
					t.Errorf("pass %d: the %s listed %s twice", pass, name, s[i])
				}
			}
		}
		checked++
	}
	if checked < 4 {
		t.Fatalf("%d maintenances checked", checked)
	}
}

// commitOnOpen commits a write on the table (through its own handle) just
// before the first manifest GET that follows the scan's LIST: the open of
// the maintenance reads a version the scan listed and a writer has since
// superseded.
type commitOnOpen struct {
	objstore.Store
	root    string
	listed  bool
	done    bool
	onStale func()
}

func (s *commitOnOpen) List(ctx context.Context, o objstore.ListOptions) (objstore.ListPage, error) {
	if o.Prefix == s.root+table.VersionsPrefix && o.MaxKeys == 1 {
		s.listed = true
	}
	return s.Store.List(ctx, o)
}

func (s *commitOnOpen) Get(ctx context.Context, k string) ([]byte, error) {
	if s.listed && !s.done && strings.HasPrefix(k, s.root+table.VersionsPrefix) {
		s.done = true
		s.onStale()
	}
	return s.Store.Get(ctx, k)
}

// TestActiveTableStaleScanLatest: the maintenance opens a format-3 table
// on the version the scan's LIST named (no LIST of its own); a commit
// between the scan and the open makes that version stale. The pass still
// maintains the table, every committed row is there after the cleaner ran,
// and the latest version is not deleted.
func TestActiveTableStaleScanLatest(t *testing.T) {
	ctx := context.Background()
	p := maintenance.DefaultPolicy()
	var co *commitOnOpen
	f := newFleet(t, 0, p, func(s objstore.Store) objstore.Store {
		co = &commitOnOpen{Store: s, root: "wh/t000/", done: true}
		return co
	})
	ref := f.addFormat3(t, "t000", p)
	k, stale := 0, 0
	co.onStale = func() {
		k++
		f.write(t, "t000", k)
		stale++
	}
	for pass := 0; pass < 24; pass++ {
		for range 15 {
			f.clock.Advance(time.Minute)
			k++
			f.write(t, "t000", k)
		}
		co.listed, co.done = false, false
		f.pass(t)
		co.done = true
		if _, err := maintenance.DrainLocal(ctx, f.q, f.clean, discard); err != nil {
			t.Fatal(err)
		}
	}
	if stale < 4 {
		t.Fatalf("%d stale opens, want at least 4", stale)
	}
	h, err := table.Open(ctx, f.store, ref.Root, table.Options{Clock: f.clock})
	if err != nil {
		t.Fatal(err)
	}
	if v := h.Cached().Version; v < uint64(k) {
		t.Fatalf("latest version %d after %d writes", v, k)
	}
	s, err := h.Checkout(ctx, h.Cached().Version)
	if err != nil {
		t.Fatal(err)
	}
	if n := s.CountRows(); n != uint64(k) {
		t.Fatalf("%d rows after %d one-row writes of distinct keys", n, k)
	}
}
