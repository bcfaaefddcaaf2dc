package embedded

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/catalog"
	"github.com/tablekeep/tablekeep/shared/lance/lancetest"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
)

// prefixCounter counts the requests that touch keys under a prefix.
type prefixCounter struct {
	objstore.Store
	prefix string
	mu     sync.Mutex
	counts map[string]int
}

func (p *prefixCounter) count(kind, key string) {
	if strings.HasPrefix(key, p.prefix) {
		p.mu.Lock()
		p.counts[kind]++
		p.mu.Unlock()
	}
}

func (p *prefixCounter) take() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.counts
	p.counts = map[string]int{}
	return c
}

func (p *prefixCounter) Get(ctx context.Context, k string) ([]byte, error) {
	p.count("GET", k)
	return p.Store.Get(ctx, k)
}

func (p *prefixCounter) Head(ctx context.Context, k string) (objstore.ObjectInfo, error) {
	p.count("HEAD", k)
	return p.Store.Head(ctx, k)
}

func (p *prefixCounter) Put(ctx context.Context, k string, b []byte) error {
	p.count("PUT", k)
	return p.Store.Put(ctx, k, b)
}

func (p *prefixCounter) PutIfAbsent(ctx context.Context, k string, b []byte) error {
	p.count("PUT", k)
	return p.Store.PutIfAbsent(ctx, k, b)
}

func (p *prefixCounter) List(ctx context.Context, o objstore.ListOptions) (objstore.ListPage, error) {
	p.count("LIST", o.Prefix)
	return p.Store.List(ctx, o)
}

func (p *prefixCounter) Delete(ctx context.Context, keys []string) error {
	if len(keys) > 0 {
		p.count("DELETE", keys[0])
	}
	return p.Store.Delete(ctx, keys)
}

// TestMaintainLanceDataset: LanceDB writes a dataset (the seed's churn,
// deletions, an index, two tags) into the warehouse directory; registered
// with format lance, Maintain prunes it (no compaction; the sweep deletes
// an old orphan file), and LanceDB then reads every retained version exactly as before and
// the latest accepts a write. Once settled, a pass with nothing written
// costs the dataset one LIST (the scan: LanceDB's inverted manifest
// names); a LanceDB write is seen and maintained.
func TestMaintainLanceDataset(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	dbdir := filepath.Join(dir, "lance")
	c := lancetest.Create(t, dbdir, "ds", 20, "")
	before := lancetest.Dump(t, dbdir, "ds")
	clk := &skewClock{}
	var pc *prefixCounter
	w, err := Open(ctx, dir, clk, nil, func(s objstore.Store) objstore.Store {
		pc = &prefixCounter{Store: s, prefix: "lance/", counts: map[string]int{}}
		return pc
	})
	if err != nil {
		t.Fatal(err)
	}
	p := maintenance.Policy{KeepLast: 3, Grace: time.Hour}
	if err := w.Catalog.RegisterFormat(ctx, "ds", "lance/ds.lance", p, catalog.FormatLance); err != nil {
		t.Fatal(err)
	}
	clk.off = 2 * time.Hour // every version past the 1h grace

	// A dry run plans, itemises the ranges and changes nothing.
	files := listingOf(t, w.Store, "lance/")
	dry, err := w.Maintain(ctx, Options{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(dry.Cleanup["ds"]) == 0 || dry.Cleanup["ds"][0].Keys() == 0 {
		t.Fatalf("dry run: no cleanup itemised for the dataset: %+v", dry.Cleanup)
	}
	if got := listingOf(t, w.Store, "lance/"); !sameKeys(got, files) {
		t.Fatalf("dry run changed the dataset: %d keys before, %d after", len(files), len(got))
	}

	// An orphan data file 8 days old (past Lance's 7-day threshold): the
	// pass's sweep deletes it.
	orphan := filepath.Join(dbdir, "ds.lance", "data", "0a0a0a0a-old-orphan.lance")
	if err := os.WriteFile(orphan, []byte("orphan"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(orphan, time.Now().Add(-8*24*time.Hour), time.Now().Add(-8*24*time.Hour)); err != nil {
		t.Fatal(err)
	}

	rep, err := w.Maintain(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var tr *maintenance.TableReport
	for i := range rep.Run.Tables {
		if rep.Run.Tables[i].Table == "ds" {
			tr = &rep.Run.Tables[i]
		}
	}
	floor := c.Latest - uint64(p.KeepLast) + 1
	if tr == nil || tr.Prune.Floor != floor || len(tr.Prune.Ranges) == 0 || tr.Compacted.Committed != 0 {
		t.Fatalf("ds maintained as %+v, want floor %d and ranges, no compaction", tr, floor)
	}
	if sr := rep.Sweeps["ds"]; sr.Skipped != "" || sr.Deleted != 1 || sr.Manifests == 0 {
		t.Fatalf("the sweep of the Lance dataset: %+v, want the old orphan deleted", sr)
	}
	if _, err := os.Stat(orphan); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the old orphan is still there: %v", err)
	}
	if rep.Drain.Succeeded < len(tr.Prune.Ranges) || rep.Drain.Failed != 0 {
		t.Fatalf("drain %+v", rep.Drain)
	}
	lancetest.CheckRetained(t, before, lancetest.Dump(t, dbdir, "ds"), lancetest.AtOrAbove(floor, c.Tags))

	// Settle (the catalog's own tables), then a pass with nothing written.
	for range 2 {
		if _, err := w.Maintain(ctx, Options{}); err != nil {
			t.Fatal(err)
		}
	}
	pc.take()
	rep, err = w.Maintain(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range rep.Run.Tables {
		if tr.Table == "ds" {
			t.Fatalf("an unchanged Lance dataset was maintained: %+v", tr)
		}
	}
	if got := pc.take(); len(got) != 1 || got["LIST"] != 1 {
		t.Fatalf("idle pass: requests on the dataset %v, want one LIST", got)
	}

	// A LanceDB write on the latest version is accepted and seen.
	latest := lancetest.Write(t, dbdir, "ds")
	clk.off += p.WithDefaults().CompactMaxWait + time.Minute
	for range 2 {
		if rep, err = w.Maintain(ctx, Options{}); err != nil {
			t.Fatal(err)
		}
		for _, tr := range rep.Run.Tables {
			if tr.Table == "ds" && tr.Prune.Latest != latest {
				t.Fatalf("after a LanceDB write (latest %d) ds was maintained at %d", latest, tr.Prune.Latest)
			}
		}
		clk.off += p.WithDefaults().CompactMaxWait + time.Minute
	}
	if d := lancetest.Dump(t, dbdir, "ds"); d.Versions[len(d.Versions)-1] != latest {
		t.Fatalf("LanceDB versions after the last pass: %v", d.Versions)
	}
}

func listingOf(t *testing.T, st objstore.Store, prefix string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	if err := objstore.ListAll(context.Background(), st, prefix, "", func(o objstore.ObjectInfo) error {
		out[o.Key] = o.Size
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func sameKeys(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
