package lance

import (
	"context"
	"fmt"

	"github.com/tablekeep/tablekeep/shared/objstore"
)

// Summary describes a dataset for `register --format lance` and status.
type Summary struct {
	Versions      int
	Oldest        uint64
	Latest        uint64
	Scheme        NamingScheme
	Fragments     int
	Indices       int
	Tags          map[string]uint64
	ManifestBytes int64 // of the latest manifest
}

// Inspect checks that the dataset at root is one tablekeep can maintain,
// reading only its listing, its latest manifest and its tags: no branches,
// one naming scheme, and a latest manifest without unsupported features
// (older manifests are checked when a prune first diffs them). The error
// wraps ErrUnsupported, ErrCorrupt or ErrNotADataset; nothing is written.
func Inspect(ctx context.Context, store objstore.Store, root string) (Summary, error) {
	var s Summary
	ds := Open(store, root)
	if err := ds.CheckRefs(ctx); err != nil {
		return s, err
	}
	vs, err := ds.ListVersions(ctx)
	if err != nil {
		return s, err
	}
	if len(vs) == 0 {
		return s, fmt.Errorf("%s: %w", ds.root, ErrNotADataset)
	}
	for _, vf := range vs[1:] {
		if vf.Scheme != vs[0].Scheme {
			return s, unsupported(ds.root, "manifests in both naming schemes")
		}
	}
	last := vs[len(vs)-1]
	m, err := ds.ReadManifest(ctx, last)
	if err != nil {
		return s, err
	}
	if s.Tags, err = ds.Tags(ctx); err != nil {
		return s, err
	}
	s.Versions, s.Oldest, s.Latest, s.Scheme = len(vs), vs[0].Version, last.Version, last.Scheme
	s.Fragments, s.Indices, s.ManifestBytes = len(m.Fragments), len(m.Indices), last.Size
	return s, nil
}
