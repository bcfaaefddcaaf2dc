package maintenance_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/formats"
	"github.com/tablekeep/tablekeep/shared/lance"
	"github.com/tablekeep/tablekeep/shared/lance/lancetest"
	"github.com/tablekeep/tablekeep/shared/maintenance"
)

// TestLanceFloorWithoutHeadNotTrusted (issue 29 item 4, Lance): the
// sidecar's floor is trusted only through its head, whose version's
// manifest timestamp proves the history (TestLanceRecreatedDatasetNotPruned).
// Here the dataset is removed and created again and the sidecar keeps its
// floor markers but not its head. Before the fix the planner took the old
// floor: every version of the new dataset below it, inside its grace
// window, prunable. Now the plan is refused (ErrOtherHistory,
// with how to reset) and nothing is deleted.
func TestLanceFloorWithoutHeadNotTrusted(t *testing.T) {
	ctx := context.Background()
	lp := planLance(t)
	st := lp.store(t)
	c := lp.recreate(t, 30, "_tablekeep/head.json")
	if c.Latest <= lp.floor {
		t.Fatalf("the new dataset has %d versions, the old floor is %d", c.Latest, lp.floor)
	}
	before := lancetest.Dump(t, lp.wh, "ds")
	files := listing(t, st, "wh/ds.lance/")
	src, err := formats.Open(ctx, st, lp.ref)
	if err != nil {
		t.Fatal(err)
	}
	plan, perr := maintenance.PlanSourcePrune(ctx, src, lp.ref.Name, lp.ref.Policy, time.Now())
	if perr == nil {
		// The unfixed planner: the old floor taken, versions inside their
		// grace window prunable (enqueued at once, or when the old
		// history's prune state re-sends its ranges after ReplanAfter).
		t.Fatalf("plan took floor %d (from %d): %d versions inside their grace window prunable, want lance.ErrOtherHistory",
			plan.Floor, plan.OldFloor, plan.Prunable)
	}
	if err := keptAll(files, listing(t, st, "wh/ds.lance/"), "wh/ds.lance/"); err != nil {
		t.Fatalf("the re-created dataset lost versions (plan error %v): %v", perr, err)
	}
	if !errors.Is(perr, lance.ErrOtherHistory) || !strings.Contains(perr.Error(), "_tablekeep/") {
		t.Fatalf("plan: %v, want lance.ErrOtherHistory naming the prefix to delete", perr)
	}
	t.Logf("plan: %v", perr)
	lancetest.CheckRetained(t, before, lancetest.Dump(t, lp.wh, "ds"), func(uint64) bool { return true })
}

// recreate removes the dataset by other means than LanceDB's dropTable
// (its Lance prefixes and the paths also, relative to the dataset; the
// rest of _tablekeep/ stays) and has LanceDB create it again with commits
// commits.
func (lp *lancePlanned) recreate(t *testing.T, commits int, also ...string) lancetest.Created {
	t.Helper()
	ds := filepath.Join(lp.wh, "ds.lance")
	for _, d := range append([]string{"data", "_versions", "_transactions", "_indices", "_deletions", "_refs"}, also...) {
		if err := os.RemoveAll(filepath.Join(ds, d)); err != nil {
			t.Fatal(err)
		}
	}
	return lancetest.Create(t, lp.wh, "ds", commits, "")
}
