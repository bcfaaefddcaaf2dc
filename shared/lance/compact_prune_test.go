package lance_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/internal/testkit"
	"github.com/tablekeep/tablekeep/shared/lance"
	"github.com/tablekeep/tablekeep/shared/lance/lancetest"
	"github.com/tablekeep/tablekeep/shared/maintenance"
)

// TestCompactThenPruneSeedChurn is issue 21's "seed's churn" check end to
// end: LanceDB writes the seed's churn (delete+add and mergeInsert upserts,
// deletes, appends, a btree index, two tags); tablekeep compacts it (the
// policy's defaults: deleted threshold 0.1) and then prunes it through its
// pipeline, keeping the last 2 versions and the tagged ones. LanceDB then
// lists exactly those, reads each one's rows exactly as before (the
// compaction's version as the latest before it), resolves the tags, its
// index queries agree with its scans, its own optimize() runs and it
// accepts writes, also with its latest_version_hint.json naming a version
// tablekeep pruned. For each pinned LanceDB release.
func TestCompactThenPruneSeedChurn(t *testing.T) {
	lancetest.ForEach(t, func(t *testing.T, r lancetest.Release) { compactThenPrune(t, releaseDB(r)) })
}

func compactThenPrune(t *testing.T, db ldb) {
	ctx := context.Background()
	dir := t.TempDir()
	c := db.create(t, dir, 8, "") // 8 rounds: no final optimize, so one-row fragments remain
	if len(c.Tags) != 2 {
		t.Fatalf("fixture: tags %v, want 2", c.Tags)
	}
	before := db.dump(t, dir)
	vb := db.verify(t, dir)
	store := testkit.DiskStoreAt(t, dir)
	rep, err := lance.Open(store, "t.lance").Compact(ctx, lance.CompactOptions{TargetRows: 1 << 20, DropDeletedAt: 0.1})
	if err != nil || rep.Committed == 0 || rep.Version != vb.Version+1 {
		t.Fatalf("compact: %+v %v", rep, err)
	}
	compacted := db.dump(t, dir)
	checkCompacted(t, before, compacted, rep.Version)
	if va := db.verify(t, dir); va.Fragments >= vb.Fragments {
		t.Fatalf("LanceDB counts %d fragments, %d before", va.Fragments, vb.Fragments)
	}

	p := maintenance.Policy{Grace: time.Hour, KeepLast: 2, RangeVersions: 4}
	plan, _ := pruneLance(t, store, "t.lance/", p, time.Now().Add(24*time.Hour))
	if plan.Floor != rep.Version-1 {
		t.Fatalf("floor %d, want %d (the last 2 versions kept)", plan.Floor, rep.Version-1)
	}
	after := db.dump(t, dir)
	lancetest.CheckRetained(t, compacted, after, lancetest.AtOrAbove(plan.Floor, c.Tags))
	if len(after.Tags) != len(c.Tags) {
		t.Fatalf("tags after %v, before %v", after.Tags, c.Tags)
	}
	if len(after.Versions) >= len(compacted.Versions) {
		t.Fatalf("nothing pruned: %v", after.Versions)
	}
	db.verify(t, dir)

	// LanceDB's _versions/latest_version_hint.json names the last version
	// it wrote (rep.Version-1): prune that one too (the last version
	// kept), so the hint names a pruned version. tablekeep neither takes
	// the hint for a manifest nor deletes it, and LanceDB still opens the
	// latest version, optimizes and writes (below).
	hintFile := filepath.Join(dir, "t.lance", "_versions", "latest_version_hint.json")
	hint, err := os.ReadFile(hintFile)
	var h struct {
		Version uint64 `json:"version"`
	}
	if err != nil || json.Unmarshal(hint, &h) != nil || h.Version != rep.Version-1 {
		t.Fatalf("fixture: hint %q (%v), want version %d", hint, err, rep.Version-1)
	}
	p.KeepLast = 1
	if plan, _ = pruneLance(t, store, "t.lance/", p, time.Now().Add(48*time.Hour)); plan.Floor != rep.Version {
		t.Fatalf("floor %d, want %d (the last version kept)", plan.Floor, rep.Version)
	}
	if b, err := os.ReadFile(hintFile); err != nil || string(b) != string(hint) {
		t.Fatalf("the hint after the prune: %q, %v (was %q)", b, err, hint)
	}
	lancetest.CheckRetained(t, after, db.dump(t, dir), lancetest.AtOrAbove(plan.Floor, c.Tags))
	var opt struct {
		Latest uint64 `json:"latest"`
	}
	db.node(t, &opt, "compact", dir, "t")
	db.verify(t, dir)
	if w := db.write(t, dir); w <= opt.Latest {
		t.Fatalf("write after optimize at version %d (optimize at %d)", w, opt.Latest)
	}
	db.verify(t, dir)
}
