package table

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"math/rand/v2"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"golang.org/x/sync/errgroup"

	"github.com/tablekeep/tablekeep/shared/clock"
	"github.com/tablekeep/tablekeep/shared/dataset"
	"github.com/tablekeep/tablekeep/shared/objstore"
)

// DefaultGrace is how long a superseded version stays readable, and so how
// long a writer may take between reading a version and committing on it.
const DefaultGrace = time.Hour

// Options configure a table handle. Zero values take the defaults.
type Options struct {
	Clock clock.Clock // reads the time and waits between commit attempts; nil: the real clock
	// Grace is the writers' grace window stored in a table Create makes
	// (default DefaultGrace, at most MaxGrace). On an existing table the stored window
	// governs (WriterGrace); a Grace set here may only shorten this
	// handle's own bound, never lengthen it.
	Grace      time.Duration
	MaxRetries int // commit attempts after the first; default 1000
	// CommitTimeout bounds the time one write spends retrying conflicts;
	// default 60 s. Either bound ends it with ErrConflict.
	CommitTimeout time.Duration
	BackoffBase   time.Duration // default 1ms
	BackoffMax    time.Duration // default 100ms
	Logger        *slog.Logger
	// Fence, if set, is called right before every manifest write; an error
	// aborts the commit. Maintenance sets it to its lease's fencing check.
	Fence func(ctx context.Context) error
	// Format is the manifest format Create writes: 0 or 3 (the default:
	// inline writes, docs/format.md 4.7; releases before format 3 refuse
	// such a table), or 2 (what releases before format 3 read and write).
	// Ignored on an existing table, which keeps its format.
	Format uint64
	// InlineMaxBytes is the inline bound Create stores in a format-3 table
	// (default DefaultInlineMaxBytes, at most MaxInlineMaxBytes).
	InlineMaxBytes uint64
}

