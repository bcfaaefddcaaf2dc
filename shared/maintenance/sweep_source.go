package maintenance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/table"
)

// ErrSweepRefused: the orphan sweep of a dataset of another format stopped
// before deleting anything, because the format's reader refused the
// dataset (a feature it does not understand) or a stored manifest could
// not be read. The underlying error is wrapped too (errors.Is with the
// format's own sentinel, e.g. lance.ErrUnsupported, works).
var ErrSweepRefused = errors.New("sweep refused: nothing deleted")

// SweepSource is what the orphan sweep needs of a dataset whose format is
// not tablekeep's. It is optional: SweepTable type-asserts the Source a
// SourceOpener returns, and a Source without it is skipped (SweepResult.Skipped).
//
// The sweep lists the candidates first (SweepPrefixes, grouped by
// SweepUnit), then lists the stored versions and reads every one of their
// manifests (VersionRefs), whatever the floor or the tags: a version not yet
// cleaned still references its files. A unit is deleted only if no stored
// manifest names it and its newest object is older than SweepGrace.
type SweepSource interface {
	// SweepPrefixes are the prefixes, relative to Root(), under which the
	// format keeps the files its manifests reference (each ends in "/").
	// Nothing outside them is listed or deleted.
	SweepPrefixes() []string
	// SweepUnit maps a listed key (relative to Root()) to the name the
	// manifests reference it by: the key itself for a file, a directory
	// ("_indices/<uuid>/", ending in "/") whose objects are one unit. ok
	// is false for a name the format does not write there: left alone.
	SweepUnit(rel string) (unit string, ok bool)
	// StoredVersions lists every version whose manifest is stored, oldest
	// first. It refuses (an error) a dataset the reader does not
	// understand.
	StoredVersions(ctx context.Context) ([]uint64, error)
	// VersionRefs reads version v's manifest (one of StoredVersions) and
	// returns the units it references, in SweepUnit's form.
	VersionRefs(ctx context.Context, v uint64) ([]string, error)
	// SweepGrace is how old an unreferenced unit must be before the sweep
	// deletes it, given the policy's grace (at least that grace plus
	// table.SafetyMargin; the sweep takes the larger of the two).
	SweepGrace(policyGrace time.Duration) time.Duration
}

// sweepUnit is one candidate: a file, or a directory of objects.
type sweepUnit struct {
	name string   // relative to the root
	keys []string // full keys of its objects
	size int64
	mod  time.Time // its newest object's
}

// SweepSourceFiles is the orphan sweep of a dataset of another format
// (docs/lance.md, "The orphan sweep"; docs/reliability.md). now must be read
// before it is called. In order:
//
//  1. list the candidates under src.SweepPrefixes() (at once), grouped into
//     units (a directory's time is its newest object's);
//  2. then list the stored versions and read every manifest (bounded
//     concurrency): the referenced set R;
//  3. delete the units u with u not in R and now - mod(u) > G, where
//     G = max(policy grace + table.SafetyMargin, src.SweepGrace(policy grace)).
//
// A file a writer commits after step 2 was uploaded before step 1 (else it
// was not listed), so it is deleted only if the writer held it longer than
// G before committing it. A refusal of the reader or a manifest that cannot
// be read stops the sweep before anything is deleted (ErrSweepRefused).
// maxDeletes bounds the objects deleted (a directory is never split, so
// its last unit may go past it); dryRun lists, in Planned, the
// objects the real run deletes.
func SweepSourceFiles(ctx context.Context, src Source, ss SweepSource, p Policy, now time.Time, maxDeletes int, dryRun bool) (SweepResult, error) {
	p = p.WithDefaults()
	grace := max(table.RetentionGrace(p.Grace, 0), ss.SweepGrace(p.Grace))
	root := src.Root()
	stateRel := strings.TrimPrefix(src.StateRoot(), root)
	var res SweepResult

	// 1. The candidates, listed before any manifest is read.
	prefixes := ss.SweepPrefixes()
	listed := make([][]objstore.ObjectInfo, len(prefixes))
	fns := make([]func(context.Context) error, len(prefixes))
	for i, prefix := range prefixes {
		if prefix == "" || !strings.HasSuffix(prefix, "/") || strings.HasPrefix(prefix, stateRel) || strings.HasPrefix(stateRel, prefix) {
			return res, fmt.Errorf("%w: %s: sweep prefix %q (state under %q)", ErrSweepRefused, root, prefix, stateRel)
		}
		fns[i] = func(ctx context.Context) error {
			return objstore.ListAll(ctx, src.Store(), root+prefix, "", func(o objstore.ObjectInfo) error {
				listed[i] = append(listed[i], o)
				return nil
			})
		}
	}
	if err := inParallel(ctx, fns...); err != nil {
		return res, err
	}
	units := map[string]*sweepUnit{}
	var order []string
	for _, l := range listed {
		for _, o := range l {
			rel := strings.TrimPrefix(o.Key, root)
			name, ok := ss.SweepUnit(rel)
			if ok && (checkSourceKey(src, name) != nil || !strings.HasPrefix(rel, name) ||
				(name != rel && !strings.HasSuffix(name, "/"))) {
				ok = false
			}
			if !ok {
				res.Foreign++
				continue
			}
			u := units[name]
			if u == nil {
				u = &sweepUnit{name: name}
				units[name] = u
				order = append(order, name)
			}
			u.keys = append(u.keys, o.Key)
			u.size += o.Size
			if o.LastModified.After(u.mod) {
				u.mod = o.LastModified
			}
		}
	}
	res.Listed = len(order)

	// 2. Every stored manifest, read after the listing.
	vs, err := ss.StoredVersions(ctx)
	if err != nil {
		return res, fmt.Errorf("%w: %s: %w", ErrSweepRefused, root, err)
	}
	if len(vs) == 0 {
		return res, fmt.Errorf("%w: %s: no stored version: %w", ErrSweepRefused, root, table.ErrNotATable)
	}
	var mu sync.Mutex
	refs := map[string]bool{}
	err = forEachTick(ctx, "reading manifests", len(vs), func(ctx context.Context, i int) error {
		keys, err := ss.VersionRefs(ctx, vs[i])
		if err != nil {
			return fmt.Errorf("version %d: %w", vs[i], err)
		}
		mu.Lock()
		for _, k := range keys {
			refs[k] = true
		}
		mu.Unlock()
		return nil
	})
	res.Manifests = len(vs)
	if err != nil {
		return res, fmt.Errorf("%w: %s: %w", ErrSweepRefused, root, err)
	}

	// 3. Unreferenced and older than the cut-off.
	var del []string
	for _, name := range order {
		u := units[name]
		switch {
		case refs[name]:
			res.Referenced++
		case now.Sub(u.mod) <= grace:
			res.Young++
		case maxDeletes > 0 && len(del) >= maxDeletes:
		default:
			del = append(del, u.keys...)
			res.Bytes += u.size
		}
	}
	slices.Sort(del)
	if dryRun {
		res.Planned = del
		return res, nil
	}
	// The latest version, read again from the store, is never deleted
	// (guard.go): the whole sweep deletes nothing if it would.
	guard := newLatestGuard(root, src.LatestRefs)
	if err := guard.check(ctx, del); err != nil {
		return res, fmt.Errorf("%w: %s: %w", ErrSweepRefused, root, err)
	}
	n, reqs, err := deleteSwept(ctx, guardedStore{src.Store(), guard}, del, p.DeleteBatch)
	res.Deleted, res.Requests = n, reqs
	if err != nil {
		res.Bytes = 0 // not all measured: the rerun finds what is left
	}
	return res, err
}
