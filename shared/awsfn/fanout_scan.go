package awsfn

import (
	"context"
	"fmt"

	"github.com/tablekeep/tablekeep/shared/catalog"
	"github.com/tablekeep/tablekeep/shared/maintenance"
)

// resolveTable finds a registered table by name (unknown names wrap
// maintenance.ErrUnknownTable).
func resolveTable(ctx context.Context, cat *catalog.Catalog, name string) (maintenance.TableRef, error) {
	return cat.Resolve(ctx, name)
}

// tableRoots maps each registered table's root to it.
func tableRoots(ctx context.Context, cat *catalog.Catalog) (map[string]maintenance.TableRef, error) {
	refs, err := cat.Tables(ctx)
	if err != nil {
		return nil, fmt.Errorf("list tables: %w", err)
	}
	out := make(map[string]maintenance.TableRef, len(refs))
	for _, r := range refs {
		out[r.Root] = r
	}
	return out, nil
}
