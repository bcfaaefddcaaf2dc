package maintenance_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/progress"
	"github.com/tablekeep/tablekeep/shared/queue"
	"github.com/tablekeep/tablekeep/shared/table"
)

// TestSweepFormat3ReadsEachVersionOnce: on a format-3 table of 1,000
// versions whose record index (64 entries) no longer covers its history,
// most versions have no change record. The dry-run sweep (what status
// runs) lists the records once and reads, for a version without one, the
// manifest before it: one GET a version, not a failed GET of the record and
// then two manifests (1,045 GETs before the fix, 415 after; the 42 s
// status of a 20,001-version table in issue 32). It plans exactly the
// orphan, and its phase ticks once per version on the bars of ctx.
func TestSweepFormat3ReadsEachVersionOnce(t *testing.T) {
	e := newEnv(t, filepath.Join(t.TempDir(), "wh"), testPolicy(), queue.EmbeddedOptions{})
	e.format = 3
	tb := e.create(t)
	const versions = 1000
	for i := range versions - 1 { // 200-byte rows: a flush (a record) every few writes
		upsert(t, tb, fmt.Sprintf("k%04d", i), strings.Repeat("v", 200))
	}
	m := tb.Cached()
	if m.RecordsFrom <= 2 || len(m.Records) != table.MaxRecordIndex {
		t.Fatalf("record index from %d with %d entries: want it past the history's start", m.RecordsFrom, len(m.Records))
	}
	ctx := context.Background()
	orphan := e.ref.Root + "data/00000000deadbeef.parquet"
	if err := e.disk.Put(ctx, orphan, []byte("x")); err != nil {
		t.Fatal(err)
	}
	c := objstore.NewCounting(e.disk)
	ot, err := table.Open(ctx, c, e.ref.Root, e.opts())
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	ticks := map[string]int{}
	bars := func(desc string, total int) progress.Bar {
		return &countBar{mu: &mu, ticks: ticks, desc: fmt.Sprintf("%s /%d", desc, total)}
	}
	before := c.Counts()
	res, err := maintenance.Sweep(progress.Named(progress.WithBars(ctx, bars), "tbl: sweep"), ot, e.ref.Policy, time.Now().Add(2*time.Hour), 0, true)
	if err != nil {
		t.Fatal(err)
	}
	got := c.Counts().Sub(before)
	if !slices.Equal(res.Planned, []string{orphan}) {
		t.Fatalf("planned %v, want only the orphan %s", res.Planned, orphan)
	}
	// The latest manifest; the floor, tags, data/, _deletions/ and
	// _changes/ listings; then one GET a version below the index (its
	// record, or the manifest before it) and one a record the index names.
	// Before: 1,045 GETs (a failed GET of the record, then two manifests).
	unindexed := int64(m.RecordsFrom - 2) // versions 2 .. records from - 1
	if want := 1 + unindexed + int64(len(m.Records)); got.Get != want || got.List != 6 || got.Head+got.Put+got.DeleteRequests != 0 {
		t.Fatalf("dry-run sweep of %d versions (records from %d): %s; want GET=%d LIST=6, nothing else", versions, m.RecordsFrom, got, want)
	}
	if want := fmt.Sprintf("tbl: sweep: reading manifests /%d", versions-1); ticks[want] != versions-1 {
		t.Fatalf("progress %v, want %q ticked %d times", ticks, want, versions-1)
	}
}

type countBar struct {
	mu    *sync.Mutex
	ticks map[string]int
	desc  string
}

func (b *countBar) Add(n int) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.ticks[b.desc] += n
	return nil
}
func (b *countBar) Finish() error { return nil }
