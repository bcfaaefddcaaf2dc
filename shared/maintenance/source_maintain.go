package maintenance

import (
	"context"
	"errors"
	"fmt"
	"strings"

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

// SourceLatest is the fleet scan's probe of a dataset of another format:
// the Source's LatestProber, or the full version listing.
func (r *Runner) SourceLatest(ctx context.Context, ref TableRef, known uint64) (uint64, error) {
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

// LatestVersion returns a table's latest version with one LIST (max-keys
// 1 on the manifest keys, which sort newest first), or 0 and
// table.ErrNotATable if it has none. A stray object sorting first costs an
// Open instead.
func LatestVersion(ctx context.Context, store objstore.Store, root string) (uint64, error) {
	root = table.NormalizeRoot(root)
	prefix := root + table.VersionsPrefix
	page, err := store.List(ctx, objstore.ListOptions{Prefix: prefix, MaxKeys: 1})
	if err != nil {
		return 0, err
	}
	if len(page.Objects) == 0 {
		return 0, fmt.Errorf("%s: %w", root, table.ErrNotATable)
	}
	if v, ok := table.ParseManifestKey(strings.TrimPrefix(page.Objects[0].Key, root)); ok {
		return v, nil
	}
	t, err := table.Open(ctx, store, root, table.Options{})
	if err != nil {
		return 0, err
	}
	return t.Cached().Version, nil
}
