package maintenance_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/queue"
)

// TestHealthAndDryRunModel: TableHealth's prunable counts and times, its
// verdict against a lag, and the dry run's model of the compaction's
// commit (PlanPruneAfterCompaction) with the reasons versions are kept.
func TestHealthAndDryRunModel(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, t.TempDir(), testPolicy(), queue.EmbeddedOptions{}) // keep-last 3, grace 1h
	tb := e.create(t)
	for i := range 9 {
		upsert(t, tb, fmt.Sprintf("k%d", i%4), fmt.Sprint(i)) // versions 2-10
	}
	tb = e.open(t)
	vs, err := tb.Versions(ctx)
	if err != nil || len(vs) != 10 {
		t.Fatalf("versions: %d, %v", len(vs), err)
	}
	grace := maintenance.RetentionGrace(tb, e.ref.Policy)
	now := vs[9].Time // the store's time of the last commit

	h, err := maintenance.TableHealth(ctx, tb, e.ref, now)
	if err != nil {
		t.Fatal(err)
	}
	// Versions 1-7 are outside the newest 3, all in their grace window:
	// prunable once version 8 (which superseded 7) is grace old.
	if h.PrunableNow != 0 || h.PrunableLater != 7 || !h.PrunableAt.Equal(vs[7].Time.Add(grace)) || h.Compactable != 4 || h.CompactGroups != 1 {
		t.Fatalf("health now: %+v", h)
	}
	if why := h.Behind(now, time.Hour); len(why) != 0 {
		t.Fatalf("behind just after writing: %v", why)
	}
	later := h.PrunableAt.Add(time.Second)
	if h, err = maintenance.TableHealth(ctx, tb, e.ref, later); err != nil {
		t.Fatal(err)
	}
	if h.PrunableNow != 7 || h.PrunableLater != 0 || h.Floor != 8 || h.PrunableSince.After(later) {
		t.Fatalf("health after the grace window: %+v", h)
	}
	if why := h.Behind(later, 2*time.Hour); len(why) != 0 {
		t.Fatalf("behind within the lag: %v", why)
	}
	why := h.Behind(later.Add(2*time.Hour), 2*time.Hour)
	if len(why) != 2 || !strings.HasPrefix(why[0], "7 versions prunable since ") || !strings.HasPrefix(why[1], "4 fragments compactable since ") {
		t.Fatalf("behind: %v", why)
	}

	// The real run compacts first (one group: version 11), then plans
	// pruning: keep-last 3 keeps 9-11. The dry run models that commit.
	plain, err := maintenance.PlanPrune(ctx, tb, tblName, e.ref.Policy, later)
	if err != nil {
		t.Fatal(err)
	}
	model, err := maintenance.PlanPruneAfterCompaction(ctx, tb, tblName, e.ref.Policy, later, 1)
	if err != nil {
		t.Fatal(err)
	}
	if plain.Floor != 8 || model.Floor != 9 || model.Prunable != 8 || model.Versions != 10 || model.Latest != 11 {
		t.Fatalf("plain floor %d; modelled %+v", plain.Floor, model)
	}
	if got := fmt.Sprint(model.Kept()); got != "[{9 10 keep-last 3 0001-01-01 00:00:00 +0000 UTC}]" {
		t.Fatalf("kept: %s", got)
	}
	// Right after writing, the grace window keeps them, until a stated time.
	early, err := maintenance.PlanPruneAfterCompaction(ctx, tb, tblName, e.ref.Policy, now, 1)
	if err != nil {
		t.Fatal(err)
	}
	kept := early.Kept()
	if early.Prunable != 0 || len(kept) != 2 || kept[0].From != 1 || kept[0].To != 8 || !strings.HasPrefix(kept[0].Reason, "grace until ") || kept[1].Reason != "keep-last 3" {
		t.Fatalf("kept early: %+v", kept)
	}
}
