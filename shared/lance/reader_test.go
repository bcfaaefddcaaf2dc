package lance_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/tablekeep/tablekeep/shared/lance"
	"github.com/tablekeep/tablekeep/shared/objstore"
)

// filesOnDisk lists the dataset's files that manifests reference
// (data/, _deletions/, _transactions/, and _indices/<uuid>/ as directories).
func filesOnDisk(t testing.TB, dsDir string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	err := filepath.WalkDir(dsDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dsDir, p)
		rel = filepath.ToSlash(rel)
		switch {
		case strings.HasPrefix(rel, lance.IndicesDir):
			parts := strings.SplitN(rel, "/", 3)
			out[parts[0]+"/"+parts[1]+"/"] = true
		case strings.HasPrefix(rel, lance.DataDir), strings.HasPrefix(rel, lance.DeletionsDir), strings.HasPrefix(rel, lance.TransactionsDir):
			out[rel] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestReaderOnLanceDB reads datasets LanceDB wrote in both manifest naming
// schemes: every version lists and decodes, the union of the files the
// manifests name is exactly the files on disk (nothing was cleaned yet),
// the tags read back, and the latest version's live rows match LanceDB's.
func TestReaderOnLanceDB(t *testing.T) {
	for _, scheme := range []string{"v2", "v1"} {
		t.Run(scheme, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			c := createDataset(t, dir, 12, scheme)
			store, err := objstore.NewDisk(dir)
			if err != nil {
				t.Fatal(err)
			}
			ds := lance.Open(store, "t.lance")
			vs, err := ds.ListVersions(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(vs) != len(c.Versions) {
				t.Fatalf("listed %d versions, LanceDB lists %d", len(vs), len(c.Versions))
			}
			want := lance.SchemeV2
			if scheme == "v1" {
				want = lance.SchemeV1
			}
			referenced := map[string]bool{}
			var last *lance.Manifest
			var sawDeletion, sawIndex bool
			for i, vf := range vs {
				if vf.Version != c.Versions[i].Version || vf.Scheme != want {
					t.Fatalf("version %d: %+v, want %d in scheme %d", i, vf, c.Versions[i].Version, want)
				}
				m, err := ds.ReadManifest(ctx, vf)
				if err != nil {
					t.Fatal(err)
				}
				if got := m.Timestamp.UnixMilli(); got != c.Versions[i].TS {
					t.Errorf("v%d timestamp %d ms, LanceDB says %d", vf.Version, got, c.Versions[i].TS)
				}
				for _, k := range m.Keys() {
					referenced[k] = true
					sawDeletion = sawDeletion || strings.HasPrefix(k, lance.DeletionsDir)
					sawIndex = sawIndex || strings.HasPrefix(k, lance.IndicesDir)
				}
				last = m
			}
			if !sawDeletion || !sawIndex {
				t.Fatalf("fixture has deletion files %v, index %v: want both", sawDeletion, sawIndex)
			}
			onDisk := filesOnDisk(t, filepath.Join(dir, "t.lance"))
			for k := range onDisk {
				if !referenced[k] {
					t.Errorf("file on disk no manifest references: %s", k)
				}
			}
			for k := range referenced {
				if !onDisk[k] {
					t.Errorf("manifest references a file not on disk: %s", k)
				}
			}
			tags, err := ds.Tags(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(tags) != len(c.Tags) || len(tags) == 0 {
				t.Fatalf("tags %v, LanceDB created %v", tags, c.Tags)
			}
			for k, v := range c.Tags {
				if tags[k] != v {
					t.Fatalf("tag %s = %d, want %d", k, tags[k], v)
				}
			}
			if err := ds.CheckRefs(ctx); err != nil {
				t.Fatal(err)
			}
			d := dumpDataset(t, dir)
			var live uint64
			for _, f := range last.Fragments {
				live += f.PhysicalRows
				if f.Deletion != nil {
					live -= f.Deletion.NumDeleted
				}
			}
			if got := len(d.Rows[itoaU(last.Version)]); uint64(got) != live {
				t.Fatalf("latest v%d: manifest says %d live rows, LanceDB reads %d", last.Version, live, got)
			}
		})
	}
}

func itoaU(v uint64) string { return strconv.FormatUint(v, 10) }

// TestManifestNames covers both naming schemes and what is not a manifest.
func TestManifestNames(t *testing.T) {
	for _, c := range []struct {
		name string
		v    uint64
		s    lance.NamingScheme
		ok   bool
	}{
		{"1.manifest", 1, lance.SchemeV1, true},
		{"42.manifest", 42, lance.SchemeV1, true},
		{"18446744073709551614.manifest", 1, lance.SchemeV2, true},
		{"18446744073709551573.manifest", 42, lance.SchemeV2, true},
		{"0.manifest", 0, 0, false},
		{"01.manifest", 0, 0, false},
		{"18446744073709551615.manifest", 0, 0, false},
		{"latest_version_hint.json", 0, 0, false},
		{".tmp/1.manifest", 0, 0, false},
		{"1.manifest.tmp", 0, 0, false},
		{"-1.manifest", 0, 0, false},
	} {
		v, s, ok := lance.ParseManifestName(c.name)
		if ok != c.ok || (ok && (v != c.v || s != c.s)) {
			t.Errorf("%s: %d %d %v, want %d %d %v", c.name, v, s, ok, c.v, c.s, c.ok)
		}
		if ok && lance.ManifestName(v, s) != c.name {
			t.Errorf("%s: round trip %s", c.name, lance.ManifestName(v, s))
		}
	}
}

// manifestFile builds a manifest file around a Manifest message body.
func manifestFile(body []byte) []byte {
	out := []byte("prefix")
	pos := len(out)
	out = protowire.AppendFixed32(out, uint32(len(body)))
	out = append(out, body...)
	out = protowire.AppendFixed64(out, uint64(pos))
	out = append(out, 0, 0, 2, 0) // major 0, minor 2
	return append(out, "LANC"...)
}

func fragmentMsg(fields ...[]byte) []byte {
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, 7)
	for _, f := range fields {
		b = append(b, f...)
	}
	return b
}

func bytesField(num protowire.Number, v []byte) []byte {
	b := protowire.AppendTag(nil, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

func varintField(num protowire.Number, v uint64) []byte {
	b := protowire.AppendTag(nil, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

// TestRefusals: every feature that could reference a file the reader does
// not understand is refused with ErrUnsupported, never skipped.
func TestRefusals(t *testing.T) {
	dataFile := bytesField(1, []byte("abc.lance"))
	okFrag := bytesField(2, fragmentMsg(bytesField(2, dataFile)))
	cases := map[string][]byte{
		"base paths":              append(varintField(3, 5), bytesField(18, bytesField(4, []byte("s3://other/ds")))...),
		"branch":                  append(varintField(3, 5), bytesField(20, []byte("dev"))...),
		"unknown manifest field":  append(varintField(3, 5), varintField(99, 1)...),
		"base-paths flag":         append(varintField(3, 5), varintField(9, lance.FlagBasePaths)...),
		"overlay flag":            append(varintField(3, 5), varintField(10, lance.FlagDataOverlayFiles)...),
		"unknown flag":            append(varintField(3, 5), varintField(9, 512)...),
		"external row ids":        bytesField(2, fragmentMsg(bytesField(6, bytesField(1, []byte("rowids.bin"))))),
		"external versions":       bytesField(2, fragmentMsg(bytesField(8, bytesField(1, []byte("v.bin"))))),
		"unknown fragment field":  bytesField(2, fragmentMsg(bytesField(11, []byte("x")))),
		"data file base id":       bytesField(2, fragmentMsg(bytesField(2, append(dataFile, varintField(7, 1)...)))),
		"absolute data file":      bytesField(2, fragmentMsg(bytesField(2, bytesField(1, []byte("/etc/passwd"))))),
		"escaping data file":      bytesField(2, fragmentMsg(bytesField(2, bytesField(1, []byte("../x.lance"))))),
		"url data file":           bytesField(2, fragmentMsg(bytesField(2, bytesField(1, []byte("s3://b/x.lance"))))),
		"deletion file base id":   bytesField(2, fragmentMsg(bytesField(3, varintField(7, 0)))),
		"unknown deletion type":   bytesField(2, fragmentMsg(bytesField(3, varintField(1, 2)))),
		"unknown data file field": bytesField(2, fragmentMsg(bytesField(2, append(dataFile, varintField(12, 1)...)))),
	}
	for name, body := range cases {
		_, err := lance.DecodeManifest(name, manifestFile(body))
		if !errors.Is(err, lance.ErrUnsupported) {
			t.Errorf("%s: %v, want ErrUnsupported", name, err)
		}
	}
	// The accepted shape decodes.
	m, err := lance.DecodeManifest("ok", manifestFile(append(varintField(3, 5), okFrag...)))
	if err != nil || m.Version != 5 || len(m.Fragments) != 1 || m.Fragments[0].Files[0] != "abc.lance" {
		t.Fatalf("%+v %v", m, err)
	}
	// Damaged files are corrupt, not unsupported.
	for name, b := range map[string][]byte{
		"short":     []byte("LANC"),
		"no magic":  append(manifestFile(okFrag)[:40], "XXXX"...),
		"truncated": manifestFile(okFrag)[6:],
	} {
		if _, err := lance.DecodeManifest(name, b); !errors.Is(err, lance.ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
}

// TestBranchesAndBranchTagsRefused: a dataset with branches, or a tag on
// a branch, is refused.
func TestBranchesAndBranchTagsRefused(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	store, _ := objstore.NewDisk(dir)
	ds := lance.Open(store, "d")
	if err := ds.CheckRefs(ctx); err != nil {
		t.Fatal(err)
	}
	_ = os.MkdirAll(filepath.Join(dir, "d/_refs/branches"), 0o755)
	_ = os.WriteFile(filepath.Join(dir, "d/_refs/branches/dev.json"), []byte(`{}`), 0o644)
	if err := ds.CheckRefs(ctx); !errors.Is(err, lance.ErrUnsupported) {
		t.Fatalf("branches: %v", err)
	}
	_ = os.MkdirAll(filepath.Join(dir, "d/_refs/tags"), 0o755)
	_ = os.WriteFile(filepath.Join(dir, "d/_refs/tags/a.json"), []byte(`{"branch":"dev","version":3,"manifestSize":10}`), 0o644)
	if _, err := ds.Tags(ctx); !errors.Is(err, lance.ErrUnsupported) {
		t.Fatalf("tag on a branch: %v", err)
	}
	_ = os.WriteFile(filepath.Join(dir, "d/_refs/tags/a.json"), []byte(`{"branch":null,"version":3,"manifestSize":10}`), 0o644)
	if tags, err := ds.Tags(ctx); err != nil || tags["a"] != 3 {
		t.Fatalf("%v %v", tags, err)
	}
}

// TestInspect: what register --format lance checks, on a LanceDB dataset
// and on refused ones.
func TestInspect(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	c := createDataset(t, dir, 6, "")
	store, _ := objstore.NewDisk(dir)
	s, err := lance.Inspect(ctx, store, "t.lance")
	if err != nil {
		t.Fatal(err)
	}
	if s.Versions != len(c.Versions) || s.Latest != c.Latest || s.Scheme != lance.SchemeV2 || s.Fragments == 0 || s.Indices != 1 || len(s.Tags) != len(c.Tags) {
		t.Fatalf("%+v (created %+v)", s, c)
	}
	if _, err := lance.Inspect(ctx, store, "nothing"); !errors.Is(err, lance.ErrNotADataset) {
		t.Fatalf("empty root: %v", err)
	}
	detached := filepath.Join(dir, "t.lance/_versions/d9223372036854775809.manifest")
	_ = os.WriteFile(detached, []byte("x"), 0o644)
	if _, err := lance.Inspect(ctx, store, "t.lance"); !errors.Is(err, lance.ErrUnsupported) {
		t.Fatalf("detached version: %v", err)
	}
	_ = os.Remove(detached)
	_ = os.MkdirAll(filepath.Join(dir, "t.lance/_refs/branches"), 0o755)
	_ = os.WriteFile(filepath.Join(dir, "t.lance/_refs/branches/dev.json"), []byte(`{}`), 0o644)
	if _, err := lance.Inspect(ctx, store, "t.lance"); !errors.Is(err, lance.ErrUnsupported) {
		t.Fatalf("branches: %v", err)
	}
}
