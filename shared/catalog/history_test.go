package catalog

import (
	"context"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/internal/testkit"
	"github.com/tablekeep/tablekeep/shared/maintenance"
)

// TestStatsHistory: three _stats rows of table a written by three commits
// (b's row once, in between) come back as a's three points, oldest first,
// and b's one; a history of one version is the latest rows only.
func TestStatsHistory(t *testing.T) {
	ctx := context.Background()
	c := openCatalog(t, testkit.DiskStore(t))
	for _, s := range []maintenance.TableStats{{Name: "a", Versions: 1}, {Name: "a", Versions: 2}, {Name: "b", Versions: 7}, {Name: "a", Versions: 3}} {
		if err := c.PutStats(ctx, s); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond) // distinct updated_at (PutStatsBatch stamps the wall clock)
	}
	h, err := c.StatsHistory(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	a, b := h["a"], h["b"]
	if len(a) != 3 || a[0].Versions != 1 || a[1].Versions != 2 || a[2].Versions != 3 || !a[0].At.Before(a[1].At) {
		t.Fatalf("a: %+v", a)
	}
	if len(b) != 1 || b[0].Versions != 7 {
		t.Fatalf("b: %+v", b)
	}
	if h, err := c.StatsHistory(ctx, 1); err != nil || len(h["a"]) != 1 || h["a"][0].Versions != 3 {
		t.Fatalf("one version: %+v %v", h, err)
	}
}
