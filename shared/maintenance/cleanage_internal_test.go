package maintenance

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/internal/fakeclock"
	"github.com/tablekeep/tablekeep/shared/internal/testkit"
	"github.com/tablekeep/tablekeep/shared/objstore"
)

// TestReadAgesListsOrHeads pins how the cleaner learns the ages of the
// files it deletes (issue 29 item 5): 24 keys of one directory of 2,100
// objects are listed, two pages (one per 12 keys); two keys the listing
// passed but did not find are gone (not deleted, no request), two beyond
// where it stopped get a HEAD each; 3 keys of another directory (fewer
// than 12) get a HEAD each, one not found. Exactly 2 LIST and 5 HEAD;
// old splits at now - LastModified > minAge.
func TestReadAgesListsOrHeads(t *testing.T) {
	ctx := context.Background()
	clk := fakeclock.New(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	st := fakeclock.NewStore(testkit.NewMemStore(), clk)
	name := func(i int) string { return fmt.Sprintf("r/data/%05d", i) }
	for i := range 2100 {
		if i == 7 || i == 9 { // the two gone ones
			continue
		}
		if err := st.Put(ctx, name(i), nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{"r/del/a", "r/del/b"} {
		if err := st.Put(ctx, k, nil); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(time.Hour)
	young := "r/data/02099"
	if err := st.Put(ctx, young, nil); err != nil { // rewritten now: young
		t.Fatal(err)
	}
	var keys []string
	for i := range 20 {
		keys = append(keys, name(10+i*90)) // spread over the first 2,000
	}
	keys = append(keys, name(7), name(9), name(2050), young, "r/del/a", "r/del/b", "r/del/c")
	slices.Sort(keys)
	keys = slices.Compact(keys)
	cnt := objstore.NewCounting(st)
	a, err := readAges(ctx, cnt, keys, nil, 4, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 27 {
		t.Fatalf("%d keys", len(keys))
	}
	if got := cnt.Counts(); got != (objstore.Counts{List: 2, Head: 5}) {
		t.Errorf("requests %v, want 2 LIST 5 HEAD (%d keys)", got, len(keys))
	}
	del, kept := a.old(clk.Now(), 30*time.Minute)
	if !slices.Equal(kept, []string{young}) || slices.Contains(del, name(7)) || slices.Contains(del, name(9)) ||
		slices.Contains(del, "r/del/c") || len(del) != len(keys)-4 {
		t.Errorf("delete %d of %d keys %v, kept %v", len(del), len(keys), del, kept)
	}
}
