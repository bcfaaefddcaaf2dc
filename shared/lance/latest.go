package lance

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/tablekeep/tablekeep/shared/dataset"
	"github.com/tablekeep/tablekeep/shared/objstore"
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
func (s *Source) LatestStats(ctx context.Context) (dataset.Stats, error) {
	vs := s.versions
	if len(vs) == 0 {
		var err error
		if vs, err = s.ds.ListVersions(ctx); err != nil {
			return dataset.Stats{}, err
		}
		if len(vs) == 0 {
			return dataset.Stats{}, fmt.Errorf("%s: %w", s.ds.root, ErrNotADataset)
		}
	}
	m, err := s.ds.ReadManifest(ctx, vs[len(vs)-1])
	if err != nil {
		return dataset.Stats{}, err
	}
	last := vs[len(vs)-1]
	st := dataset.Stats{Version: last.Version, Fragments: len(m.Fragments), Versions: len(vs), LatestManifestBytes: last.Size}
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

var (
	// ErrOtherHistory: the sidecar (_tablekeep/) describes another history
	// of this path: its head or its floor is above the latest version (the
	// dataset's Lance prefixes were removed and LanceDB created it again,
	// its versions starting at 1). Nothing is pruned from it; reset it by
	// deleting every object under the dataset's _tablekeep/ prefix (the
	// next maintenance derives it again from the manifests).
	ErrOtherHistory = errors.New("lance: the sidecar belongs to another history of this path")
	// ErrChangedSinceDiff: a version newer than the sidecar's head (a
	// restore, a clone, or any commit not diffed yet) references a file a
	// range would delete, or there are too many such versions to check.
	ErrChangedSinceDiff = errors.New("lance: a version not yet diffed references files the range would delete")
)

// maxUndiffed bounds the versions newer than the sidecar's head that
// CheckClean reads (one manifest GET each): beyond it the range is refused
// until the next maintenance diffs them.
const maxUndiffed = 1024

// otherHistory is ErrOtherHistory for the dataset at root, with the reset.
func otherHistory(root, what string, v, latest uint64) error {
	return fmt.Errorf("%s: %w: the sidecar's %s is version %d but the latest version is %d "+
		"(the dataset was removed and created again at this path?); nothing is pruned from it. "+
		"To reset, delete every object under %s%s; the next maintenance derives it again from the manifests",
		root, ErrOtherHistory, what, v, latest, root, SidecarDir)
}

// latestFile finds the latest manifest from the store: one LIST with a
// small max-keys on _versions/, starting after the writers' temporary
// files (".tmp_*", which sort first); with inverted names (LanceDB 0.31)
// the first manifest listed is the newest. Plain {n}.manifest names sort
// oldest first: the whole listing. Read-only, safe for concurrent use.
func (s *Source) latestFile(ctx context.Context) (VersionFile, error) {
	prefix := s.ds.root + VersionsDir
	p, err := s.ds.store.List(ctx, objstore.ListOptions{Prefix: prefix, StartAfter: prefix + "/", MaxKeys: 8})
	if err != nil {
		return VersionFile{}, err
	}
	for _, o := range p.Objects {
		v, scheme, ok := ParseManifestName(strings.TrimPrefix(o.Key, prefix))
		if !ok {
			continue // a staging {name}-{uuid}, a hint file
		}
		if scheme == SchemeV2 {
			return VersionFile{Version: v, Key: o.Key, Size: o.Size, LastModified: o.LastModified, Scheme: scheme}, nil
		}
		break
	}
	vs, err := s.ds.ListVersions(ctx)
	if err != nil {
		return VersionFile{}, err
	}
	if len(vs) == 0 {
		return VersionFile{}, fmt.Errorf("%s: %w", s.ds.root, ErrNotADataset)
	}
	return vs[len(vs)-1], nil
}

// LatestRefs (maintenance.Source) reads the latest version from the store
// (latestFile: one LIST with inverted names) and its manifest (one GET),
// and returns the manifest's key and the files it references
// (Manifest.Keys), relative to the root: what the latest-version guard
// protects. It reads nothing of the sidecar.
func (s *Source) LatestRefs(ctx context.Context) (uint64, []string, error) {
	vf, err := s.latestFile(ctx)
	if err != nil {
		return 0, nil, err
	}
	m, err := s.ds.ReadManifest(ctx, vf)
	if err != nil {
		return 0, nil, err
	}
	return vf.Version, append([]string{strings.TrimPrefix(vf.Key, s.ds.root)}, m.Keys()...), nil
}

// CheckClean (maintenance.CleanChecker) is the check just before a
// cleaner deletes keys (full keys) of a range: the change records were
// derived by Prepare from the versions up to the sidecar's head, so
//
//   - a branch (_refs/branches/) refuses the range: its versions reference
//     this dataset's files (one LIST);
//   - a head above the latest version refuses it (ErrOtherHistory: the
//     dataset was created again at this path);
//   - the head's own version's manifest (one GET) must have the timestamp
//     the head recorded, else ErrOtherHistory (created again and grown
//     past the old head);
//   - every version newer than the head (a restore, a clone, any commit
//     not yet diffed) has its manifest read (one GET each, at most
//     maxUndiffed, read at once) and refuses the range (ErrChangedSinceDiff)
//     if it references a key to delete, or a directory one is under.
//
// The head and the latest version are read at once with the branches: one
// round trip, then one for the head's and the undiffed manifests.
func (s *Source) CheckClean(ctx context.Context, keys []string) error {
	var h *head
	var latest VersionFile
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return s.ds.CheckRefs(gctx) })
	g.Go(func() (err error) { h, err = s.readHead(gctx); return err })
	g.Go(func() (err error) { latest, err = s.latestFile(gctx); return err })
	if err := g.Wait(); err != nil {
		return err
	}
	if h == nil {
		return fmt.Errorf("%s: %w: no sidecar head (%s%s): the change records were not derived from this dataset", s.ds.root, ErrChangedSinceDiff, s.ds.root, headKey)
	}
	if h.Version > latest.Version {
		return otherHistory(s.ds.root, "head", h.Version, latest.Version)
	}
	// The head's own version must be the one the head diffed (a dataset
	// created again and grown past the old head has another manifest
	// there): one GET, beside the undiffed manifests.
	headVF := VersionFile{Version: h.Version, Key: s.ds.root + VersionsDir + ManifestName(h.Version, latest.Scheme), Scheme: latest.Scheme}
	n := latest.Version - h.Version
	if n > maxUndiffed {
		return fmt.Errorf("%s: %w: %d versions after the sidecar's head %d (at most %d are checked): the next maintenance diffs them",
			s.ds.root, ErrChangedSinceDiff, n, h.Version, maxUndiffed)
	}
	del := make(map[string]bool, len(keys))
	for _, k := range keys {
		del[k] = true
		for i := len(s.ds.root); i < len(k); i++ {
			if k[i] == '/' {
				del[k[:i+1]] = true // a directory reference covers k
			}
		}
	}
	g, gctx = errgroup.WithContext(ctx)
	g.SetLimit(prepareReads)
	g.Go(func() error { return s.checkHeadManifest(gctx, h, headVF) })
	for v := h.Version + 1; v <= latest.Version; v++ {
		g.Go(func() error {
			vf := VersionFile{Version: v, Key: s.ds.root + VersionsDir + ManifestName(v, latest.Scheme), Scheme: latest.Scheme}
			m, err := s.ds.ReadManifest(gctx, vf)
			if errors.Is(err, objstore.ErrNotExist) {
				return nil // removed since (LanceDB's own cleanup): it references nothing
			}
			if err != nil {
				return err
			}
			for _, k := range m.Keys() {
				if del[s.ds.root+k] {
					return fmt.Errorf("%s: %w: version %d (after the sidecar's head %d; a restore?) references %s",
						s.ds.root, ErrChangedSinceDiff, v, h.Version, k)
				}
			}
			return nil
		})
	}
	return g.Wait()
}
