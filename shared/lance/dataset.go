package lance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tablekeep/tablekeep/shared/objstore"
)

// Dataset is a Lance dataset at a root (a key prefix ending in "/") of a store.
type Dataset struct {
	store objstore.Store
	root  string
}

// Open returns a handle on the dataset at root (no request is made).
func Open(store objstore.Store, root string) *Dataset {
	if root != "" && !strings.HasSuffix(root, "/") {
		root += "/"
	}
	return &Dataset{store: store, root: root}
}

// Root is the dataset's key prefix, ending in "/".
func (d *Dataset) Root() string { return d.root }

// Store is the dataset's store.
func (d *Dataset) Store() objstore.Store { return d.store }

// VersionFile is one manifest file under _versions/.
type VersionFile struct {
	Version      uint64
	Key          string // full key
	Size         int64
	LastModified time.Time
	Scheme       NamingScheme
}

// ListVersions lists every manifest under _versions/, oldest first (List
// requests only). Both naming schemes are read; a version named in both
// (a dataset part-way through a migration) is refused, and so is any other
// *.manifest (detached versions, d{n}.manifest, reference files outside the
// version chain). Other objects there (latest_version_hint.json, writers'
// temporary files) are ignored.
func (d *Dataset) ListVersions(ctx context.Context) ([]VersionFile, error) {
	var out []VersionFile
	err := objstore.ListAll(ctx, d.store, d.root+VersionsDir, "", func(o objstore.ObjectInfo) error {
		name := strings.TrimPrefix(o.Key, d.root+VersionsDir)
		v, s, ok := ParseManifestName(name)
		if !ok {
			if strings.HasSuffix(name, ".manifest") && !strings.Contains(name, "/") && !strings.HasPrefix(name, ".") {
				// A detached version (d{n}.manifest) or a name this reader
				// does not know: its manifest references files too.
				return unsupported(o.Key, "manifest name not in either naming scheme (a detached version?)")
			}
			return nil
		}
		out = append(out, VersionFile{Version: v, Key: o.Key, Size: o.Size, LastModified: o.LastModified, Scheme: s})
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b VersionFile) int {
		switch {
		case a.Version < b.Version:
			return -1
		case a.Version > b.Version:
			return 1
		}
		return int(a.Scheme) - int(b.Scheme)
	})
	for i := 1; i < len(out); i++ {
		if out[i].Version == out[i-1].Version {
			return nil, unsupported(d.root, "version %d is named in both manifest naming schemes", out[i].Version)
		}
	}
	return out, nil
}

// ReadManifest reads and decodes one manifest file (one GET).
func (d *Dataset) ReadManifest(ctx context.Context, vf VersionFile) (*Manifest, error) {
	b, err := d.store.Get(ctx, vf.Key)
	if err != nil {
		return nil, err
	}
	m, err := DecodeManifest(vf.Key, b)
	if err != nil {
		return nil, err
	}
	if m.Version != vf.Version {
		return nil, corrupt(vf.Key, "names version %d, holds version %d", vf.Version, m.Version)
	}
	return m, nil
}

// tagContents is a tag file, _refs/tags/{name}.json.
type tagContents struct {
	Version *uint64 `json:"version"`
	Branch  *string `json:"branch"`
}

// Tags reads every tag: name -> version. A tag on a branch is refused.
func (d *Dataset) Tags(ctx context.Context) (map[string]uint64, error) {
	var keys []string
	err := objstore.ListAll(ctx, d.store, d.root+TagsDir, "", func(o objstore.ObjectInfo) error {
		if strings.HasSuffix(o.Key, ".json") {
			keys = append(keys, o.Key)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make(map[string]uint64, len(keys))
	for _, k := range keys {
		b, err := d.store.Get(ctx, k)
		if errors.Is(err, objstore.ErrNotExist) {
			continue // deleted since listed
		}
		if err != nil {
			return nil, err
		}
		var tc tagContents
		if err := json.Unmarshal(b, &tc); err != nil || tc.Version == nil {
			return nil, corrupt(k, "tag: %v", err)
		}
		if tc.Branch != nil && *tc.Branch != "" && *tc.Branch != "main" {
			return nil, unsupported(k, "tag on branch %q", *tc.Branch)
		}
		name := strings.TrimSuffix(strings.TrimPrefix(k, d.root+TagsDir), ".json")
		out[name] = *tc.Version
	}
	return out, nil
}

// CheckRefs refuses a dataset with branches (_refs/branches/): a branch's
// versions live elsewhere and reference this dataset's files. One List.
func (d *Dataset) CheckRefs(ctx context.Context) error {
	p, err := d.store.List(ctx, objstore.ListOptions{Prefix: d.root + BranchesDir, MaxKeys: 1})
	if err != nil {
		return err
	}
	if len(p.Objects) > 0 {
		return unsupported(d.root, "branches (%s)", p.Objects[0].Key)
	}
	return nil
}

// Describe is a short summary for errors and logs.
func (vf VersionFile) String() string {
	return fmt.Sprintf("v%d (%s, %d B)", vf.Version, vf.Key, vf.Size)
}
