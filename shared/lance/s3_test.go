package lance_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/internal/testenv"
	"github.com/tablekeep/tablekeep/shared/lance"
	"github.com/tablekeep/tablekeep/shared/lance/lancetest"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
)

// TestPruneLanceDBDatasetOnS3 prunes a LanceDB dataset on versitygw (the
// local S3 stack) through objstore.S3: the dataset LanceDB wrote is
// uploaded, tablekeep's pipeline prunes it on S3, and LanceDB opens every
// retained version of what is left (downloaded) and reads its rows. The
// keys deleted on S3 are the files deleted by the same prune on disk.
func TestPruneLanceDBDatasetOnS3(t *testing.T) {
	ctx := context.Background()
	s3 := testenv.S3Store(t)
	dir := t.TempDir()
	c := createDataset(t, dir, 20, "")
	before := dumpDataset(t, dir)
	dsDir := filepath.Join(dir, "t.lance")
	filesBefore := lanceFiles(t, dsDir)
	err := filepath.WalkDir(dsDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dsDir, p)
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return s3.Put(ctx, "ds/t.lance/"+filepath.ToSlash(rel), b)
	})
	if err != nil {
		t.Fatal(err)
	}

	keep := c.Versions[len(c.Versions)-6].Version
	var cutoffMs int64
	for i, v := range c.Versions {
		if v.Version == keep {
			cutoffMs = (c.Versions[i-1].TS + v.TS + 1) / 2
		}
	}
	p := maintenance.Policy{Grace: time.Hour, KeepLast: 1, RangeVersions: 4}
	now := time.UnixMilli(cutoffMs).Add(lance.NewSource(nil, "").Grace(p.Grace))
	plan, _ := pruneLance(t, s3, "ds/t.lance/", p, now)
	if plan.Floor != keep {
		t.Fatalf("floor %d, want %d", plan.Floor, keep)
	}

	// What is left on S3, downloaded for LanceDB.
	out := download(t, s3, "ds/")
	after := dumpDataset(t, out)
	lancetest.CheckRetained(t, before, after, lancetest.AtOrAbove(keep, c.Tags))
	var w struct {
		Latest uint64 `json:"latest"`
	}
	node(t, &w, "write", out, "t")
	if w.Latest <= c.Latest {
		t.Fatalf("write after the prune: latest %d", w.Latest)
	}

	// The same prune on disk deletes the same files.
	local := t.TempDir()
	copyDir(t, dir, local)
	disk, _ := objstore.NewDisk(local)
	pruneLance(t, disk, "t.lance/", p, now)
	onDisk := minus(filesBefore, lanceFiles(t, filepath.Join(local, "t.lance")))
	onS3 := minus(filesBefore, lanceFiles(t, filepath.Join(out, "t.lance")))
	if !slices.Equal(onDisk, onS3) || len(onS3) == 0 {
		t.Fatalf("deleted on S3 %v\ndeleted on disk %v", onS3, onDisk)
	}
	t.Logf("versitygw: %d versions, floor %d, %d files deleted, the same as on disk", len(c.Versions), keep, len(onS3))
}

// download copies the dataset t.lance under prefix on s3 into a temporary
// directory (as <dir>/t.lance), for LanceDB to read what is left on S3.
func download(t testing.TB, s3 objstore.Store, prefix string) string {
	t.Helper()
	ctx := context.Background()
	out := t.TempDir()
	err := objstore.ListAll(ctx, s3, prefix+"t.lance/", "", func(o objstore.ObjectInfo) error {
		b, err := s3.Get(ctx, o.Key)
		if err != nil {
			return err
		}
		p := filepath.Join(out, filepath.FromSlash(strings.TrimPrefix(o.Key, prefix)))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		return os.WriteFile(p, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