func (o Options) withDefaults() Options {
	o.Clock = clock.Or(o.Clock)
	if o.Grace <= 0 {
		o.Grace = DefaultGrace
	}
	if o.MaxRetries <= 0 {
		o.MaxRetries = 1000
	}
	if o.CommitTimeout <= 0 {
		o.CommitTimeout = time.Minute
	}
	if o.BackoffBase <= 0 {
		o.BackoffBase = time.Millisecond
	}
	if o.BackoffMax <= 0 {
		o.BackoffMax = 100 * time.Millisecond
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Format == 0 {
		o.Format = FormatVersion
	}
	if o.InlineMaxBytes == 0 {
		o.InlineMaxBytes = DefaultInlineMaxBytes
	}
	return o
}

// Table is a handle on one table. It caches the latest manifest it has seen;
// writes start from it and rebase on conflict. Safe for concurrent use.
type Table struct {
	store objstore.Store
	root  string // "" or ends with "/"
	opts  Options
	// graceSet: the caller set Options.Grace (it then caps the writer's bound).
	graceSet bool

	mu       sync.Mutex
	latest   *Manifest
	loadedAt time.Time

	// Key columns of data files and deletion vectors this handle read for
	// writes (both immutable): a warm handle's small upsert reads nothing.
	// Bounded by keyCacheBytes (emptied when full).
	keyCache   map[FileID][][]byte
	dvCache    map[string][]uint32
	cacheBytes int
}

// keyCacheBytes bounds a handle's cache of key columns and deletion vectors.
const keyCacheBytes = 16 << 20

func (t *Table) cachePut(size int, put func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cacheBytes+size > keyCacheBytes || t.keyCache == nil {
		t.keyCache, t.dvCache, t.cacheBytes = map[FileID][][]byte{}, map[string][]uint32{}, 0
	}
	if size <= keyCacheBytes {
		put()
		t.cacheBytes += size
	}
}

// cachedKeys is readKeys through the handle's cache.
func (t *Table) cachedKeys(ctx context.Context, schema *arrow.Schema, keyCol string, f Fragment) ([][]byte, error) {
	t.mu.Lock()
	keys, ok := t.keyCache[f.File]
	t.mu.Unlock()
	if ok {
		return keys, nil
	}
	keys, err := t.readKeys(ctx, schema, keyCol, f)
	if err != nil {
		return nil, err
	}
	size := 0
	for _, k := range keys {
		size += len(k) + 24
	}
	t.cachePut(size, func() { t.keyCache[f.File] = keys })
	return keys, nil
}

// cachedDeletion is readDeletion through the handle's cache.
func (t *Table) cachedDeletion(ctx context.Context, f Fragment) ([]uint32, error) {
	k := DeletionKey(f.File, f.Deletion.ID)
	t.mu.Lock()
	v, ok := t.dvCache[k]
	t.mu.Unlock()
	if ok {
		return v, nil
	}
	v, err := t.readDeletion(ctx, f)
	if err != nil {
		return nil, err
	}
	t.cachePut(4*len(v)+len(k), func() { t.dvCache[k] = v })
	return v, nil
}

// NormalizeRoot turns "a/b", "/a/b/" or "" into the "a/b/" prefix form.
func NormalizeRoot(root string) string {
	root = strings.Trim(root, "/")
	if root == "" {
		return ""
	}
	return root + "/"
}

// Root is the table's key prefix in its store ("" or ending in "/").
func (t *Table) Root() string { return t.root }

// Store is the object store the table lives in.
func (t *Table) Store() objstore.Store { return t.store }

// Options returns the handle's effective options.
func (t *Table) Options() Options { return t.opts }

func (t *Table) key(rel string) string { return t.root + rel }

// name is the table's root for messages ("the store root" when empty).
func (t *Table) name() string {
	if t.root == "" {
		return "the store root"
	}
	return strings.TrimSuffix(t.root, "/")
}

// Create writes version 1 of a new, empty table.
func Create(ctx context.Context, store objstore.Store, root string, schema *arrow.Schema, keyColumn string, opts Options) (*Table, error) {
	t := newTable(store, root, opts)
	if err := validateSchema(schema, keyColumn); err != nil {
		return nil, err
	}
	if t.opts.Grace > MaxGrace {
		return nil, objErr(t.name(), ErrInvalidGrace, fmt.Sprintf("writer grace %s above the maximum %s", t.opts.Grace, MaxGrace))
	}
	if t.opts.Format != 3 && t.opts.Format != legacyFormat {
		return nil, fmt.Errorf("%w: create format %d; this build creates %d or %d", ErrUnsupportedFormat, t.opts.Format, legacyFormat, FormatVersion)
	}
	if t.opts.InlineMaxBytes > MaxInlineMaxBytes {
		return nil, fmt.Errorf("%w: inline bound %d above the maximum %d", ErrInvalidSchema, t.opts.InlineMaxBytes, MaxInlineMaxBytes)
	}
	now := t.opts.Clock.Now()
	m := &Manifest{
		Version: 1, CommitTime: now, Schema: normalizeSchema(schema), KeyColumn: keyColumn,
		NextFragmentID: 1, Op: Operation{Kind: dataset.OpCreate, TxnID: rand.Uint64()},
		WriterGrace: t.opts.Grace, Format: t.opts.Format,
	}
	if m.Format >= 3 {
		m.InlineMaxBytes = t.opts.InlineMaxBytes
		m.RecordsFrom = 1 // version 1 adds no file: no record
	}
	// A table exists once any manifest does: refuse to create over one.
	page, err := store.List(ctx, objstore.ListOptions{Prefix: t.key(versionsDir), MaxKeys: 1})
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", t.root, err)
	}
	if len(page.Objects) > 0 {
		return nil, objErr(t.name(), ErrTableExists, "")
	}
	if err := t.putManifest(ctx, t.key(manifestKey(1)), encodeManifest(m)); err != nil {
		if errors.Is(err, objstore.ErrExists) {
			return nil, objErr(t.key(manifestKey(1)), ErrTableExists, "")
		}
		return nil, fmt.Errorf("create %s: %w", t.root, err)
	}
	t.writeChange(ctx, m, diffManifests(nil, m))
	t.setLatest(m, now)
	return t, nil
}

// Open opens an existing table at its latest version: one List, one Get,
// one after the other (the List names the manifest). It reads no floor: the
// latest version is never below it, and a snapshot whose files a cleaner
// removes later reports ErrVersionPruned when it reads them.
func Open(ctx context.Context, store objstore.Store, root string, opts Options) (*Table, error) {
	t := newTable(store, root, opts)
	if _, err := t.Refresh(ctx); err != nil {
		return nil, err
	}
	return t, nil
}

// Handle is a handle on the table at root that has read nothing: the
// listings, floor, tags and change records read through it as through an
// opened table, and Cached is nil until a Refresh (Open is Handle and
// Refresh). The maintenance of a table opens one per message (the cleaner)
// or refreshes it under the table's lock (the compactor).
func Handle(store objstore.Store, root string, opts Options) *Table {
	return newTable(store, root, opts)
}

func newTable(store objstore.Store, root string, opts Options) *Table {
	return &Table{store: store, root: NormalizeRoot(root), graceSet: opts.Grace > 0, opts: opts.withDefaults()}
}

