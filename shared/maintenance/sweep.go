package maintenance

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/table"
)

// SweepResult reports one orphan sweep.
type SweepResult struct {
	Listed     int // data and deletion files listed
	Referenced int // of those, referenced by a retained version
	Young      int // unreferenced but younger than the grace window
	Foreign    int // names this format does not write: left alone
	Deleted    int
	Planned    []string // with DryRun: what would be deleted
	Requests   int
}

// Sweep deletes files under data/ and _deletions/ that no retained version
// references and that are older than the grace window: leftovers of failed
// commits, crashed compactions, and files kept for tags since removed.
//
// Files are listed first and references read after: a file committed after
// the references were read was written less than a grace window before its
// commit, so it is younger than the grace window when listed and kept.
func Sweep(ctx context.Context, t *table.Table, p Policy, now time.Time, maxDeletes int, dryRun bool) (SweepResult, error) {
	p = p.WithDefaults()
	var res SweepResult
	type cand struct {
		key string
		mod time.Time
	}
	var cands []cand
	for _, prefix := range []string{table.DataPrefix, table.DeletionsPrefix} {
		err := objstore.ListAll(ctx, t.Store(), t.Root()+prefix, "", func(o objstore.ObjectInfo) error {
			res.Listed++
			cands = append(cands, cand{o.Key, o.LastModified})
			return nil
		})
		if err != nil {
			return res, err
		}
	}
	refs, err := retainedReferences(ctx, t)
	if err != nil {
		return res, err
	}
	var del []string
	for _, c := range cands {
		rel := strings.TrimPrefix(c.key, t.Root())
		switch {
		case refs[rel]:
			res.Referenced++
		case !table.IsDataKey(rel):
			res.Foreign++
		case now.Sub(c.mod) < p.Grace:
			res.Young++
		case maxDeletes > 0 && len(del) >= maxDeletes:
		default:
			del = append(del, c.key)
		}
	}
	if dryRun {
		res.Planned = del
		return res, nil
	}
	n, err := objstore.DeleteAll(ctx, t.Store(), del, p.DeleteBatch)
	res.Deleted = n
	res.Requests = (len(del) + p.DeleteBatch - 1) / p.DeleteBatch
	return res, err
}

// retainedReferences returns every data and deletion file (relative to the
// root) that a retained version references: the latest manifest, files
// removed by versions (floor, latest] (so referenced by a version at or
// above the floor), and the manifests of tagged versions.
func retainedReferences(ctx context.Context, t *table.Table) (map[string]bool, error) {
	floor, err := t.Floor(ctx)
	if err != nil {
		return nil, err
	}
	m, err := t.Refresh(ctx)
	if err != nil {
		return nil, err
	}
	refs := map[string]bool{}
	addManifest := func(m *table.Manifest) {
		for _, f := range m.Fragments {
			refs[f.File.DataKey()] = true
			if f.Deletion != nil {
				refs[table.DeletionKey(f.File, f.Deletion.ID)] = true
			}
		}
	}
	addManifest(m)
	for r := max(floor, 1) + 1; r <= m.Version; r++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		cr, err := t.ChangeRecord(ctx, r)
		if errors.Is(err, objstore.ErrNotExist) {
			if cr, err = t.RepairChangeRecord(ctx, r); err != nil {
				return nil, fmt.Errorf("sweep: change record %d missing and not repairable: %w", r, err)
			}
		}
		if err != nil {
			return nil, err
		}
		for _, rf := range cr.Removed {
			refs[rf.Key] = true
		}
	}
	tags, err := t.Tags(ctx)
	if err != nil {
		return nil, err
	}
	for _, v := range tags {
		snap, err := t.Checkout(ctx, v)
		if err != nil {
			return nil, fmt.Errorf("sweep: tagged version %d: %w", v, err)
		}
		addManifest(snap.Manifest())
	}
	return refs, nil
}
