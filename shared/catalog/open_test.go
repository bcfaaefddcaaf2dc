package catalog

import (
	"context"
	"errors"
	"testing"

	"github.com/tablekeep/tablekeep/shared/internal/testkit"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/table"
)

// TestOpenExistingWritesNothing: OpenExisting on a store without
// _registry is ErrNoWarehouse and writes nothing; after Open it opens the
// same warehouse; Exists says which.
func TestOpenExistingWritesNothing(t *testing.T) {
	ctx := context.Background()
	st := testkit.DiskStore(t)
	if ok, err := Exists(ctx, st, "wh"); ok || err != nil {
		t.Fatalf("Exists on an empty store: %v %v", ok, err)
	}
	if _, err := OpenExisting(ctx, st, "wh", table.Options{}); !errors.Is(err, ErrNoWarehouse) {
		t.Fatalf("OpenExisting: %v, want ErrNoWarehouse", err)
	}
	keys := 0
	_ = objstore.ListAll(ctx, st, "", "", func(objstore.ObjectInfo) error { keys++; return nil })
	if keys != 0 {
		t.Fatalf("OpenExisting wrote %d keys", keys)
	}
	openCatalog(t, st)
	c, err := OpenExisting(ctx, st, "wh", table.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if refs, err := c.Tables(ctx); err != nil || len(refs) != 2 {
		t.Fatalf("tables: %v %v", refs, err)
	}
	if ok, _ := Exists(ctx, st, "wh"); !ok {
		t.Fatal("Exists after Open: false")
	}
}