// writerBound is this handle's bound for a commit on base: the table's
// stored writer grace, shortened by Options.Grace if set.
func (t *Table) writerBound(base *Manifest) time.Duration {
	g := DefaultGrace
	if base != nil && base.WriterGrace > 0 {
		g = base.WriterGrace
	}
	if t.graceSet && t.opts.Grace < g {
		g = t.opts.Grace
	}
	return g
}

// Refresh loads the latest version (one List with MaxKeys 1, one Get).
func (t *Table) Refresh(ctx context.Context) (*Manifest, error) {
	now := t.opts.Clock.Now()
	v, err := t.listLatest(ctx)
	if err != nil {
		return nil, err
	}
	m, err := t.readManifest(ctx, v)
	if err != nil {
		return nil, err
	}
	t.setLatest(m, now)
	return m, nil
}

// listLatest is the latest version's number: one List with MaxKeys 1 (a
// few more past stray keys).
func (t *Table) listLatest(ctx context.Context) (uint64, error) {
	// Manifest names are digits; a stray key sorting before them (a console
	// "folder" marker, a README) is stepped over, a few at most.
	startAfter := ""
	for stray := 0; ; stray++ {
		page, err := t.store.List(ctx, objstore.ListOptions{Prefix: t.key(versionsDir), StartAfter: startAfter, MaxKeys: 1})
		if err != nil {
			return 0, fmt.Errorf("open %s: %w", t.root, err)
		}
		if len(page.Objects) == 0 {
			return 0, objErr(t.name(), ErrNotATable, "no manifests under "+versionsDir)
		}
		k := page.Objects[0].Key
		if v, ok := parseManifestKey(strings.TrimPrefix(k, t.root)); ok {
			return v, nil
		}
		if stray >= 8 {
			return 0, objErr(k, ErrCorruptManifest, "too many objects that are not manifests under "+versionsDir)
		}
		t.opts.Logger.WarnContext(ctx, "stray object among manifests", "key", k)
		startAfter = k
	}
}

func (t *Table) readManifest(ctx context.Context, v uint64) (*Manifest, error) {
	k := t.key(manifestKey(v))
	b, err := t.store.Get(ctx, k)
	if err != nil {
		return nil, err
	}
	m, err := decodeManifest(k, b)
	if err != nil {
		return nil, err
	}
	if m.Version != v {
		return nil, objErr(k, ErrCorruptManifest, fmt.Sprintf("holds version %d", m.Version))
	}
	return m, nil
}

// setLatest records m as the newest version seen, unless a newer one is cached.
func (t *Table) setLatest(m *Manifest, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.latest == nil || m.Version >= t.latest.Version {
		t.latest, t.loadedAt = m, at
	}
}

// Cached returns the latest manifest this handle has seen, without I/O.
func (t *Table) Cached() *Manifest {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.latest
}

// CachedAt is the cached latest manifest and when it was loaded (by this
// handle's clock): a caller that loaded it moments ago need not Refresh.
func (t *Table) CachedAt() (*Manifest, time.Time) { return t.cached() }

func (t *Table) cached() (*Manifest, time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.latest, t.loadedAt
}

// floorMarkerKey names the marker of floor f so that the highest sorts first.
func floorMarkerKey(f uint64) string {
	return fmt.Sprintf("%s%020d", floorDir, math.MaxUint64-f)
}

func parseFloorMarker(rel string) (uint64, bool) {
	digits, ok := strings.CutPrefix(rel, floorDir)
	if !ok || len(digits) != 20 {
		return 0, false
	}
	inv, err := strconv.ParseUint(digits, 10, 64)
	if err != nil || inv == math.MaxUint64 {
		return 0, false
	}
	return math.MaxUint64 - inv, true
}

// Floor is the retention floor: versions below it may have been pruned. It
// is the highest floor marker (or the legacy _refs/floor.json if higher):
// one List, plus one Get on a table that still has the legacy object.
func (t *Table) Floor(ctx context.Context) (uint64, error) {
	f, _, err := t.floor(ctx)
	return f, err
}

// FloorRead is one read of the floor: the floor, and what the listing saw
// (SetFloorFrom uses it instead of reading the floor again).
type FloorRead struct {
	// Floor is the readers' floor: the highest of every marker (stamped
	// or not) and the legacy object. It is not trusted for deletion:
	// Prove says which floor is.
	Floor       uint64
	legacy      bool
	legacyFloor uint64 // the legacy object's value, when legacy
	// markers are the floor markers the listing returned, highest first;
	// complete when that was every marker (one page, not truncated, no
	// stray key).
	markers  []objstore.ObjectInfo
	complete bool
}

