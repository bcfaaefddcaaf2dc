package table

import (
	"context"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/internal/fakeclock"
)

// TestRefreshListedStaleVersion: a handle loaded by RefreshListed on a
// version a commit has since superseded (the scan listed it, a writer
// committed before the maintenance opened) commits on the true latest (its
// PUT conflicts, it rebases) and loses no row; its read time is the
// listing's, and a version pruned since falls back to Refresh.
func TestRefreshListedStaleVersion(t *testing.T) {
	ctx := context.Background()
	st := newMemStore()
	w := must(Create(ctx, st, "t", regSchema, "name", Options{Clock: fakeclock.NoSleep(nil)}))
	upsertRows(t, w, regRow(1))
	listed := w.Cached().Version
	listedAt := time.Now().Add(-time.Second)
	upsertRows(t, w, regRow(2)) // after the listing

	h := Handle(st, "t", Options{Clock: fakeclock.NoSleep(nil)})
	m := must(h.RefreshListed(ctx, listed, listedAt))
	if m.Version != listed {
		t.Fatalf("loaded %d, want %d", m.Version, listed)
	}
	if _, at := h.CachedAt(); !at.Equal(listedAt) {
		t.Fatalf("read time %s, want the listing's %s", at, listedAt)
	}
	res := upsertRows(t, h, regRow(3))
	if res.Version != listed+2 {
		t.Fatalf("committed %d, want %d (on the true latest)", res.Version, listed+2)
	}
	got := rowsOf(t, must(h.Checkout(ctx, res.Version)))
	for _, i := range []int{1, 2, 3} {
		if _, ok := got[regRow(i).Name]; !ok {
			t.Errorf("row %d lost", i)
		}
	}

	// A listed version whose manifest is gone: Refresh (the latest).
	h2 := Handle(st, "t", Options{Clock: fakeclock.NoSleep(nil)})
	if m := must(h2.RefreshListed(ctx, res.Version+5, listedAt)); m.Version != res.Version {
		t.Fatalf("missing listed version: loaded %d, want the latest %d", m.Version, res.Version)
	}
	// A listing time in the future is not trusted: Refresh.
	h3 := Handle(st, "t", Options{Clock: fakeclock.NoSleep(nil)})
	must(h3.RefreshListed(ctx, listed, time.Now().Add(time.Hour)))
	if m, at := h3.CachedAt(); m.Version != res.Version || at.After(time.Now()) {
		t.Fatalf("future listing time: loaded %d at %s", m.Version, at)
	}
}
