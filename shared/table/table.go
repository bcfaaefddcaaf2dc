// Package table implements tablekeep's versioned table format over an
// objstore.Store: Arrow-schema'd tables whose versions are immutable
// manifests listing immutable Parquet fragments and deletion vectors.
// docs/format.md specifies the layout and encoding.
package table

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/tablekeep/tablekeep/shared/objstore"
)

// DefaultGrace is how long a superseded version stays readable, and so how
// long a writer may take between reading a version and committing on it.
const DefaultGrace = time.Hour

// Options configure a table handle. Zero values take the defaults.
type Options struct {
	Clock      func() time.Time // default time.Now
	Grace      time.Duration    // default DefaultGrace
	MaxRetries int              // commit attempts after the first; default 1000
	// CommitTimeout bounds the time one write spends retrying conflicts;
	// default 60 s. Either bound ends it with ErrConflict.
	CommitTimeout time.Duration
	BackoffBase   time.Duration // default 1ms
	BackoffMax    time.Duration // default 100ms
	// Sleep waits between commit attempts; tests may replace it.
	Sleep  func(ctx context.Context, d time.Duration) error
	Logger *slog.Logger
	// Fence, if set, is called right before every manifest write; an error
	// aborts the commit. Maintenance sets it to its lease's fencing check.
	Fence func(ctx context.Context) error
}

