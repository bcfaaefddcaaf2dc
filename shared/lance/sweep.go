package lance

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/tablekeep/tablekeep/shared/table"
)

// UnverifiedAge is how old a file no manifest references must be before
// Lance's own cleanup deletes it (UNVERIFIED_THRESHOLD_DAYS in
// rust/lance/src/dataset/cleanup.rs: younger, it may belong to a write in
// progress). The orphan sweep never deletes a younger one.
const UnverifiedAge = 7 * 24 * time.Hour

// The orphan sweep (maintenance.SweepSource): the candidates are the files
// under data/, _deletions/, _indices/ and _transactions/ that Lance
// writes; the references are those of every manifest under _versions/.

// SweepPrefixes are the directories whose files Lance's manifests
// reference. _versions/, _refs/ and the sidecar are never listed.
func (s *Source) SweepPrefixes() []string {
	return []string{DataDir, DeletionsDir, IndicesDir, TransactionsDir}
}

// SweepUnit names a listed key as a manifest references it:
// data/{name}.lance, _deletions/{name}.arrow|.bin, _transactions/{name}.txn
// as themselves, any object under _indices/{uuid}/ as that directory.
// Anything else (a blob sidecar under data/{key}/, a name Lance does not
// write) is not a candidate: Lance's cleanup leaves those alone too.
func (s *Source) SweepUnit(rel string) (string, bool) {
	flat := func(dir, ext1, ext2 string) bool {
		name, ok := strings.CutPrefix(rel, dir)
		return ok && !strings.Contains(name, "/") && len(name) > len(ext1) &&
			(strings.HasSuffix(name, ext1) || (ext2 != "" && strings.HasSuffix(name, ext2)))
	}
	switch {
	case flat(DataDir, ".lance", ""), flat(DeletionsDir, ".arrow", ".bin"), flat(TransactionsDir, ".txn", ""):
		return rel, s.CheckKey(rel) == nil
	case strings.HasPrefix(rel, IndicesDir):
		uuid, rest, found := strings.Cut(strings.TrimPrefix(rel, IndicesDir), "/")
		if !found || rest == "" {
			return "", false
		}
		unit := IndicesDir + uuid + "/"
		return unit, s.CheckKey(unit) == nil
	}
	return "", false
}

// StoredVersions lists every manifest under _versions/ (and remembers
// their naming scheme for VersionRefs). It refuses, with ErrUnsupported, what
// Prepare refuses about the dataset as a whole: branches, both naming
// schemes at once, detached or unknown manifest names.
func (s *Source) StoredVersions(ctx context.Context) ([]uint64, error) {
	if err := s.ds.CheckRefs(ctx); err != nil {
		return nil, err
	}
	vs, err := s.ds.ListVersions(ctx)
	if err != nil {
		return nil, err
	}
	if len(vs) == 0 {
		return nil, fmt.Errorf("%s: %w", s.ds.root, ErrNotADataset)
	}
	out := make([]uint64, len(vs))
	for i, vf := range vs {
		if vf.Scheme != vs[0].Scheme {
			return nil, unsupported(s.ds.root, "manifests in both naming schemes")
		}
		out[i] = vf.Version
	}
	s.scheme = vs[0].Scheme
	return out, nil
}

// VersionRefs reads version v's manifest (one GET; refused with
// ErrUnsupported if it has a field or feature the reader does not
// understand) and returns the files it references: Manifest.Keys.
// Safe for concurrent use after StoredVersions.
func (s *Source) VersionRefs(ctx context.Context, v uint64) ([]string, error) {
	if s.scheme == 0 {
		return nil, fmt.Errorf("%s: VersionRefs(%d) before StoredVersions", s.ds.root, v)
	}
	key := s.ds.root + VersionsDir + ManifestName(v, s.scheme)
	m, err := s.ds.ReadManifest(ctx, VersionFile{Version: v, Key: key, Scheme: s.scheme})
	if err != nil {
		return nil, err
	}
	return m.Keys(), nil
}

// SweepGrace is the larger of the policy's grace plus the safety margin
// and Lance's own unverified threshold: the sweep never deletes a file
// Lance's cleanup would still keep as possibly in progress.
func (s *Source) SweepGrace(policyGrace time.Duration) time.Duration {
	return max(table.RetentionGrace(policyGrace, 0), UnverifiedAge)
}
