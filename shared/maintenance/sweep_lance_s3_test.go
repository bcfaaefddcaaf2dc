package maintenance_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/formats"
	"github.com/tablekeep/tablekeep/shared/internal/testenv"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
)

// datedStore reports, for the keys it was given, a LastModified of the
// test's choosing (an S3 store stamps every object with its upload time).
type datedStore struct {
	objstore.Store
	mu sync.Mutex
	at map[string]time.Time
}

func (s *datedStore) fix(o objstore.ObjectInfo) objstore.ObjectInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.at[o.Key]; ok {
		o.LastModified = t
	}
	return o
}

func (s *datedStore) List(ctx context.Context, opts objstore.ListOptions) (objstore.ListPage, error) {
	p, err := s.Store.List(ctx, opts)
	for i := range p.Objects {
		p.Objects[i] = s.fix(p.Objects[i])
	}
	return p, err
}

func (s *datedStore) Head(ctx context.Context, key string) (objstore.ObjectInfo, error) {
	o, err := s.Store.Head(ctx, key)
	return s.fix(o), err
}

// TestSweepLanceDatasetOnS3: the same sweep on versitygw through
// objstore.S3 (the fixture's files uploaded, each dated as on disk):
// its dry run plans, and its run deletes, exactly the old orphans; LanceDB
// then opens every version of what is left (downloaded) and reads the
// same rows.
func TestSweepLanceDatasetOnS3(t *testing.T) {
	ctx := context.Background()
	f := newLanceSweepFixture(t)
	s3 := testenv.S3Store(t)
	store := &datedStore{Store: s3, at: map[string]time.Time{}}
	err := filepath.WalkDir(f.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(f.dir, p)
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		store.at[key] = info.ModTime()
		return s3.Put(ctx, key, b)
	})
	if err != nil {
		t.Fatal(err)
	}
	before := listing(t, store, "wh/")
	o := maintenance.SweepOptions{Now: time.Now(), Sources: formats.Open, DryRun: true}
	dry, err := maintenance.SweepTable(ctx, store, f.ref, o)
	if err != nil || !slices.Equal(dry.Planned, f.old) {
		t.Fatalf("dry run on S3 plans %v (%v), want %v", dry.Planned, err, f.old)
	}
	o.DryRun = false
	res, err := maintenance.SweepTable(ctx, store, f.ref, o)
	if got := gone(before, listing(t, store, "wh/")); err != nil || !slices.Equal(got, f.old) || res.Deleted != len(f.old) {
		t.Fatalf("sweep on S3 deleted %v (%+v, %v), want %v", got, res, err, f.old)
	}

	out := t.TempDir()
	err = objstore.ListAll(ctx, s3, "wh/", "", func(o objstore.ObjectInfo) error {
		if strings.HasPrefix(o.Key, "wh/ds.lance/_tablekeep/") {
			return nil
		}
		b, err := s3.Get(ctx, o.Key)
		if err != nil {
			return err
		}
		p := filepath.Join(out, filepath.FromSlash(o.Key))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		return os.WriteFile(p, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	checkLanceReads(t, filepath.Join(out, "wh"), f.before, "after the sweep on S3")
}
