package awsfn

import (
	"context"
	"fmt"
	"log/slog"
	"sort"

	"github.com/tablekeep/tablekeep/shared/catalog"
	"github.com/tablekeep/tablekeep/shared/maintenance"
)

// This file is the one place where the fan-out calls the maintenance
// library: the scan of tables (today: every registered table, most in need
// first, as Runner.Run orders them) and the maintenance of one table. When
// the library's scan of tables in need lands, scanTables switches to it and
// the rest of the fan-out is unchanged.

// scanTables returns the tables the scheduled run considers, in the order
// it maintains them.
func scanTables(ctx context.Context, cat *catalog.Catalog, log *slog.Logger) ([]maintenance.TableRef, error) {
	refs, err := cat.Tables(ctx)
	if err != nil {
		return nil, fmt.Errorf("list tables: %w", err)
	}
	stats, err := cat.Stats(ctx)
	if err != nil {
		log.WarnContext(ctx, "stats unreadable; maintaining in registry order", "err", err)
		stats = nil
	}
	need := func(ref maintenance.TableRef) int {
		s := stats[ref.Name]
		return s.Unreclaimed + s.SmallFrags
	}
	sort.SliceStable(refs, func(i, j int) bool { return need(refs[i]) > need(refs[j]) })
	return refs, nil
}

// maintainTable maintains one table (lock, compact, plan prune, stats).
func maintainTable(ctx context.Context, r *maintenance.Runner, ref maintenance.TableRef) (maintenance.TableReport, error) {
	return r.MaintainTable(ctx, ref)
}

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
