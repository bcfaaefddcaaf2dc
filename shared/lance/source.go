package lance

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/tablekeep/tablekeep/shared/clock"
	"github.com/tablekeep/tablekeep/shared/dataset"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/table"
)

// SidecarDir is where tablekeep keeps what it derives from a Lance
// dataset, under the dataset's root: Lance readers, writers and Lance's
// own cleanup never look there (they read _versions, data, _deletions,
// _indices, _transactions and _refs only).
//
//	_tablekeep/head.json                  the last version diffed and the files it references
//	_tablekeep/changes/{v, 20 digits}.json the change record of version v
//	_tablekeep/floor/{MaxUint64-f, 20}     floor markers (the highest wins)
//	_tablekeep/_maintenance/prune-state/   the prune planner's state
const SidecarDir = "_tablekeep/"

const (
	headKey       = SidecarDir + "head.json"
	changesDir    = SidecarDir + "changes/"
	floorDir      = SidecarDir + "floor/"
	headFormat    = "tablekeep-lance-head/1"
	changeFormat  = "tablekeep-lance-change/1"
	headSaveEvery = 512 // versions diffed between head checkpoints
	prepareWindow = 256 // manifests read ahead of the diff
	prepareReads  = 64  // manifest GETs and change-record PUTs in flight
)

// Source adapts a Lance dataset to the maintenance pipeline (it satisfies
// maintenance.Source). Prepare, under the table's lock, reads every
// manifest not yet diffed exactly once, diffs it against the files of the
// previous version (kept in head.json) and writes the version's change
// record to the sidecar; the cleaner then reads only those records, never
// an old manifest.
type Source struct {
	ds *Dataset
	// filled by Prepare
	versions []VersionFile
	times    map[uint64]time.Time
	scheme   NamingScheme
	// Stats of the last Prepare.
	ManifestsRead  int
	RecordsWritten int
	// RecordsDropped: change records of versions no range will ever read
	// (LanceDB's own cleanup removed the version before them), deleted.
	RecordsDropped  int
	prepared        bool
	schemeListedErr error
	// halfCleaned: ranges below the floor whose manifests are gone and
	// whose change records are stored (Prepare; HalfCleaned).
	halfCleaned [][2]uint64
	// Clock reads the time SetFloor compares floor markers' ages with
	// (nil: the real clock).
	Clock clock.Clock
}

// NewSource returns the Source of the dataset at root.
func NewSource(store objstore.Store, root string) *Source {
	return &Source{ds: Open(store, root)}
}

// Dataset is the dataset the source reads.
func (s *Source) Dataset() *Dataset { return s.ds }

func (s *Source) Root() string          { return s.ds.root }
func (s *Source) Store() objstore.Store { return s.ds.store }
func (s *Source) StateRoot() string     { return s.ds.root + SidecarDir }

// head is the sidecar's record of the last version diffed.
type head struct {
	Format  string `json:"format"`
	Version uint64 `json:"version"`
	// Keys are the files Version references, with the first version of
	// the unbroken run of versions that referenced each.
	Keys          map[string]uint64 `json:"keys"`
	MaxFragmentID uint64            `json:"max_fragment_id"`
	HasMaxFrag    bool              `json:"has_max_fragment_id"`
	// Times are the manifest timestamps (Unix ns) of the versions the
	// floor has not passed: what the retention rule compares.
	Times map[string]int64 `json:"times"`
}

// changeDoc is a change record in the sidecar.
type changeDoc struct {
	Format string               `json:"format"`
	Record dataset.ChangeRecord `json:"record"`
}

func recordKey(v uint64) string { return fmt.Sprintf("%s%020d.json", changesDir, v) }

