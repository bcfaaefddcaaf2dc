package lance_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/tablekeep/tablekeep/shared/lance"
	"github.com/tablekeep/tablekeep/shared/lance/lancetest"
)

// latestManifest reads the dataset's latest manifest.
func latestManifest(t testing.TB, ds *lance.Dataset) *lance.Manifest {
	t.Helper()
	ctx := context.Background()
	vs, err := ds.ListVersions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m, err := ds.ReadManifest(ctx, vs[len(vs)-1])
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// fileVersions counts the latest version's data files by Lance file
// version ("2.1", "2.2"), read from each file's footer.
func fileVersions(t testing.TB, dir string, ds *lance.Dataset) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, f := range latestManifest(t, ds).Fragments {
		for _, p := range f.Files {
			b, err := os.ReadFile(filepath.Join(dir, "t.lance", lance.DataDir, p))
			if err != nil {
				t.Fatal(err)
			}
			foot := b[len(b)-8:]
			out[fmt.Sprintf("%d.%d", binary.LittleEndian.Uint16(foot[0:2]), binary.LittleEndian.Uint16(foot[2:4]))]++
		}
	}
	return out
}

// TestCompactMixedFileVersions: LanceDB 0.39 (Lance 12) writes a 2.1
// dataset, which is then upgraded as Lance 12 does it (default data file
// version 2.2, feature flag 256 "mixed data file versions" on both words),
// and LanceDB appends 2.2 files to it (4 one-row adds). tablekeep compacts it keeping each
// file's version: one group of 2.1 fragments, one of 2.2 fragments, each
// written in its inputs' version; LanceDB reads every version exactly, and
// the flag stays. A flag 256 on one word only is corrupt (as Lance says),
// and a flag tablekeep does not know (512) is refused.
func TestCompactMixedFileVersions(t *testing.T) {
	ctx := context.Background()
	db := releaseDB(lancetest.Release039)
	dir, store := db.mixed(t, 8, "2.1")
	if err := lance.SetLatestFlags(ctx, store, "t.lance", lance.FlagDeletionFiles|lance.FlagMixedFileVersions, lance.FlagDeletionFiles|lance.FlagMixedFileVersions, "2.2"); err != nil {
		t.Fatal(err)
	}
	db.node(t, nil, "append", dir, "t", "4")
	ds := lance.Open(store, "t.lance")
	if got := fileVersions(t, dir, ds); got["2.1"] < 2 || got["2.2"] < 2 {
		t.Fatalf("fixture: data files by version %v, want several of 2.1 and of 2.2", got)
	}
	before := db.dump(t, dir)
	vb := db.verify(t, dir)
	rep, err := ds.Compact(ctx, lance.CompactOptions{TargetRows: 10000})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("report: %+v", rep)
	if rep.Committed != 2 || rep.Version != vb.Version+1 {
		t.Fatalf("committed %d groups at version %d, want 2 (one per file version) at %d", rep.Committed, rep.Version, vb.Version+1)
	}
	checkCompacted(t, before, db.dump(t, dir), rep.Version)
	if va := db.verify(t, dir); va.Fragments >= vb.Fragments {
		t.Fatalf("LanceDB counts %d fragments, %d before", va.Fragments, vb.Fragments)
	}
	if m := latestManifest(t, ds); m.ReaderFlags&m.WriterFlags&lance.FlagMixedFileVersions == 0 {
		t.Fatalf("flags after the compaction: reader %#x writer %#x, want 256 kept on both", m.ReaderFlags, m.WriterFlags)
	}
	if got := fileVersions(t, dir, ds); got["2.1"] == 0 || got["2.2"] == 0 {
		t.Fatalf("data files by version after %v: each file keeps its version", got)
	}
	if w := db.write(t, dir); w <= rep.Version {
		t.Fatalf("write after the compaction at version %d", w)
	}
	db.verify(t, dir)

	vs, _ := ds.ListVersions(ctx)
	latest := filepath.Join(dir, filepath.FromSlash(vs[len(vs)-1].Key))
	good, err := os.ReadFile(latest)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		reader, writer uint64
		want           error
	}{
		{lance.FlagMixedFileVersions, 0, lance.ErrCorrupt},
		{0, lance.FlagMixedFileVersions, lance.ErrCorrupt},
		{512, 512, lance.ErrUnsupported},
	} {
		if err := lance.SetLatestFlags(ctx, store, "t.lance", c.reader, c.writer, ""); err != nil {
			t.Fatal(err)
		}
		vs, _ := ds.ListVersions(ctx)
		if _, err := ds.ReadManifest(ctx, vs[len(vs)-1]); !errors.Is(err, c.want) {
			t.Fatalf("flags reader %#x writer %#x: %v, want %v", c.reader, c.writer, err, c.want)
		}
		if _, err := ds.Compact(ctx, lance.CompactOptions{TargetRows: 10000}); !errors.Is(err, c.want) {
			t.Fatalf("compact with flags reader %#x writer %#x: %v, want %v", c.reader, c.writer, err, c.want)
		}
		if err := os.WriteFile(latest, good, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
