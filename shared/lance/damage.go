package lance

import (
	"cmp"
	"context"
	"errors"
	"slices"

	"golang.org/x/sync/errgroup"

	"github.com/tablekeep/tablekeep/shared/objstore"
)

// Bounds of ListedUnreadable: the stored versions below the floor it reads
// (lowest first) and the files it looks up.
const (
	damageVersions = 8
	damageLookups  = 64
)

// ListedUnreadable looks for listed versions that cannot be read because a
// file their manifest references is gone (maintenance.DamageChecker, for
// `tablekeep status`): the versions of below (stored, below the floor),
// lowest first, at most damageVersions of them. A file the first stored
// version at or above the floor also references is not looked up (no
// cleaner deletes a retained version's file); each other file is, once, at
// most damageLookups in all (a HEAD; an index directory: a LIST with
// max-keys 1). It returns the versions found damaged and whether every
// version of below and every file was looked at. Cost, after Prepare: none
// when below is empty, else at most 1 + damageVersions GETs and
// damageLookups HEADs or LISTs, 16 at a time.
func (s *Source) ListedUnreadable(ctx context.Context, below []uint64, floor uint64) ([]uint64, bool, error) {
	if len(below) == 0 {
		return nil, true, nil
	}
	vs := s.versions
	if len(vs) == 0 {
		var err error
		if vs, err = s.ds.ListVersions(ctx); err != nil {
			return nil, false, err
		}
	}
	byVersion := func(v uint64) (VersionFile, bool) {
		i, ok := slices.BinarySearchFunc(vs, v, func(vf VersionFile, v uint64) int { return cmp.Compare(vf.Version, v) })
		if !ok {
			return VersionFile{}, false
		}
		return vs[i], true
	}
	retained := map[string]bool{}
	if i, _ := slices.BinarySearchFunc(vs, floor, func(vf VersionFile, v uint64) int { return cmp.Compare(vf.Version, v) }); i < len(vs) {
		m, err := s.ds.ReadManifest(ctx, vs[i])
		if err != nil {
			return nil, false, err
		}
		for _, k := range m.Keys() {
			retained[k] = true
		}
	}
	below = slices.Sorted(slices.Values(below))
	complete := len(below) <= damageVersions
	below = below[:min(len(below), damageVersions)]
	refs := make([][]string, len(below))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for i, v := range below {
		vf, ok := byVersion(v)
		if !ok {
			continue
		}
		g.Go(func() error {
			m, err := s.ds.ReadManifest(gctx, vf)
			if errors.Is(err, objstore.ErrNotExist) {
				return nil // cleaned since the listing: not listed any more
			}
			if err != nil {
				return err
			}
			refs[i] = m.Keys()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, false, err
	}
	var look []string
	seen := map[string]bool{}
	for _, keys := range refs {
		for _, k := range keys {
			if !retained[k] && !seen[k] {
				seen[k] = true
				look = append(look, k)
			}
		}
	}
	if len(look) > damageLookups {
		look, complete = look[:damageLookups], false
	}
	gone := make([]bool, len(look))
	g, gctx = errgroup.WithContext(ctx)
	g.SetLimit(16)
	for i, k := range look {
		g.Go(func() error {
			var err error
			if k[len(k)-1] == '/' {
				var p objstore.ListPage
				if p, err = s.ds.store.List(gctx, objstore.ListOptions{Prefix: s.ds.root + k, MaxKeys: 1}); err == nil && len(p.Objects) == 0 {
					err = objstore.ErrNotExist
				}
			} else {
				_, err = s.ds.store.Head(gctx, s.ds.root+k)
			}
			if errors.Is(err, objstore.ErrNotExist) {
				gone[i] = true
				return nil
			}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, false, err
	}
	missing := map[string]bool{}
	for i, k := range look {
		if gone[i] {
			missing[k] = true
		}
	}
	var damaged []uint64
	for i, keys := range refs {
		if slices.ContainsFunc(keys, func(k string) bool { return missing[k] }) {
			damaged = append(damaged, below[i])
		}
	}
	return damaged, complete, nil
}
