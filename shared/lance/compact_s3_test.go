package lance_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/tablekeep/tablekeep/shared/internal/testenv"
	"github.com/tablekeep/tablekeep/shared/lance"
	"github.com/tablekeep/tablekeep/shared/objstore"
)

// TestCompactLanceDBDatasetOnS3: the compaction of TestCompactLanceDBDataset
// on versitygw through objstore.S3 (conditional puts included): the
// dataset LanceDB wrote is uploaded, compacted on S3, downloaded, and
// LanceDB reads every version exactly, its index queries agree with its
// scans, and the fragments folded as on disk.
func TestCompactLanceDBDatasetOnS3(t *testing.T) {
	ctx := context.Background()
	s3 := testenv.S3Store(t)
	dir, _ := mixedDataset(t, 24)
	before := dumpDataset(t, dir)
	vb := verifyDataset(t, dir)
	dsDir := filepath.Join(dir, "t.lance")
	err := filepath.WalkDir(dsDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dsDir, p)
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return s3.Put(ctx, "cds/t.lance/"+filepath.ToSlash(rel), b)
	})
	if err != nil {
		t.Fatal(err)
	}
	cnt := objstore.NewCounting(s3)
	rep, err := lance.Open(cnt, "cds/t.lance").Compact(ctx, lance.CompactOptions{TargetRows: 10000})
	if err != nil || rep.Committed != 1 || rep.Version != vb.Version+1 {
		t.Fatalf("compact on S3: %+v %v", rep, err)
	}
	t.Logf("versitygw: %d fragments folded into %d, requests %s", rep.FragmentsBefore, rep.FragmentsAfter, cnt.Counts())
	out := download(t, s3, "cds/")
	checkCompacted(t, before, dumpDataset(t, out), rep.Version)
	if va := verifyDataset(t, out); va.Fragments != rep.FragmentsAfter || va.Fragments >= vb.Fragments {
		t.Fatalf("LanceDB counts %d fragments (%d before, the report %d)", va.Fragments, vb.Fragments, rep.FragmentsAfter)
	}
}
