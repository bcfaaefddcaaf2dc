package formats

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"

	"github.com/tablekeep/tablekeep/shared/clock"
	"github.com/tablekeep/tablekeep/shared/dataset"
	"github.com/tablekeep/tablekeep/shared/lance"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/table"
)

// What the CLI reads of a Lance dataset, so that it needs no import of
// shared/lance: the reader's checks, its version listing, the files of a
// version, and the lease directory.

// Errors of the Lance reader.
var (
	// ErrNotADataset: no Lance manifests under the root.
	ErrNotADataset = lance.ErrNotADataset
	// ErrUnsupported: a dataset (or version) the reader refuses to maintain.
	ErrUnsupported = lance.ErrUnsupported
)

// LanceVersionsDir is where a Lance dataset keeps its manifests.
const LanceVersionsDir = lance.VersionsDir

// Summary is what Inspect read of a Lance dataset.
type Summary = lance.Summary

// Inspect checks that the Lance dataset at root is one tablekeep can
// maintain (lance.Inspect: its listing, latest manifest and tags).
func Inspect(ctx context.Context, store objstore.Store, root string) (Summary, error) {
	return lance.Inspect(ctx, store, root)
}

// LatestStats are the rows and fragments of the Lance dataset's latest
// version.
func LatestStats(ctx context.Context, store objstore.Store, root string) (dataset.Stats, error) {
	return lance.NewSource(store, root).LatestStats(ctx)
}

// Tags are the Lance dataset's tags.
func Tags(ctx context.Context, store objstore.Store, root string) (map[string]uint64, error) {
	return lance.Open(store, root).Tags(ctx)
}

// lanceFooter ends every Lance manifest file (and data file).
var lanceFooter = []byte("LANC")

// IsLanceDataset reports whether root holds a Lance dataset: its first
// manifest under _versions/ ends with Lance's "LANC" footer (one LIST of
// one key and one GET). Both formats name manifests alike, so only the
// content tells.
func IsLanceDataset(ctx context.Context, store objstore.Store, root string) bool {
	root = table.NormalizeRoot(root)
	p, err := store.List(ctx, objstore.ListOptions{Prefix: root + lance.VersionsDir, MaxKeys: 1})
	if err != nil || len(p.Objects) == 0 {
		return false
	}
	b, err := store.Get(ctx, p.Objects[0].Key)
	return err == nil && bytes.HasSuffix(b, lanceFooter)
}

// LatestIsRestore reports whether the latest version of the Lance dataset
// at root was committed by a restore or clone (its manifest, and its
// transaction file when not inlined: two GETs and the listing).
func LatestIsRestore(ctx context.Context, store objstore.Store, root string) (uint64, bool, error) {
	ds := lance.Open(store, root)
	vs, err := ds.ListVersions(ctx)
	if err != nil || len(vs) == 0 {
		return 0, false, err
	}
	last := vs[len(vs)-1]
	m, err := ds.ReadManifest(ctx, last)
	if err != nil {
		return 0, false, err
	}
	op := m.Operation
	if op == 0 && m.TransactionFile != "" {
		key := ds.Root() + lance.TransactionsDir + m.TransactionFile
		b, err := store.Get(ctx, key)
		if err != nil {
			return 0, false, err
		}
		if op, err = lance.DecodeOperation(key, b); err != nil {
			return 0, false, err
		}
	}
	return last.Version, op == lance.OpRestore || op == lance.OpClone, nil
}

// Versions lists the versions of the Lance dataset at root (List requests
// only: a version's time is its manifest's object time) and its tags.
func Versions(ctx context.Context, store objstore.Store, root string) ([]dataset.VersionInfo, map[string]uint64, error) {
	ds := lance.Open(store, root)
	vfs, err := ds.ListVersions(ctx)
	if err != nil {
		return nil, nil, err
	}
	vs := make([]dataset.VersionInfo, len(vfs))
	for i, vf := range vfs {
		vs[i] = dataset.VersionInfo{Version: vf.Version, Time: vf.LastModified, ManifestBytes: vf.Size}
	}
	tags, err := ds.Tags(ctx)
	return vs, tags, err
}

// File is one data file of a Lance dataset's version: its rows, and the
// deletion file masking some of them. Paths are relative to the dataset.
type File struct {
	Path         string
	Fragment     uint64
	Rows         uint64
	LiveRows     uint64
	Deleted      uint64
	DeletionFile string
}

// Files lists the data files of version v (0: the latest) of the Lance
// dataset at root: the listing and one manifest, read-only.
// ErrNotADataset if it has no versions.
func Files(ctx context.Context, store objstore.Store, root string, v uint64) ([]File, error) {
	ds := lance.Open(store, root)
	vfs, err := ds.ListVersions(ctx)
	if err != nil {
		return nil, err
	}
	if len(vfs) == 0 {
		return nil, ErrNotADataset
	}
	vf := vfs[len(vfs)-1]
	if v != 0 {
		i := slices.IndexFunc(vfs, func(f lance.VersionFile) bool { return f.Version == v })
		if i < 0 {
			return nil, fmt.Errorf("version %d is not stored (the Lance dataset has versions %d-%d; see `tablekeep versions`)", v, vfs[0].Version, vf.Version)
		}
		vf = vfs[i]
	}
	m, err := ds.ReadManifest(ctx, vf)
	if err != nil {
		return nil, err
	}
	var files []File
	for _, f := range m.Fragments {
		del, dkey := uint64(0), ""
		if f.Deletion != nil {
			del, dkey = f.Deletion.NumDeleted, f.DeletionKey()
		}
		for _, p := range f.Files {
			files = append(files, File{Path: lance.DataDir + p, Fragment: f.ID, Rows: f.PhysicalRows,
				LiveRows: f.PhysicalRows - min(del, f.PhysicalRows), Deleted: del, DeletionFile: dkey})
		}
	}
	return files, nil
}

// LeaseDir is the lease directory of a registered table (a full key
// prefix): _leases/ under a tablekeep table, the sidecar's leases/ under a
// Lance dataset.
func LeaseDir(ref maintenance.TableRef) string {
	root := table.NormalizeRoot(ref.Root)
	if ref.Format == Lance {
		return root + lance.LeasesDir
	}
	return root + table.LeasesPrefix
}

// LanceLeases are the reader leases of the Lance dataset at root (its
// sidecar's lease directory, on clk) and a reader of its latest version.
func LanceLeases(store objstore.Store, root string, clk clock.Clock, logger *slog.Logger) (*table.LeaseDir, func(context.Context) (uint64, error)) {
	src := lance.NewSource(store, root)
	return src.LeaseDirAt(clk, logger), func(ctx context.Context) (uint64, error) {
		vs, err := src.Dataset().ListVersions(ctx)
		if err != nil || len(vs) == 0 {
			return 0, err
		}
		return vs[len(vs)-1].Version, nil
	}
}