// MarkerTime is the store time of the floor marker the floor was read
// from, stamped or not (zero if it came from the legacy object, or there
// is none). Prove applies the trust rules (docs/format.md 2.4).
func (r FloorRead) MarkerTime() time.Time {
	if len(r.markers) == 0 {
		return time.Time{}
	}
	k := r.markers[0].Key
	if m, ok := parseMarkerName(k[max(0, strings.LastIndex(k, floorDir)):]); !ok || m.floor != r.Floor {
		return time.Time{}
	}
	return r.markers[0].LastModified
}

// floorListKeys is the floor listing's page size: the legacy object and up
// to three markers in the one LIST (the steady state holds two markers), so
// SetFloorFrom knows every marker without listing them again.
const floorListKeys = 4

// floor returns the floor and whether the legacy floor object exists.
func (t *Table) floor(ctx context.Context) (uint64, bool, error) {
	r, err := t.ReadFloor(ctx)
	return r.Floor, r.legacy, err
}

// ReadFloor reads the floor (one LIST; a GET more while the legacy object
// exists).
func (t *Table) ReadFloor(ctx context.Context) (FloorRead, error) {
	// "_refs/floor" covers both "_refs/floor.json" and "_refs/floor/...";
	// '.' sorts before '/', so the legacy object comes first.
	prefix := t.key(strings.TrimSuffix(floorDir, "/"))
	s := floorScan{r: FloorRead{complete: true}}
	startAfter := ""
	for {
		page, err := t.store.List(ctx, objstore.ListOptions{Prefix: prefix, StartAfter: startAfter, MaxKeys: floorListKeys})
		if err != nil {
			return FloorRead{}, fmt.Errorf("read floor of %s: %w", t.name(), err)
		}
		if page.Truncated || startAfter != "" {
			s.r.complete = false
		}
		s.found = false
		for _, o := range page.Objects {
			if err := s.add(ctx, t, o); err != nil {
				return FloorRead{}, err
			}
		}
		if s.found || !page.Truncated || len(page.Objects) == 0 {
			break
		}
		startAfter = page.Objects[len(page.Objects)-1].Key
	}
	return s.finish(ctx, t)
}

// floorScan reads a listing of the floor's keys ("_refs/floor.json" and
// "_refs/floor/...", in order) by the rules of docs/format.md 2.4, for
// ReadFloor and ReadRefs.
type floorScan struct {
	r      FloorRead
	marker uint64 // the first (highest) marker's floor
	found  bool   // a marker was listed (in this page, for ReadFloor)
	stray  int    // stray keys before the first marker
	strays bool   // any stray key, before the markers or after
}

// add takes the next listed key of the floor's prefix: the legacy object,
// a marker, or a stray key (the 9th stray before the first marker is
// ErrCorruptObject).
func (s *floorScan) add(ctx context.Context, t *Table, o objstore.ObjectInfo) error {
	rel := strings.TrimPrefix(o.Key, t.root)
	if rel == legacyFloorKey {
		s.r.legacy = true
		return nil
	}
	if m, ok := parseMarkerName(rel); ok {
		if !s.found {
			s.marker, s.found = m.floor, true
		}
		s.r.markers = append(s.r.markers, o)
		return nil
	}
	s.strays = true
	if s.found {
		return nil // after the markers: not ours to judge here
	}
	s.r.complete = false
	if s.stray++; s.stray > 8 {
		return objErr(o.Key, ErrCorruptObject, "too many objects that are not floor markers under "+floorDir)
	}
	t.opts.Logger.WarnContext(ctx, "stray object among floor markers", "key", o.Key)
	return nil
}

// finish returns the floor read: the highest marker's, or the legacy
// object's if higher (one GET, while it exists).
func (s *floorScan) finish(ctx context.Context, t *Table) (FloorRead, error) {
	r := s.r
	r.Floor = s.marker
	if !r.legacy {
		return r, nil
	}
	legacy, err := t.readLegacyFloor(ctx)
	if err != nil {
		return FloorRead{}, err
	}
	r.legacy = legacy != nil // nil: removed since the list
	if legacy != nil {
		r.Floor, r.legacyFloor = max(s.marker, *legacy), *legacy
	}
	return r, nil
}