func (o Options) withDefaults() Options {
	if o.Clock == nil {
		o.Clock = time.Now
	}
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
	if o.Sleep == nil {
		o.Sleep = sleepCtx
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Table is a handle on one table. It caches the latest manifest it has seen;
// writes start from it and rebase on conflict. Safe for concurrent use.
type Table struct {
	store objstore.Store
	root  string // "" or ends with "/"
	opts  Options

	mu       sync.Mutex
	latest   *Manifest
	loadedAt time.Time
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
	t := &Table{store: store, root: NormalizeRoot(root), opts: opts.withDefaults()}
	if err := validateSchema(schema, keyColumn); err != nil {
		return nil, err
	}
	now := t.opts.Clock()
	m := &Manifest{
		Version: 1, CommitTime: now, Schema: normalizeSchema(schema), KeyColumn: keyColumn,
		NextFragmentID: 1, Op: Operation{Kind: OpCreate, TxnID: rand.Uint64()},
	}
	// A table exists once any manifest does: refuse to create over one.
	page, err := store.List(ctx, objstore.ListOptions{Prefix: t.key(versionsDir), MaxKeys: 1})
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", t.root, err)
	}
	if len(page.Objects) > 0 {
		return nil, objErr(t.name(), ErrTableExists, "")
	}
	if err := store.PutIfAbsent(ctx, t.key(manifestKey(1)), encodeManifest(m)); err != nil {
		if errors.Is(err, objstore.ErrExists) {
			return nil, objErr(t.key(manifestKey(1)), ErrTableExists, "")
		}
		return nil, fmt.Errorf("create %s: %w", t.root, err)
	}
	t.writeChange(ctx, diffManifests(nil, m))
	t.setLatest(m, now)
	return t, nil
}

// Open opens an existing table at its latest version: one List, one Get.
func Open(ctx context.Context, store objstore.Store, root string, opts Options) (*Table, error) {
	t := &Table{store: store, root: NormalizeRoot(root), opts: opts.withDefaults()}
	if _, err := t.Refresh(ctx); err != nil {
		return nil, err
	}
	return t, nil
}

// Refresh loads the latest version (one List with MaxKeys 1, one Get).
func (t *Table) Refresh(ctx context.Context) (*Manifest, error) {
	now := t.opts.Clock()
	// Manifest names are digits; a stray key sorting before them (a console
	// "folder" marker, a README) is stepped over, a few at most.
	var v uint64
	startAfter := ""
	for stray := 0; ; stray++ {
		page, err := t.store.List(ctx, objstore.ListOptions{Prefix: t.key(versionsDir), StartAfter: startAfter, MaxKeys: 1})
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", t.root, err)
		}
		if len(page.Objects) == 0 {
			return nil, objErr(t.name(), ErrNotATable, "no manifests under "+versionsDir)
		}
		k := page.Objects[0].Key
		var ok bool
		if v, ok = parseManifestKey(strings.TrimPrefix(k, t.root)); ok {
			break
		}
		if stray >= 8 {
			return nil, objErr(k, ErrCorruptManifest, "too many objects that are not manifests under "+versionsDir)
		}
		t.opts.Logger.WarnContext(ctx, "stray object among manifests", "key", k)
		startAfter = k
	}
	m, err := t.readManifest(ctx, v)
	if err != nil {
		return nil, err
	}
	t.setLatest(m, now)
	return m, nil
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

func (t *Table) cached() (*Manifest, time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.latest, t.loadedAt
}

// Floor is the retention floor: versions below it may have been pruned.
func (t *Table) Floor(ctx context.Context) (uint64, error) {
	b, err := t.store.Get(ctx, t.key(floorKey))
	if errors.Is(err, objstore.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var f struct {
		Floor uint64 `json:"floor"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return 0, objErr(t.key(floorKey), ErrCorruptObject, err.Error())
	}
	return f.Floor, nil
}

// SetFloor raises the retention floor; it never lowers it. Maintenance calls
// it under the table's lock before enqueueing prunable ranges.
func (t *Table) SetFloor(ctx context.Context, floor uint64) error {
	cur, err := t.Floor(ctx)
	if err != nil {
		return err
	}
	if floor <= cur {
		return nil
	}
	b, _ := json.Marshal(map[string]uint64{"floor": floor})
	return t.store.Put(ctx, t.key(floorKey), b)
}

// Checkout returns a read-only snapshot of version v.
func (t *Table) Checkout(ctx context.Context, v uint64) (*Snapshot, error) {
	pruned := func(floor uint64) error {
		return objErr(t.key(manifestKey(v)), ErrVersionPruned, fmt.Sprintf("version %d is below the retention floor %d", v, floor))
	}
	m, err := t.readManifest(ctx, v)
	if errors.Is(err, objstore.ErrNotExist) {
		floor, ferr := t.Floor(ctx)
		if ferr == nil && v < floor {
			return nil, pruned(floor)
		}
		return nil, objErr(t.key(manifestKey(v)), ErrVersionNotFound, fmt.Sprintf("version %d", v))
	}
	if err != nil {
		return nil, err
	}
	// An older version may be below the floor while cleaners are still
	// deleting its files: refuse it up front (unless tagged) rather than
	// fail half-way through a scan. The latest version needs no check.
	if latest := t.Cached(); latest == nil || v < latest.Version {
		floor, err := t.Floor(ctx)
		if err != nil {
			return nil, err
		}
		if v < floor {
			tags, err := t.Tags(ctx)
			if err != nil {
				return nil, err
			}
			if !slices.Contains(slices.Collect(maps.Values(tags)), v) {
				return nil, pruned(floor)
			}
		}
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

// VersionInfo is one version as listed.
type VersionInfo struct {
	Version       uint64
	Time          time.Time // when its manifest was written (store time)
	ManifestBytes int64
}

// Versions lists every stored version, oldest first (List requests only).
func (t *Table) Versions(ctx context.Context) ([]VersionInfo, error) {
	var out []VersionInfo
	err := objstore.ListAll(ctx, t.store, t.key(versionsDir), "", func(o objstore.ObjectInfo) error {
		if v, ok := parseManifestKey(strings.TrimPrefix(o.Key, t.root)); ok {
			out = append(out, VersionInfo{Version: v, Time: o.LastModified, ManifestBytes: o.Size})
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
	if _, err := t.Checkout(ctx, v); err != nil {
		return err
	}
	b, _ := json.Marshal(map[string]uint64{"version": v})
	if err := t.store.PutIfAbsent(ctx, t.key(tagKey(name)), b); err != nil {
		if errors.Is(err, objstore.ErrExists) {
			return objErr(t.key(tagKey(name)), ErrTagExists, "")
		}
		return err
	}
	// The prune planner may have raised the floor past v between our check
	// and the tag write; it reads tags after raising the floor, so re-check
	// here and withdraw the tag if we lost that race.
	floor, err := t.Floor(ctx)
	if err != nil {
		return err
	}
	if v < floor {
		_ = t.store.Delete(ctx, []string{t.key(tagKey(name))})
		return objErr(t.key(manifestKey(v)), ErrVersionPruned, fmt.Sprintf("version %d fell below the retention floor %d", v, floor))
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
	})
	return out, err
}

// ChangeRecord reads version v's change record.
func (t *Table) ChangeRecord(ctx context.Context, v uint64) (*ChangeRecord, error) {
	k := t.key(changeKey(v))
	b, err := t.store.Get(ctx, k)
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
func (t *Table) RepairChangeRecord(ctx context.Context, v uint64) (*ChangeRecord, error) {
	next, err := t.readManifest(ctx, v)
	if err != nil {
		return nil, err
	}
	var prev *Manifest
	if v > 1 {
		if prev, err = t.readManifest(ctx, v-1); err != nil {
			return nil, fmt.Errorf("repair change record %d: %w", v, err)
		}
	}
	c := diffManifests(prev, next)
	if err := t.store.Put(ctx, t.key(changeKey(v)), encodeChange(c)); err != nil {
		return nil, err
	}
	return c, nil
}

func (t *Table) writeChange(ctx context.Context, c *ChangeRecord) {
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
