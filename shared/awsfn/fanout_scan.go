package awsfn

import (
	"context"
	"fmt"

	"github.com/tablekeep/tablekeep/shared/catalog"
	"github.com/tablekeep/tablekeep/shared/fleet"
	"github.com/tablekeep/tablekeep/shared/maintenance"
)

// This file is the one place where the fan-out calls the maintenance
// library: the scan of tables in need and the maintenance of one table.

// scanTables returns the tables in need (fleet.Scheduler.Scan: one LIST
// per table, none for a table backing off after failures), in the order to
// maintain them (longest waiting first, failed tables last), and the scan,
// whose mark updates RecordScan writes after the inline work.
func scanTables(ctx context.Context, r *maintenance.Runner) (*fleet.Scan, []maintenance.TableRef, error) {
	sc, err := fleet.New(r).Scan(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("scan tables: %w", err)
	}
	refs := make([]maintenance.TableRef, len(sc.Need))
	for i, n := range sc.Need {
		refs[i] = n.Ref
	}
	return sc, refs, nil
}

// maintainTable maintains one table (lock, compact, plan prune) and
// records its stats row and mark (RecordTables): MaintainTable writes
// neither. The recorded report carries the failure count and retry time
// the index recorded, which the follow-up job's delay follows.
func maintainTable(ctx context.Context, r *maintenance.Runner, ref maintenance.TableRef) (maintenance.TableReport, error) {
	f := fleet.New(r)
	tr, err := f.MaintainTable(ctx, ref)
	if rec := f.RecordTables(ctx, tr); len(rec.Tables) == 1 {
		tr = rec.Tables[0]
	}
	return tr, err
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
