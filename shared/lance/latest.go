package lance

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/table"
)

// LatestVersion is a fleet scan's probe of the dataset's latest version
// (maintenance.LatestProber), read-only:
//
//   - inverted names (LanceDB 0.31): one LIST with max-keys 1 on _versions/,
//     whose first key is the newest version;
//   - plain {n}.manifest names sort oldest first (and 10 before 2): with
//     known, the latest version the last maintenance saw, that LIST plus one
//     HEAD of {known+1}.manifest; if it is absent the latest is still known
//     (Lance commits version n+1 only after n, and never removes the
//     latest); if it exists, or without known, the whole listing
//     (ceil(versions/1000) LISTs).
//
// A first key that is not a manifest (a writer's temporary file sorting
// first) also costs the whole listing.
func (s *Source) LatestVersion(ctx context.Context, known uint64) (uint64, error) {
	prefix := s.ds.root + VersionsDir
	p, err := s.ds.store.List(ctx, objstore.ListOptions{Prefix: prefix, MaxKeys: 1})
	if err != nil {
		return 0, err
	}
	if len(p.Objects) == 0 {
		return 0, fmt.Errorf("%s: %w", s.ds.root, ErrNotADataset)
	}
	v, scheme, ok := ParseManifestName(strings.TrimPrefix(p.Objects[0].Key, prefix))
	if ok && scheme == SchemeV2 {
		return v, nil
	}
	if ok && known > 0 {
		_, err := s.ds.store.Head(ctx, prefix+ManifestName(known+1, SchemeV1))
		if errors.Is(err, objstore.ErrNotExist) {
			return known, nil
		}
		if err != nil {
			return 0, err
		}
	}
	vs, err := s.ds.ListVersions(ctx)
	if err != nil {
		return 0, err
	}
	if len(vs) == 0 {
		return 0, fmt.Errorf("%s: %w", s.ds.root, ErrNotADataset)
	}
	return vs[len(vs)-1].Version, nil
}

// LatestStats summarises the latest version (maintenance.LatestStatser):
// its fragments and live rows (physical rows less deleted ones), from one
// GET of the latest manifest (the listing Prepare made, or one more).
// DataBytes is 0: it would take a HEAD per data file.
func (s *Source) LatestStats(ctx context.Context) (table.Stats, error) {
	vs := s.versions
	if len(vs) == 0 {
		var err error
		if vs, err = s.ds.ListVersions(ctx); err != nil {
			return table.Stats{}, err
		}
		if len(vs) == 0 {
			return table.Stats{}, fmt.Errorf("%s: %w", s.ds.root, ErrNotADataset)
		}
	}
	m, err := s.ds.ReadManifest(ctx, vs[len(vs)-1])
	if err != nil {
		return table.Stats{}, err
	}
	last := vs[len(vs)-1]
	st := table.Stats{Version: last.Version, Fragments: len(m.Fragments), Versions: len(vs), LatestManifestBytes: last.Size}
	for _, f := range m.Fragments {
		st.Rows += f.PhysicalRows
		if f.Deletion != nil {
			del := min(f.Deletion.NumDeleted, f.PhysicalRows)
			st.Rows -= del
			st.DeletedRows += del
			st.DeletionFiles++
		}
	}
	return st, nil
}