func (s *Source) readHead(ctx context.Context) (*head, error) {
	b, err := s.ds.store.Get(ctx, s.ds.root+headKey)
	if errors.Is(err, objstore.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var h head
	if err := json.Unmarshal(b, &h); err != nil || h.Format != headFormat {
		return nil, corrupt(s.ds.root+headKey, "sidecar head (format %q): %v", h.Format, err)
	}
	return &h, nil
}

func (s *Source) writeHead(ctx context.Context, h *head, floor uint64) error {
	for k := range h.Times {
		if v, _ := strconv.ParseUint(k, 10, 64); v < floor {
			delete(h.Times, k)
		}
	}
	h.Format = headFormat
	b, _ := json.Marshal(h)
	return s.ds.store.Put(ctx, s.ds.root+headKey, b)
}

// Prepare refuses what the reader does not understand (branches, mixed
// naming schemes, any manifest feature that could reference unknown
// files), then diffs every manifest newer than the sidecar's head against
// its predecessor, once, writing one change record each.
func (s *Source) Prepare(ctx context.Context) error {
	if err := s.ds.CheckRefs(ctx); err != nil {
		return err
	}
	vs, err := s.ds.ListVersions(ctx)
	if err != nil {
		return err
	}
	if len(vs) == 0 {
		return fmt.Errorf("%s: %w", s.ds.root, ErrNotADataset)
	}
	for _, vf := range vs[1:] {
		if vf.Scheme != vs[0].Scheme {
			return unsupported(s.ds.root, "manifests in both naming schemes")
		}
	}
	s.scheme = vs[0].Scheme
	floor, err := s.Floor(ctx)
	if err != nil {
		return err
	}
	h, err := s.readHead(ctx)
	if err != nil {
		return err
	}
	if err := s.checkHistory(ctx, vs, h, floor); err != nil {
		return err
	}
	s.ManifestsRead, s.RecordsWritten = 0, 0
	var todo []VersionFile
	for _, vf := range vs {
		if h == nil || vf.Version > h.Version {
			todo = append(todo, vf)
		}
	}
	dirty := 0
	for len(todo) > 0 {
		// Read a window of manifests at once, then diff them in order.
		chunk := todo[:min(len(todo), prepareWindow)]
		todo = todo[len(chunk):]
		ms := make([]*Manifest, len(chunk))
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(prepareReads)
		for i, vf := range chunk {
			g.Go(func() (err error) {
				ms[i], err = s.readForDiff(gctx, vf)
				return err
			})
		}
		if err := g.Wait(); err != nil {
			return err
		}
		s.ManifestsRead += len(chunk)
		var recs []*dataset.ChangeRecord
		for _, m := range ms {
			next, rec, err := diff(s.ds.root, h, m)
			if err != nil {
				return err
			}
			if rec != nil {
				recs = append(recs, rec)
			}
			h = next
		}
		// The chunk's records go at once; the head only after all of them.
		g, gctx = errgroup.WithContext(ctx)
		g.SetLimit(prepareReads)
		for _, rec := range recs {
			g.Go(func() error {
				b, _ := json.Marshal(changeDoc{Format: changeFormat, Record: *rec})
				return s.ds.store.Put(gctx, s.ds.root+recordKey(rec.Version), b)
			})
		}
		if err := g.Wait(); err != nil {
			return err
		}
		s.RecordsWritten += len(recs)
		if dirty += len(chunk); dirty >= headSaveEvery {
			if err := s.writeHead(ctx, h, floor); err != nil {
				return err
			}
			dirty = 0
		}
	}
	if dirty > 0 {
		if err := s.writeHead(ctx, h, floor); err != nil {
			return err
		}
	}
	s.RecordsDropped, s.halfCleaned = s.dropUnreadRecords(ctx, vs, floor)
	s.versions = vs
	s.times = map[uint64]time.Time{}
	for k, ns := range h.Times {
		v, _ := strconv.ParseUint(k, 10, 64)
		s.times[v] = time.Unix(0, ns).UTC()
	}
	s.prepared = true
	return nil
}

// checkHistory refuses a sidecar that describes another history of this
// path (ErrOtherHistory): a head or a floor above the latest listed
// version, or a head version whose manifest has another timestamp than the
// one the head recorded for it (one GET; the dataset was created again and
// has reached that version anew). The floor is trusted only through the
// head (the floor is at most the head's version, written after it): a
// floor with no head, or with a head that recorded no timestamp for its
// version, proves nothing and is refused too.
func (s *Source) checkHistory(ctx context.Context, vs []VersionFile, h *head, floor uint64) error {
	last := vs[len(vs)-1].Version
	if floor > last {
		return otherHistory(s.ds.root, "floor", floor, last)
	}
	if h == nil {
		if floor > 0 {
			// The floor is trusted only through the head that vouches for
			// it (below): a floor no head proves may be another history's.
			return unprovenFloor(s.ds.root, floor, "there is no sidecar head ("+s.ds.root+headKey+")")
		}
		return nil
	}
	if _, ok := h.Times[strconv.FormatUint(h.Version, 10)]; !ok && floor > 0 {
		return unprovenFloor(s.ds.root, floor, fmt.Sprintf("the sidecar's head records no manifest timestamp for its version %d", h.Version))
	}
	if h.Version > last {
		return otherHistory(s.ds.root, "head", h.Version, last)
	}
	i, found := slices.BinarySearchFunc(vs, h.Version, func(vf VersionFile, v uint64) int { return cmp.Compare(vf.Version, v) })
	if !found {
		return nil // removed by LanceDB's own cleanup since: nothing to compare
	}
	return s.checkHeadManifest(ctx, h, vs[i])
}

// unprovenFloor is ErrOtherHistory for a floor marker no sidecar head
// proves belongs to this history (docs/lance.md, "The sidecar").
func unprovenFloor(root string, floor uint64, why string) error {
	return fmt.Errorf("%s: %w: floor %d, but %s, so nothing proves the floor belongs to this dataset's history; nothing is pruned from it. "+
		"To reset, delete every object under %s%s; the next maintenance derives it again from the manifests",
		root, ErrOtherHistory, floor, why, root, SidecarDir)
}

// checkHeadManifest reads the manifest of the head's version (vf; one GET)
// and refuses it (ErrOtherHistory) if its timestamp is not the one the
// head recorded; a manifest removed since (LanceDB's own cleanup) or a
// head without the time passes.
func (s *Source) checkHeadManifest(ctx context.Context, h *head, vf VersionFile) error {
	ns, ok := h.Times[strconv.FormatUint(h.Version, 10)]
	if !ok {
		return nil
	}
	m, err := s.ds.ReadManifest(ctx, vf)
	if errors.Is(err, objstore.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if got := m.Timestamp.UnixNano(); got != ns {
		return fmt.Errorf("%s: %w: version %d was committed at %s, the sidecar's head recorded %s for it "+
			"(the dataset was removed and created again at this path?); nothing is pruned from it. "+
			"To reset, delete every object under %s%s; the next maintenance derives it again from the manifests",
			s.ds.root, ErrOtherHistory, h.Version, m.Timestamp.UTC().Format(time.RFC3339Nano),
			time.Unix(0, ns).UTC().Format(time.RFC3339Nano), s.ds.root, SidecarDir)
	}
	return nil
}

// readForDiff reads a manifest and, if its transaction is not inlined,
// the transaction file, to learn the operation.
func (s *Source) readForDiff(ctx context.Context, vf VersionFile) (*Manifest, error) {
	m, err := s.ds.ReadManifest(ctx, vf)
	if err != nil {
		return nil, err
	}
	if m.Operation == 0 && m.TransactionFile != "" {
		tb, err := s.ds.store.Get(ctx, s.ds.root+TransactionsDir+m.TransactionFile)
		if err != nil {
			return nil, fmt.Errorf("read the transaction of version %d: %w", m.Version, err)
		}
		if m.Operation, err = DecodeOperation(m.TransactionFile, tb); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// diff derives version m's change record from the head (nil for the
// first version diffed: no record, everything it references starts its
// run at m) and returns the new head. A restore (or clone) is refused: it
// references again files that may already be recorded as removed, and
// deleting them would break the restored version; so is a version whose
// operation is unknown.
func diff(root string, h *head, m *Manifest) (*head, *dataset.ChangeRecord, error) {
	// The times carry over (the map is handed on, not copied: a diff is
	// linear in the manifest's files, never in the versions diffed).
	times := map[string]int64{}
	if h != nil && h.Times != nil {
		times = h.Times
	}
	next := &head{Version: m.Version, Keys: make(map[string]uint64, len(m.Fragments)+4), MaxFragmentID: m.MaxFragmentID, HasMaxFrag: m.HasMaxFragment, Times: times}
	next.Times[strconv.FormatUint(m.Version, 10)] = m.Timestamp.UnixNano()
	keys := m.Keys()
	if h == nil {
		for _, k := range keys {
			next.Keys[k] = m.Version
		}
		return next, nil, nil
	}
	if m.Version <= h.Version {
		return nil, nil, corrupt(root, "version %d after head %d", m.Version, h.Version)
	}
	switch m.Operation {
	case 0:
		return nil, nil, unsupported(root, "version %d: no transaction says what its commit did (a restore cannot be ruled out)", m.Version)
	case OpRestore, OpClone:
		return nil, nil, unsupported(root, "version %d restores or clones an earlier version: it may reference files recorded as removed", m.Version)
	}
	rec := &dataset.ChangeRecord{Version: m.Version, CommitTime: m.Timestamp}
	for _, k := range keys {
		if since, ok := h.Keys[k]; ok {
			next.Keys[k] = since
			continue
		}
		next.Keys[k] = m.Version
		rec.Added = append(rec.Added, k)
	}
	for k, since := range h.Keys {
		if _, ok := next.Keys[k]; !ok {
			rec.Removed = append(rec.Removed, dataset.RemovedFile{Key: k, Since: since})
		}
	}
	slices.SortFunc(rec.Removed, func(a, b dataset.RemovedFile) int { return strings.Compare(a.Key, b.Key) })
	return next, rec, nil
}

// Versions lists the stored versions with their manifest timestamps (from
// the sidecar: versions below the floor have none, and are below it anyway).
func (s *Source) Versions(ctx context.Context) ([]dataset.VersionInfo, error) {
	if !s.prepared {
		if err := s.Prepare(ctx); err != nil {
			return nil, err
		}
	}
	out := make([]dataset.VersionInfo, 0, len(s.versions))
	for _, vf := range s.versions {
		t := s.times[vf.Version] // a version's grace window starts at its own timestamp
		out = append(out, dataset.VersionInfo{Version: vf.Version, Time: t, ManifestBytes: vf.Size, GraceFrom: t})
	}
	return out, nil
}

func floorMarker(f uint64) string { return fmt.Sprintf("%s%020d", floorDir, math.MaxUint64-f) }

// Floor is the highest floor marker (0 if none): one List.
func (s *Source) Floor(ctx context.Context) (uint64, error) {
	p, err := s.ds.store.List(ctx, objstore.ListOptions{Prefix: s.ds.root + floorDir, MaxKeys: 1})
	if err != nil || len(p.Objects) == 0 {
		return 0, err
	}
	name := strings.TrimPrefix(p.Objects[0].Key, s.ds.root+floorDir)
	inv, err := strconv.ParseUint(name, 10, 64)
	if err != nil || len(name) != 20 {
		return 0, corrupt(p.Objects[0].Key, "floor marker")
	}
	return math.MaxUint64 - inv, nil
}

// SetFloor writes a floor marker (put-if-absent: the floor only rises),
// then deletes, best effort, the markers below the highest one written
// more than floorMarkerKeep + table.MaxClockSkew ago: the table format's
// rule (table.SetFloor), so one marker per raise does not stay for ever.
// A reader's List that misses the newest marker started before it was
// written, and still sees a marker at least as high as the floor it could
// read then, as long as it takes less than floorMarkerKeep. One LIST (the
// first 100 markers, highest first) and at most one DELETE more.
func (s *Source) SetFloor(ctx context.Context, f uint64) error {
	err := s.ds.store.PutIfAbsent(ctx, s.ds.root+floorMarker(f), []byte(strconv.FormatUint(f, 10)))
	if err != nil && !errors.Is(err, objstore.ErrExists) {
		return err
	}
	s.dropLowerFloors(ctx)
	return nil
}

// floorMarkerKeep is how long a floor marker must have existed before the
// markers below it are deleted (the table format's rule, shared/table).
const floorMarkerKeep = 10 * time.Minute

func (s *Source) now() time.Time {
	if s.Clock != nil {
		return s.Clock.Now()
	}
	return time.Now()
}

// dropLowerFloors deletes the floor markers below the highest settled one
// (written before now - floorMarkerKeep - table.MaxClockSkew), best
// effort. It deletes only floor markers (keys under _tablekeep/floor/ that
// parse as markers): no manifest references them.
func (s *Source) dropLowerFloors(ctx context.Context) {
	p, err := s.ds.store.List(ctx, objstore.ListOptions{Prefix: s.ds.root + floorDir, MaxKeys: 100})
	if err != nil {
		return
	}
	cutoff := s.now().Add(-floorMarkerKeep - table.MaxClockSkew)
	var lower []string
	settled := false
	for _, o := range p.Objects { // highest first
		name := strings.TrimPrefix(o.Key, s.ds.root+floorDir)
		if _, err := strconv.ParseUint(name, 10, 64); err != nil || len(name) != 20 {
			continue
		}
		if settled {
			lower = append(lower, o.Key)
		} else if o.LastModified.Before(cutoff) {
			settled = true
		}
	}
	if len(lower) > 0 {
		_ = s.ds.store.Delete(ctx, lower)
	}
}

// maxDroppedRecords bounds the change records dropUnreadRecords deletes in
// one Prepare (one DeleteObjects request); maxRecordRuns bounds the
// listings (one per run of versions no longer stored).
const (
	maxDroppedRecords = 1000
	maxRecordRuns     = 8
)

// dropUnreadRecords deletes, best effort, the change records no range will
// ever read, and returns how many it deleted and the half-cleaned ranges:
// a range [From, To] of stored versions reads the records [From+1, To+1]
// (and record 1 when From is 1), so record r is read only while version
// r-1 is stored (r = 1: version 1). For each run [a, b] of versions below
// the latest that are not stored (at most maxRecordRuns, lowest first),
// one LIST of the records [a+1, b+1] (record a too when a is 1).
//
// The part of a run below the floor, [a, min(b, floor-1)], is where
// tablekeep's cleaner deletes manifests, before the files only they
// referenced: records found for it mean a cleanup cut off after the
// manifests (or LanceDB's own cleanup there). They are kept and the
// versions that read them, [max(a, lowest-1), highest-1], are returned
// as a half-cleaned range, which the planner sends again
// (maintenance.ListedBelowFloor); its cleaner deletes the files left and
// then the records. The records of the rest of a run (LanceDB's own
// cleanup removed those versions, and with them the files their records
// name; Lance never commits a removed version again, and a dataset
// created again at the path is refused before this) are deleted, at most
// maxDroppedRecords in one request. Deleting a record never deletes a
// file: at worst a file it names is left to the orphan sweep.
func (s *Source) dropUnreadRecords(ctx context.Context, vs []VersionFile, floor uint64) (int, [][2]uint64) {
	type run struct{ a, b uint64 }
	var runs []run
	next := uint64(1)
	for _, vf := range vs {
		if vf.Version > next && len(runs) < maxRecordRuns {
			runs = append(runs, run{next, vf.Version - 1})
		}
		next = vf.Version + 1
	}
	var del []string
	var half [][2]uint64
	for _, r := range runs {
		startAfter := s.ds.root + recordKey(r.a)
		if r.a == 1 {
			startAfter = ""
		}
		want := min(r.b+1-r.a+1, uint64(maxDroppedRecords-len(del)))
		if want == 0 {
			break
		}
		p, err := s.ds.store.List(ctx, objstore.ListOptions{Prefix: s.ds.root + changesDir, StartAfter: startAfter, MaxKeys: int(want)})
		if err != nil {
			return 0, half
		}
		// Records up to keepThrough belong to the run's part below the floor.
		keepThrough := uint64(0)
		if r.a < floor {
			keepThrough = min(r.b, floor-1) + 1
		}
		var keptLo, keptHi uint64 // the records kept, lowest and highest
		for _, o := range p.Objects {
			name, ok := strings.CutSuffix(strings.TrimPrefix(o.Key, s.ds.root+changesDir), ".json")
			v, err := strconv.ParseUint(name, 10, 64)
			if !ok || err != nil || len(name) != 20 || o.Key != s.ds.root+recordKey(v) {
				continue
			}
			if v > r.b+1 {
				break
			}
			if v < r.a+1 && (r.a != 1 || v != 1) {
				continue
			}
			if v <= keepThrough {
				if keptLo == 0 {
					keptLo = v
				}
				keptHi = v
				continue
			}
			del = append(del, o.Key)
		}
		if keptHi > 0 {
			// Only the versions whose records are left: record v is read
			// by the range holding v-1 (record 1 by the range from 1).
			half = append(half, [2]uint64{max(r.a, keptLo-1), max(r.a, keptHi-1)})
		}
	}
	if len(del) == 0 || s.ds.store.Delete(ctx, del) != nil {
		return 0, half
	}
	return len(del), half
}

// HalfCleaned returns the ranges below the floor whose manifests are gone
// and whose change records are still stored, as the last Prepare found
// them (maintenance.ListedBelowFloor).
func (s *Source) HalfCleaned() [][2]uint64 { return s.halfCleaned }

// StoredIn returns the stored versions in [lo, hi], ascending
// (maintenance.ListedBelowFloor): on inverted manifest names one LIST per
// 1,000 of them, from hi down (StartAfter the name of hi+1); on plain
// names, which do not sort by version, the whole listing. The naming
// scheme, if not known yet, costs the LIST ManifestKeys makes.
func (s *Source) StoredIn(ctx context.Context, lo, hi uint64) ([]uint64, error) {
	if lo > hi {
		return nil, nil
	}
	if _, err := s.ManifestKeys(ctx, lo); err != nil {
		return nil, err
	}
	var out []uint64
	if s.scheme != SchemeV2 {
		vs, err := s.ds.ListVersions(ctx)
		if err != nil {
			return nil, err
		}
		for _, vf := range vs {
			if vf.Version >= lo && vf.Version <= hi {
				out = append(out, vf.Version)
			}
		}
		return out, nil
	}
	prefix := s.ds.root + VersionsDir
	err := objstore.ListAll(ctx, s.ds.store, prefix, prefix+ManifestName(hi+1, SchemeV2), func(o objstore.ObjectInfo) error {
		v, sc, ok := ParseManifestName(strings.TrimPrefix(o.Key, prefix))
		if !ok || sc != SchemeV2 {
			return nil
		}
		if v < lo {
			return errStopListing
		}
		out = append(out, v)
		return nil
	})
	if err != nil && !errors.Is(err, errStopListing) {
		return nil, err
	}
	slices.Reverse(out)
	return out, nil
}

// errStopListing ends a listing early (StoredIn).
var errStopListing = errors.New("stop listing")

// Tags reads the dataset's tags.
func (s *Source) Tags(ctx context.Context) (map[string]uint64, error) { return s.ds.Tags(ctx) }

// ChangeRecord reads version v's record from the sidecar.
func (s *Source) ChangeRecord(ctx context.Context, v uint64) (*dataset.ChangeRecord, error) {
	key := s.ds.root + recordKey(v)
	b, err := s.ds.store.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	var d changeDoc
	if err := json.Unmarshal(b, &d); err != nil || d.Format != changeFormat || d.Record.Version != v {
		return nil, corrupt(key, "change record: %v", err)
	}
	return &d.Record, nil
}

// EnsureChangeRecords has nothing to rebuild: Prepare wrote every record
// up to the latest version before the floor rose, and a record missing
// below the floor was consumed by its range.
func (s *Source) EnsureChangeRecords(context.Context, [][2]uint64) (int, error) { return 0, nil }

// CheckKey accepts the files a Lance manifest names: data/*.lance,
// _deletions/*.arrow|.bin, _transactions/*.txn, and _indices/<uuid>/.
func (s *Source) CheckKey(rel string) error {
	ok := false
	switch {
	case strings.HasPrefix(rel, DataDir):
		ok = len(rel) > len(DataDir) && !strings.HasSuffix(rel, "/")
	case strings.HasPrefix(rel, DeletionsDir):
		name := strings.TrimPrefix(rel, DeletionsDir)
		ok = !strings.Contains(name, "/") && (strings.HasSuffix(name, ".arrow") || strings.HasSuffix(name, ".bin"))
	case strings.HasPrefix(rel, TransactionsDir):
		name := strings.TrimPrefix(rel, TransactionsDir)
		ok = !strings.Contains(name, "/") && strings.HasSuffix(name, ".txn")
	case strings.HasPrefix(rel, IndicesDir):
		uuid, rest, found := strings.Cut(strings.TrimPrefix(rel, IndicesDir), "/")
		ok = found && rest == "" && len(uuid) == 36 && strings.Count(uuid, "-") == 4
	}
	for _, seg := range strings.Split(strings.TrimSuffix(rel, "/"), "/") {
		if seg == "" || seg == "." || seg == ".." {
			ok = false
		}
	}
	if !ok {
		return fmt.Errorf("%q is not a file a Lance manifest references", rel)
	}
	return nil
}

// ManifestKeys names version v's manifest in the dataset's naming scheme
// (found by one List if Prepare did not run in this process). The List
// starts after "_versions/" + "/": manifest names start with a digit, and
// writers' temporary files (".tmp_{n}.manifest_{uuid}"), which sort
// first, are never listed, however many a crashed writer left.
func (s *Source) ManifestKeys(ctx context.Context, v uint64) ([]string, error) {
	if s.scheme == 0 {
		prefix := s.ds.root + VersionsDir
		p, err := s.ds.store.List(ctx, objstore.ListOptions{Prefix: prefix, StartAfter: prefix + "/", MaxKeys: 1000})
		if err != nil {
			return nil, err
		}
		for _, o := range p.Objects {
			if _, sc, ok := ParseManifestName(strings.TrimPrefix(o.Key, s.ds.root+VersionsDir)); ok {
				s.scheme = sc
				break
			}
		}
		if s.scheme == 0 {
			return nil, fmt.Errorf("%s: %w", s.ds.root, ErrNotADataset)
		}
	}
	return []string{VersionsDir + ManifestName(v, s.scheme)}, nil
}

// RecordKey is version v's change record in the sidecar.
func (s *Source) RecordKey(v uint64) string { return recordKey(v) }

// Grace is the policy's grace plus tablekeep's safety margin for clock
// skew and commit duration: a version is pruned only once its own manifest
// timestamp is older than that, as cleanup_old_versions(older_than) does
// (table.RetentionGrace with no writer grace: saturated, a policy grace
// beyond table.MaxGrace counted as MaxGrace).
func (s *Source) Grace(policyGrace time.Duration) time.Duration {
	return table.RetentionGrace(policyGrace, 0)
}
