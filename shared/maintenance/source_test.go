package maintenance_test

import (
	"context"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/queue"
)

// TestSourcePipelineOnTablekeepTable: the format-neutral pipeline
// (PlanSourcePrune, ApplySourcePrune, CleanSourceRange over a TableSource)
// plans the same floor and ranges as PlanPrune on a tablekeep table, and
// leaves exactly the files the tablekeep-specific cleaner leaves; the
// table verifies (rows of every retained version, the tagged one, no
// version below the floor, no orphan after a sweep).
func TestSourcePipelineOnTablekeepTable(t *testing.T) {
	ctx := context.Background()
	p := testPolicy()
	p.RangeVersions = 5
	p.MaxKeysPerRun = 2 // continuations
	h := buildHistory(t, p)

	a := t.TempDir()
	copyDir(t, h.dir, a)
	ea := newEnv(t, a, p, queue.EmbeddedOptions{})
	ea.clock.Advance(2 * time.Hour)
	ta := ea.open(t)
	planA, err := maintenance.PlanPrune(ctx, ta, tblName, p, ea.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := maintenance.ApplyPrune(ctx, ta, &planA, maintenance.QueueEnqueuer{Q: ea.q}); err != nil {
		t.Fatal(err)
	}
	ea.drain(t)

	b := t.TempDir()
	copyDir(t, h.dir, b)
	eb := newEnv(t, b, p, queue.EmbeddedOptions{})
	eb.clock.Advance(2 * time.Hour)
	src := &maintenance.TableSource{T: eb.open(t)}
	planB, err := maintenance.PlanSourcePrune(ctx, src, tblName, p, eb.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	q := &bodies{}
	if err := maintenance.ApplySourcePrune(ctx, src, &planB, q); err != nil {
		t.Fatal(err)
	}
	if planA.Floor != planB.Floor || !slices.Equal(planA.Ranges, planB.Ranges) || planA.Floor <= 1 {
		t.Fatalf("plans differ: floor %d ranges %v; source: floor %d ranges %v", planA.Floor, planA.Ranges, planB.Floor, planB.Ranges)
	}
	conts := 0
	for msgs := q.take(); len(msgs) > 0; msgs = q.take() {
		for _, body := range msgs {
			msg, err := maintenance.DecodeRangeMessage(body)
			if err != nil {
				t.Fatal(err)
			}
			res, err := maintenance.CleanSourceRange(ctx, src, msg, p, maintenance.CleanerLimits{}, q)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%+v: %d data keys, %d meta keys, kept %d", msg, res.DataKeys, res.ManifestKeys, res.KeptForTags)
			if res.Continuation != nil {
				conts++
			}
		}
	}
	if conts == 0 {
		t.Fatal("no continuation exercised")
	}
	fa, fb := treeFiles(t, a), treeFiles(t, b)
	delete(fa, "wh/tbl/_maintenance/cleanup-state.json") // the Cleaner's status record
	if !maps(fa, fb) {
		t.Fatalf("files differ:\n tablekeep cleaner: %v\n source cleaner:    %v", keys(fa), keys(fb))
	}
	h.verify(t, eb, "source pipeline")
}

func treeFiles(t testing.TB, dir string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if !strings.Contains(rel, ".tmp") {
			out[filepath.ToSlash(rel)] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func maps(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
