package maintenance

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/table"
)

// The latest-version guard (docs/reliability.md, "The latest version is
// never deleted"): every delete of the cleaner and of the orphan sweeps, in
// both formats, goes through a guarded store whose Delete first reads the
// dataset's latest version and the files its manifest references (once per
// message or sweep pass: one LIST with max-keys 1 on the inverted manifest
// names, one GET of the latest manifest) and refuses a whole batch that
// names any of them, deleting nothing. It reads the store, not what change
// records, floor markers, a sidecar or a message say, so a bug in any of
// those cannot get past it.

var (
	// ErrLatestReferenced: a delete named the latest version's manifest or
	// a file the latest version references. Nothing of the batch (for the
	// cleaner: of the message) was deleted. Not permanent: the cleaner's
	// message is retried (a later delivery sees the latest again).
	ErrLatestReferenced = errors.New("delete refused: it names the latest version's manifest or a file the latest version references")
	// ErrStaleFloor: the retention floor belongs to another history of the
	// root (a table or dataset removed by other means and created again
	// there): it is above the latest version, or (tablekeep) its marker is
	// older than the manifest of its version. Nothing is planned or
	// deleted from it.
	ErrStaleFloor = errors.New("retention floor of another history of this root")
)

// staleFloor is ErrStaleFloor for the planner, with how to reset it.
func staleFloor(root string, floor, latest uint64) error {
	return fmt.Errorf("%s: %w: floor %d, latest version %d (the table was removed and created again at this root?); nothing is pruned. "+
		"To reset, delete the floor markers under %s (tablekeep: _refs/floor/; Lance: the whole _tablekeep/ prefix)",
		root, ErrStaleFloor, floor, latest, root)
}

// latestFunc returns the latest version and the keys, relative to the
// root, of its manifest and of every file it references (a key ending in
// "/" is a directory: everything under it is protected).
type latestFunc func(ctx context.Context) (uint64, []string, error)

// latestGuard protects the latest version of the dataset at root. It loads
// once, on the first check (a failed load is not kept: the next check
// tries again); safe for concurrent use.
type latestGuard struct {
	root string
	load latestFunc

	mu     sync.Mutex
	loaded bool
	latest uint64
	files  map[string]bool // full keys
	dirs   map[string]bool // full prefixes, ending in "/"
}

func newLatestGuard(root string, load latestFunc) *latestGuard {
	return &latestGuard{root: root, load: load}
}

// ensure loads the latest version's keys if not loaded yet.
func (g *latestGuard) ensure(ctx context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.loaded {
		return nil
	}
	v, keys, err := g.load(ctx)
	if err != nil {
		return fmt.Errorf("read the latest version of %s before deleting: %w", g.root, err)
	}
	g.files, g.dirs = map[string]bool{}, map[string]bool{}
	for _, k := range keys {
		if k != "" && k[len(k)-1] == '/' {
			g.dirs[g.root+k] = true
		} else {
			g.files[g.root+k] = true
		}
	}
	g.latest, g.loaded = v, true
	return nil
}

// Latest is the latest version read (ensure first).
func (g *latestGuard) Latest() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.latest
}

// check refuses keys (full keys) if any is the latest version's manifest
// or a file it references, or lies under a directory it references.
func (g *latestGuard) check(ctx context.Context, keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	if err := g.ensure(ctx); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, k := range keys {
		if g.files[k] {
			return fmt.Errorf("%w: %s (latest version %d); nothing of the batch deleted", ErrLatestReferenced, k, g.latest)
		}
		for i := len(g.root); i < len(k); i++ {
			if k[i] == '/' && g.dirs[k[:i+1]] {
				return fmt.Errorf("%w: %s is under %s (latest version %d); nothing of the batch deleted", ErrLatestReferenced, k, k[:i+1], g.latest)
			}
		}
	}
	return nil
}

// guardedStore is a store whose Delete refuses, whole, a batch the guard
// refuses: the last check every delete of the cleaner and the sweeps passes.
type guardedStore struct {
	objstore.Store
	g *latestGuard
}

// Inner is the guarded store (its rates pace the deletes: objstore.RatesOf).
func (s guardedStore) Inner() objstore.Store { return s.Store }

func (s guardedStore) Delete(ctx context.Context, keys []string) error {
	if err := s.g.check(ctx, keys); err != nil {
		return err
	}
	return s.Store.Delete(ctx, keys)
}

// tableLatest is a tablekeep table's latestFunc: table.Open (one LIST with
// max-keys 1 on the inverted manifest names, one GET of the latest
// manifest), the manifest's key and its fragments' data and deletion files.
func tableLatest(store objstore.Store, root string, opts table.Options) latestFunc {
	return tableLatestGrace(store, root, opts, nil)
}

// tableLatestGrace is tableLatest that also sets *w (if w is not nil) to
// the latest manifest's writer grace (the cleaner's age rule).
func tableLatestGrace(store objstore.Store, root string, opts table.Options, w *time.Duration) latestFunc {
	return func(ctx context.Context) (uint64, []string, error) {
		t, err := table.Open(ctx, store, root, opts)
		if err != nil {
			return 0, nil, err
		}
		m := t.Cached()
		if w != nil {
			*w = t.WriterGrace()
		}
		return m.Version, manifestRefs(m), nil
	}
}

// manifestRefs are the keys (relative to the root) of m's manifest and of
// the files it references.
func manifestRefs(m *table.Manifest) []string {
	keys := make([]string, 0, 1+len(m.Fragments))
	keys = append(keys, table.ManifestKey(m.Version))
	for _, f := range m.Fragments {
		keys = append(keys, f.File.DataKey())
		if f.Deletion != nil {
			keys = append(keys, table.DeletionKey(f.File, f.Deletion.ID))
		}
	}
	return keys
}

// CleanChecker is a Source that checks, just before a cleaner deletes a
// range's keys (full keys), that nothing happened since its change records
// were derived that they do not account for (lance.Source: no branch, and
// no version newer than the sidecar's head references a key to delete). An
// error refuses the range: nothing is deleted and the message is retried.
type CleanChecker interface {
	CheckClean(ctx context.Context, keys []string) error
}
