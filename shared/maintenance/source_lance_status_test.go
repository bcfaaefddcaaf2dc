package maintenance_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/formats"
	"github.com/tablekeep/tablekeep/shared/lance/lancetest"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
)

// TestStatusLanceBacklog: LanceDB writes many one-row fragments (the
// mixed churn, no optimize); maintenance.Status counts the Lance
// compaction planner's dry plan (the fragments a run folds, not 0), the
// fragments it keeps and why (the indexed first one), and the deleted
// rows; the backlog is behind only from the policy's CompactMinFragments
// and once the latest version is older than the lag; status writes
// nothing, and its requests are pinned.
func TestStatusLanceBacklog(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	wh := filepath.Join(dir, "wh")
	lancetest.Node(t, nil, nil, "mixed", wh, "ds", "96")
	disk, err := objstore.NewDisk(dir)
	if err != nil {
		t.Fatal(err)
	}
	store := objstore.NewCounting(disk)
	ref := maintenance.TableRef{Name: "ds", Root: "wh/ds.lance/", Format: formats.Lance,
		Policy: maintenance.Policy{Grace: time.Hour, KeepLast: 1, CompactMinFragments: 36}}
	files := listing(t, disk, "wh/")
	now := time.Now().Add(2 * time.Hour)
	h, _, _, err := formats.Status(ctx, store, ref, now)
	if err != nil {
		t.Fatal(err)
	}
	if got := store.Counts(); got.Put != 0 || got.DeleteRequests != 0 {
		t.Fatalf("status wrote: %+v", got)
	}
	if err := sameListing(files, listing(t, disk, "wh/")); err != nil {
		t.Fatalf("status wrote: %v", err)
	}
	if h.Compactable < 36 || h.CompactGroups < 1 || h.Compactable >= h.Fragments || h.CompactBound != 36 {
		t.Fatalf("compactable %d in %d groups of %d fragments, bound %d", h.Compactable, h.CompactGroups, h.Fragments, h.CompactBound)
	}
	if h.Kept["covered by an index"] < 1 || h.DeletedRows == 0 || h.PhysicalRows != h.Rows+h.DeletedRows || h.CompactRefused != "" {
		t.Fatalf("kept %v, deleted %d of %d, refused %q", h.Kept, h.DeletedRows, h.PhysicalRows, h.CompactRefused)
	}
	if why := h.Behind(now, time.Hour); len(why) != 1 {
		t.Fatalf("2 h after the last write, lag 1 h: behind %q", why)
	}
	if why := h.Behind(h.CompactableSince.Add(time.Hour), time.Hour); len(why) != 0 {
		t.Fatalf("exactly the lag after the last write: behind %q", why)
	}
	under := h
	under.CompactBound = h.Compactable + 1
	if why := under.Behind(now, time.Hour); len(why) != 0 {
		t.Fatalf("below the bound: behind %q", why)
	}
	// Pinned: status reads every manifest once (deriving the change
	// records), and the backlog's dry plan adds 2 LISTs (branches, the
	// latest version) and 1 GET (the latest manifest) to what it sent
	// before (GET=127 LIST=7).
	if got, want := store.Counts(), (objstore.Counts{Get: 128, List: 9}); got != want {
		t.Fatalf("status requests %+v, want %+v", got, want)
	}
	src, err := formats.Open(ctx, store, ref)
	if err != nil {
		t.Fatal(err)
	}
	store.Reset()
	if _, err := src.(maintenance.BacklogPlanner).CompactBacklog(ctx, ref.Policy.WithDefaults()); err != nil {
		t.Fatal(err)
	}
	if got, want := store.Counts(), (objstore.Counts{Get: 1, List: 2}); got != want {
		t.Fatalf("dry plan requests %+v, want %+v", got, want)
	}
}
