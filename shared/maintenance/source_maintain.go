package maintenance

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/tablekeep/tablekeep/shared/dataset"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/table"
)

// LatestProber is a Source that tells a fleet scan its latest version
// cheaply (docs/lance.md "What a pass costs"). known, if not 0, is the
// latest version the dataset's last maintenance saw: a prober may use it
// to confirm that nothing was written since.
type LatestProber interface {
	LatestVersion(ctx context.Context, known uint64) (uint64, error)
}

// LatestStatser is a Source that summarises its latest version for
// _stats (rows and fragments), with at most a few requests.
type LatestStatser interface {
	LatestStats(ctx context.Context) (dataset.Stats, error)
}

// SourceCompacter is a Source that compacts its own format (Lance: pages
// spliced, committed as a Rewrite; docs/lance.md "Compaction"). The runner
// calls it under the table's lease, fence checking (and renewing) that
// lease, before the prune; dryRun plans and writes nothing.
type SourceCompacter interface {
	CompactSource(ctx context.Context, p Policy, fence func(context.Context) error, dryRun bool) (SourceCompaction, error)
}

// SourceCompaction is what a SourceCompacter did.
type SourceCompaction struct {
	Result CompactionResult
	// Groups describe the groups, one line each.
	Groups []string
	// LeftFragments are the fragments this run would have compacted but
	// did not (beyond its limits, stopped, or dropped for a conflict):
	// the mark brings the dataset back for them (markAfter's compactFrags).
	LeftFragments int
}

// openSource opens the Source of any registered dataset: through
// Runner.Sources, or OpenTableSource without one (tablekeep's own format
// only: another is ErrUnknownFormat, nothing read or deleted).
func (r *Runner) openSource(ctx context.Context, store objstore.Store, ref TableRef) (Source, error) {
	return openWith(ctx, r.Sources, store, ref)
}

// openWith opens ref's Source with open (nil: OpenTableSource).
func openWith(ctx context.Context, open SourceOpener, store objstore.Store, ref TableRef) (Source, error) {
	if open == nil {
		open = OpenTableSource
	}
	src, err := open(ctx, store, ref)
	if err != nil {
		return nil, fmt.Errorf("open %s (%s): %w", ref.Name, formatName(ref), err)
	}
	return src, nil
}

// formatName is ref's format as the logs name it.
func formatName(ref TableRef) string {
	if ref.Format == "" {
		return "tablekeep"
	}
	return ref.Format
}

// sourceLatest is the fleet scan's probe of a dataset of another format:
// the Source's LatestProber, or the full version listing.
func (r *Runner) sourceLatest(ctx context.Context, ref TableRef, known uint64) (uint64, error) {
	src, err := r.openSource(ctx, r.Store, ref)
	if err != nil {
		return 0, err
	}
	if p, ok := src.(LatestProber); ok {
		return p.LatestVersion(ctx, known)
	}
	if err := src.Prepare(ctx); err != nil {
		return 0, err
	}
	vs, err := src.Versions(ctx)
	if err != nil || len(vs) == 0 {
		return 0, errors.Join(err, fmt.Errorf("%s: %w", ref.Root, table.ErrNotATable))
	}
	return vs[len(vs)-1].Version, nil
}

// dryOverlay is the store a dry run opens a Source on: writes land in
// memory and are read back (Get, Head) by the same Source, so the change
// records a dry run derives can be planned from (PlanRange), while
// nothing reaches the store; deletes do nothing. Listings are the store's.
type dryOverlay struct {
	objstore.Store
	mu   sync.Mutex
	objs map[string][]byte
}

func newDryOverlay(st objstore.Store) *dryOverlay {
	return &dryOverlay{Store: st, objs: map[string][]byte{}}
}

func (o *dryOverlay) Get(ctx context.Context, key string) ([]byte, error) {
	o.mu.Lock()
	b, ok := o.objs[key]
	o.mu.Unlock()
	if ok {
		return append([]byte(nil), b...), nil
	}
	return o.Store.Get(ctx, key)
}

func (o *dryOverlay) Head(ctx context.Context, key string) (objstore.ObjectInfo, error) {
	o.mu.Lock()
	b, ok := o.objs[key]
	o.mu.Unlock()
	if ok {
		return objstore.ObjectInfo{Key: key, Size: int64(len(b))}, nil
	}
	return o.Store.Head(ctx, key)
}

func (o *dryOverlay) Put(_ context.Context, key string, b []byte) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.objs[key] = append([]byte(nil), b...)
	return nil
}

func (o *dryOverlay) PutIfAbsent(ctx context.Context, key string, b []byte) error {
	if _, err := o.Head(ctx, key); err == nil {
		return fmt.Errorf("%s: %w", key, objstore.ErrExists)
	}
	return o.Put(ctx, key, b)
}

func (o *dryOverlay) Delete(context.Context, []string) error { return nil }
