package table

import (
	"context"
	"encoding/hex"
	"fmt"
	"testing"

	"github.com/tablekeep/tablekeep/shared/internal/testkit"
)

// TestDeletionVectorNamesUnique: new deletion vectors get 63 random bits
// (16 hex digits, top bit set), so a name is never drawn again once its
// vector is deleted; format-1 ids keep their 8-digit names.
func TestDeletionVectorNamesUnique(t *testing.T) {
	ctx := context.Background()
	st := testkit.DiskStore(t)
	tbl := must(Create(ctx, st, "t", regSchema, "name", Options{Format: 2}))
	var rs []row
	for i := range 20 {
		rs = append(rs, row{fmt.Sprintf("k%02d", i), "u", int64(i)})
	}
	must(tbl.Append(ctx, regBatch(rs...)))
	seen := map[string]bool{}
	for i := range 19 {
		must(tbl.Delete(ctx, fmt.Sprintf("k%02d", i)))
		d := tbl.Cached().Fragments[0].Deletion
		if d == nil || d.ID < 1<<63 {
			t.Fatalf("deletion %+v: id without the top bit", d)
		}
		k := DeletionKey(tbl.Cached().Fragments[0].File, d.ID)
		if seen[k] || !IsDataKey(k) || len(k) != len("_deletions/")+16+1+16+len(".del") {
			t.Fatalf("deletion key %q (seen %v, IsDataKey %v)", k, seen[k], IsDataKey(k))
		}
		seen[k] = true
		if _, err := st.Head(ctx, "t/"+k); err != nil {
			t.Fatal(err)
		}
	}
	if k := DeletionKey(1, 0xffffffff); k != "_deletions/0000000000000001-ffffffff.del" || !IsDataKey(k) {
		t.Fatalf("format-1 name %q", k)
	}
	// A format-1 manifest's 32-bit id decodes to the same name.
	b1, _ := hex.DecodeString(format1Example)
	if _, err := decodeManifest("x", b1); err != nil {
		t.Fatal(err)
	}
}