// readLegacyFloor reads the legacy floor object (nil if it is gone).
func (t *Table) readLegacyFloor(ctx context.Context) (*uint64, error) {
	b, err := t.store.Get(ctx, t.key(legacyFloorKey))
	if errors.Is(err, objstore.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var f struct {
		Floor uint64 `json:"floor"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, objErr(t.key(legacyFloorKey), ErrCorruptObject, err.Error())
	}
	return &f.Floor, nil
}

// SetFloor raises the retention floor; it never lowers it, whoever calls it
// and in whatever order: it only ever adds a marker (PutIfAbsent), and the
// floor is the highest marker. So a stale lease holder's SetFloor cannot
// lower what a newer holder set. The marker is stamped with version
// floor's manifest as listed (one LIST more: docs/format.md 2.4), or
// unstamped if that manifest is not stored or not older than
// FloorStampAge (a floor readers honour and the planner never trusts).
// It then deletes lower markers (and the legacy object, whose value is
// now covered by a stamped marker), best effort. Maintenance raises the
// floor with SetFloorFrom instead, from its plan's reads, under the
// table's lock before enqueueing prunable ranges.
func (t *Table) SetFloor(ctx context.Context, floor uint64) error {
	r, err := t.ReadFloor(ctx)
	if err != nil {
		return err
	}
	if floor <= r.Floor && !r.legacy {
		return nil
	}
	mk := t.key(manifestKey(floor))
	page, err := t.store.List(ctx, objstore.ListOptions{Prefix: mk, MaxKeys: 1})
	if err != nil {
		return fmt.Errorf("set floor of %s to %d: %w", t.name(), floor, err)
	}
	if o := page.Objects; len(o) == 1 && o[0].Key == mk && Stampable(o[0].LastModified, t.opts.Clock.Now()) {
		s := StampOf(o[0])
		return t.setFloor(ctx, floor, &s, r)
	}
	return t.setFloor(ctx, floor, nil, r)
}

// SetFloorFrom raises the floor to floor, its marker stamped with at (the
// stamp of version floor's manifest as the caller listed it), with the
// floor already read (r, e.g. by the prune plan under the same lock): no
// second read. It writes nothing when r holds a stamped marker at least
// as high, and no legacy object. A stale r is harmless, as for a stale
// lease holder: the marker written is then below the highest, which
// changes nothing. When r's listing held every marker, the lower markers
// are deleted from it without listing them again.
func (t *Table) SetFloorFrom(ctx context.Context, floor uint64, at ManifestStamp, r FloorRead) error {
	return t.setFloor(ctx, floor, &at, r)
}

func (t *Table) setFloor(ctx context.Context, floor uint64, at *ManifestStamp, r FloorRead) error {
	hi, _, stamped := r.StampedFloor()
	if write := !stamped || floor > hi; write {
		b, _ := json.Marshal(map[string]uint64{"floor": floor})
		mk := t.key(floorMarkerKey(floor))
		if at != nil && at.valid() {
			mk = t.key(stampedMarkerKey(floor, *at))
		}
		if err := t.store.PutIfAbsent(ctx, mk, b); err != nil && !errors.Is(err, objstore.ErrExists) {
			return fmt.Errorf("set floor of %s to %d: %w", t.name(), floor, err)
		}
	} else if !r.legacy {
		return nil
	}
	markers := r.markers
	if !r.complete {
		page, err := t.store.List(ctx, objstore.ListOptions{Prefix: t.key(floorDir), MaxKeys: 100})
		if err != nil {
			return nil // best effort
		}
		markers = page.Objects
	}
	t.dropLowerFloors(ctx, markers, r.legacy, r.legacyFloor)
	return nil
}

// floorMarkerKeep is how long a floor marker must have existed before the
// markers below it (and the legacy object, if no higher) are deleted. A
// reader's List that misses a new marker started before it was written; as
// long as such a List takes less than this, it still sees an older marker
// at least as high as the floor it could have read before.
const floorMarkerKeep = 10 * time.Minute

// dropLowerFloors deletes, best effort, the markers (of the listing
// markers, highest first; stamped or not) whose floor is below the highest
// stamped marker written more than floorMarkerKeep ago, and the legacy
// object if its value (legacyFloor) is at most that marker's. A marker
// without a stamp, or the legacy object, never settles: only a floor a
// planner can trust replaces them.
func (t *Table) dropLowerFloors(ctx context.Context, markers []objstore.ObjectInfo, legacy bool, legacyFloor uint64) {
	cutoff := t.opts.Clock.Now().Add(-floorMarkerKeep - MaxClockSkew)
	var lower []string
	var settled uint64
	found := false
	for _, o := range markers { // highest first
		m, ok := parseMarkerName(strings.TrimPrefix(o.Key, t.root))
		if !ok {
			continue
		}
		if found && m.floor < settled {
			lower = append(lower, o.Key)
		} else if !found && m.stamped && o.LastModified.Before(cutoff) {
			settled, found = m.floor, true
		}
	}
	if legacy && found && legacyFloor <= settled {
		lower = append(lower, t.key(legacyFloorKey))
	}
	if len(lower) > 0 {
		if err := t.store.Delete(ctx, lower); err != nil {
			t.opts.Logger.WarnContext(ctx, "lower floor markers not deleted", "table", t.root, "err", err)
		}
	}
}

// isTagged reports whether a tag names version v.
func (t *Table) isTagged(ctx context.Context, v uint64) (bool, error) {
	tags, err := t.Tags(ctx)
	if err != nil {
		return false, err
	}
	return slices.Contains(slices.Collect(maps.Values(tags)), v), nil
}

// Checkout returns a read-only snapshot of version v. A version below the
// retention floor is ErrVersionPruned unless a tag names it, whatever this
// handle has cached: cleaners may be deleting its files.
//
// The floor and the manifest are read concurrently (one round trip: the
// floor's List beside the manifest's Get); the floor decides before the
// manifest is used. A version below the floor thus costs the manifest GET
// too, which the refusal does not need.
func (t *Table) Checkout(ctx context.Context, v uint64) (*Snapshot, error) {
	pruned := func(floor uint64) error {
		return objErr(t.key(manifestKey(v)), ErrVersionPruned, fmt.Sprintf("version %d is below the retention floor %d", v, floor))
	}
	var (
		g        errgroup.Group
		floor    uint64
		floorErr error
	)
	g.Go(func() error {
		floor, floorErr = t.Floor(ctx)
		return nil
	})
	m, err := t.readManifest(ctx, v)
	g.Wait()
	if floorErr != nil {
		return nil, floorErr
	}
	if v < floor {
		tagged, terr := t.isTagged(ctx, v)
		if terr != nil {
			return nil, terr
		}
		if !tagged {
			return nil, pruned(floor)
		}
	}
	if errors.Is(err, objstore.ErrNotExist) {
		if v < floor {
			return nil, pruned(floor)
		}
		// Raised meanwhile?
		if f2, ferr := t.Floor(ctx); ferr == nil && v < f2 {
			return nil, pruned(f2)
		}
		return nil, objErr(t.key(manifestKey(v)), ErrVersionNotFound, fmt.Sprintf("version %d", v))
	}
	if err != nil {
		return nil, err
	}
	return &Snapshot{t: t, m: m}, nil
}

// Latest refreshes and returns a snapshot of the latest version.
func (t *Table) Latest(ctx context.Context) (*Snapshot, error) {
	m, err := t.Refresh(ctx)
	if err != nil {
		return nil, err
	}
	return &Snapshot{t: t, m: m}, nil
}

// Snapshot returns a snapshot of the cached latest version, without I/O.
func (t *Table) Snapshot() *Snapshot { return &Snapshot{t: t, m: t.Cached()} }

// Versions lists every stored version, oldest first (List requests only).
func (t *Table) Versions(ctx context.Context) ([]dataset.VersionInfo, error) {
	var out []dataset.VersionInfo
	err := objstore.ListAll(ctx, t.store, t.key(versionsDir), "", func(o objstore.ObjectInfo) error {
		if v, ok := parseManifestKey(strings.TrimPrefix(o.Key, t.root)); ok {
			out = append(out, dataset.VersionInfo{Version: v, Time: o.LastModified, ManifestBytes: o.Size})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

var tagName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

func tagKey(name string) string { return tagsDir + name + ".json" }

// Tag names version v. Tagged versions are never pruned.
func (t *Table) Tag(ctx context.Context, name string, v uint64) error {
	if !tagName.MatchString(name) {
		return fmt.Errorf("%w: %q (letters, digits, '.', '_', '-'; at most 128)", ErrInvalidTag, name)
	}
	// A version below the floor is refused even if another tag keeps it:
	// the tag would outlive that one's removal.
	floor, err := t.Floor(ctx)
	if err != nil {
		return err
	}
	if v < floor {
		return objErr(t.key(manifestKey(v)), ErrVersionPruned, fmt.Sprintf("version %d is below the retention floor %d", v, floor))
	}
	if _, err := t.readManifest(ctx, v); err != nil {
		if errors.Is(err, objstore.ErrNotExist) {
			return objErr(t.key(manifestKey(v)), ErrVersionNotFound, fmt.Sprintf("version %d", v))
		}
		return err
	}
	b, _ := json.Marshal(map[string]uint64{"version": v})
	tk := t.key(tagKey(name))
	if err := t.store.PutIfAbsent(ctx, tk, b); err != nil {
		if errors.Is(err, objstore.ErrExists) {
			return objErr(tk, ErrTagExists, "")
		}
		return err
	}
	// The prune planner may have raised the floor past v between our check
	// and the tag write; it reads tags after raising the floor, so re-check
	// here and withdraw the tag if we lost that race, or if we cannot tell.
	withdraw := func(why error) error {
		if derr := t.store.Delete(ctx, []string{tk}); derr != nil {
			return fmt.Errorf("%w; withdrawing tag %s failed too (it may name a pruned version): %v", why, tk, derr)
		}
		return why
	}
	floor, err = t.Floor(ctx)
	if err != nil {
		return withdraw(fmt.Errorf("tag %s: floor re-check: %w", name, err))
	}
	if v < floor {
		return withdraw(objErr(t.key(manifestKey(v)), ErrVersionPruned, fmt.Sprintf("version %d fell below the retention floor %d", v, floor)))
	}
	return nil
}

// Untag removes a tag.
func (t *Table) Untag(ctx context.Context, name string) error {
	if !tagName.MatchString(name) {
		return fmt.Errorf("%w: %q", ErrInvalidTag, name)
	}
	if _, err := t.store.Head(ctx, t.key(tagKey(name))); err != nil {
		if errors.Is(err, objstore.ErrNotExist) {
			return objErr(t.key(tagKey(name)), ErrTagNotFound, "")
		}
		return err
	}
	return t.store.Delete(ctx, []string{t.key(tagKey(name))})
}

// Tags returns every tag and its version.
func (t *Table) Tags(ctx context.Context) (map[string]uint64, error) {
	out := map[string]uint64{}
	err := objstore.ListAll(ctx, t.store, t.key(tagsDir), "", func(o objstore.ObjectInfo) error {
		return t.readTag(ctx, o, out)
	})
	return out, err
}

// readTag reads the tag object o (listed under _refs/tags/) into out; a key
// that is not a tag name is skipped.
func (t *Table) readTag(ctx context.Context, o objstore.ObjectInfo, out map[string]uint64) error {
	name, ok := strings.CutSuffix(strings.TrimPrefix(o.Key, t.key(tagsDir)), ".json")
	if !ok || !tagName.MatchString(name) {
		return nil
	}
	b, err := t.store.Get(ctx, o.Key)
	if errors.Is(err, objstore.ErrNotExist) {
		return nil // untagged since the list
	}
	if err != nil {
		return err
	}
	var v struct {
		Version uint64 `json:"version"`
	}
	if err := json.Unmarshal(b, &v); err != nil || v.Version == 0 {
		return objErr(o.Key, ErrCorruptObject, "bad tag")
	}
	out[name] = v.Version
	return nil
}

// ReadRefs reads the floor and then the tags, as ReadFloor and Tags do
// one after the other, from one listing of _refs/ (docs/format.md 2.4):
// the floor's keys ("_refs/floor...") sort before "_refs/tags/", so one
// LIST returns both (more pages only past 1,000 keys), where ReadFloor and
// Tags take one each. The floor follows ReadFloor's rules (the legacy
// object's GET included; the 9th stray before the first marker is
// ErrCorruptObject, and stops the listing); keys under _refs/ of neither
// kind are ignored. The tags are as Tags reads them: the same LIST of the
// floor's keys came first, so no tag is read before the floor. The
// cleaner uses it (docs/reliability.md, "The cleaner's floor and tags").
func (t *Table) ReadRefs(ctx context.Context) (FloorRead, map[string]uint64, error) {
	s := floorScan{r: FloorRead{complete: true}}
	var tagObjs []objstore.ObjectInfo
	floorPrefix := strings.TrimSuffix(floorDir, "/")
	err := objstore.ListAll(ctx, t.store, t.key(refsDir), "", func(o objstore.ObjectInfo) error {
		rel := strings.TrimPrefix(o.Key, t.root)
		switch {
		case strings.HasPrefix(rel, tagsDir):
			tagObjs = append(tagObjs, o)
		case strings.HasPrefix(rel, floorPrefix):
			return s.add(ctx, t, o)
		}
		return nil // neither the floor's nor a tag: read by neither
	})
	if err != nil {
		return FloorRead{}, nil, fmt.Errorf("read floor and tags of %s: %w", t.name(), err)
	}
	// Any stray key makes the read incomplete, as it does ReadFloor's
	// page of floorListKeys keys.
	s.r.complete = s.r.complete && !s.strays
	r, err := s.finish(ctx, t)
	if err != nil {
		return FloorRead{}, nil, err
	}
	tags := map[string]uint64{}
	for _, o := range tagObjs {
		if err := t.readTag(ctx, o, tags); err != nil {
			return FloorRead{}, nil, err
		}
	}
	return r, tags, nil
}

// ReadFloorAt reads the floor of the table at root without reading a
// manifest (one LIST): the cleaner needs no more. A root holding no table
// has floor 0.
func ReadFloorAt(ctx context.Context, store objstore.Store, root string, opts Options) (uint64, error) {
	return newTable(store, root, opts).Floor(ctx)
}

// ReadFloorInfoAt is ReadFloorAt with what the listing saw (FloorRead,
// its MarkerTime included): the same one LIST.
func ReadFloorInfoAt(ctx context.Context, store objstore.Store, root string, opts Options) (FloorRead, error) {
	return newTable(store, root, opts).ReadFloor(ctx)
}

// ManifestInfoAt is the store's metadata of version v's manifest of the
// table at root (one HEAD).
func ManifestInfoAt(ctx context.Context, store objstore.Store, root string, v uint64) (objstore.ObjectInfo, error) {
	return store.Head(ctx, NormalizeRoot(root)+manifestKey(v))
}

// ReadTagsAt reads the tags of the table at root without reading a
// manifest.
func ReadTagsAt(ctx context.Context, store objstore.Store, root string, opts Options) (map[string]uint64, error) {
	return newTable(store, root, opts).Tags(ctx)
}

// ChangeRecord reads version v's change record.
func (t *Table) ChangeRecord(ctx context.Context, v uint64) (*dataset.ChangeRecord, error) {
	return ReadChangeRecord(ctx, t.store, t.root, v)
}

// ReadChangeRecord reads version v's change record of the table at root
// (a normalized root, as Table.Root returns) without opening the table:
// one GET.
func ReadChangeRecord(ctx context.Context, st objstore.Store, root string, v uint64) (*dataset.ChangeRecord, error) {
	k := root + changeKey(v)
	b, err := st.Get(ctx, k)
	if err != nil {
		return nil, err
	}
	c, err := DecodeChange(k, b)
	if err != nil {
		return nil, err
	}
	if c.Version != v {
		return nil, objErr(k, ErrCorruptObject, fmt.Sprintf("holds version %d", c.Version))
	}
	return c, nil
}

// RepairChangeRecord rebuilds version v's change record from the manifests
// of v-1 and v. A committer writes the record right after its manifest; a
// crash in between leaves it missing, and maintenance repairs it before the
// range is pruned (both manifests still exist then).
func (t *Table) RepairChangeRecord(ctx context.Context, v uint64) (*dataset.ChangeRecord, error) {
	c, err := t.ComputeChangeRecord(ctx, v)
	if err != nil {
		return nil, err
	}
	if err := t.store.Put(ctx, t.key(changeKey(v)), encodeChange(c)); err != nil {
		return nil, err
	}
	return c, nil
}

// writeChange writes version m's change record c, except on a format-3
// table for a version that added and removed no file: that version has no
// record (docs/format.md 5), and nothing reads one.
func (t *Table) writeChange(ctx context.Context, m *Manifest, c *dataset.ChangeRecord) {
	if m.Format >= 3 && len(c.Added) == 0 && len(c.Removed) == 0 {
		return
	}
	if err := t.store.Put(ctx, t.key(changeKey(c.Version)), encodeChange(c)); err != nil {
		// The commit stands; maintenance rebuilds missing records (RepairChangeRecord).
		t.opts.Logger.WarnContext(ctx, "change record not written", "table", t.root, "version", c.Version, "err", err)
	}
}

// Paths for other packages (maintenance) that work on the layout.

// ManifestKey is version v's manifest key relative to the table root.
func ManifestKey(v uint64) string { return manifestKey(v) }

// ChangeKey is version v's change-record key relative to the table root.
func ChangeKey(v uint64) string { return changeKey(v) }

// ParseChangeKey parses a change-record key relative to the table root.
func ParseChangeKey(rel string) (uint64, bool) { return parseChangeKey(rel) }

// ParseManifestKey parses a manifest key relative to the table root.
func ParseManifestKey(rel string) (uint64, bool) { return parseManifestKey(rel) }

// Layout prefixes, relative to the table root.
const (
	VersionsPrefix  = versionsDir
	ChangesPrefix   = changesDir
	DataPrefix      = dataDir
	DeletionsPrefix = deletionsDir
	TagsPrefix      = tagsDir
)
