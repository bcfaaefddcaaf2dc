package awsfn_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/warehouse"
)

// pagePuts counts the PUTs of the status page.
type pagePuts struct {
	objstore.Store
	n int
}

func (p *pagePuts) Put(ctx context.Context, key string, data []byte) error {
	if strings.HasSuffix(key, warehouse.StatusPageKey) {
		p.n++
	}
	return p.Store.Put(ctx, key, data)
}

// TestCompactorWritesStatusPage: each scheduled pass writes the status
// page into the warehouse (_status/index.html, one PUT): a table whose
// maintenance failed is listed first as failing with its error, the
// others as healthy with their _stats history; the next pass, with
// _status/ in the warehouse, maintains the same tables (it is no table)
// and rewrites the page.
func TestCompactorWritesStatusPage(t *testing.T) {
	ctx := context.Background()
	f := newFleet(t, []string{"b1", "b2"}, "0-broken")
	puts := &pagePuts{Store: f.st}
	f.d.Store = puts
	sum := f.scheduled(t, ctx)
	if sum.Errors != 1 {
		t.Fatalf("first pass %+v", sum)
	}
	if puts.n != 1 {
		t.Errorf("%d PUTs of the status page in a pass, want 1", puts.n)
	}
	page := func() string {
		t.Helper()
		b, err := f.st.Get(ctx, "warehouse/"+warehouse.StatusPageKey)
		if err != nil {
			t.Fatalf("status page: %v", err)
		}
		return string(b)
	}
	s := page()
	for _, want := range []string{"by the scheduled compactor", "<b>1</b><span>failing</span>", "<b>0</b><span>behind</span>",
		`id="t-0-broken"`, "FAILING", "Last error:", `id="t-b1"`, `id="t-_stats"`} {
		if !strings.Contains(s, want) {
			t.Fatalf("page lacks %q:\n%s", want, s)
		}
	}
	if strings.Index(s, `id="t-0-broken"`) > strings.Index(s, `id="t-b1"`) {
		t.Errorf("the failing table is not listed first")
	}
	f.clock.Advance(15 * time.Minute)
	f.write(t, "b1", "new")
	sum = f.scheduled(t, ctx)
	if sum.Registered != 5 || sum.NotReached != 0 {
		t.Fatalf("second pass %+v", sum)
	}
	if s2 := page(); s2 == s || !strings.Contains(s2, `id="t-b1"`) {
		t.Errorf("the second pass did not rewrite the page")
	}
}
