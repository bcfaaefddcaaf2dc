package catalog

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tablekeep/tablekeep/shared/fleet"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/table"
)

// Names of the system tables, which are registered like any other.
const (
	RegistryName = "_registry"
	StatsName    = "_stats"
)

var tsType = &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}

// RegistrySchema: one row per managed table, as Open creates _registry.
// The first registration of a dataset of another format appends
// FormatField (see RegisterBatch); the columns are otherwise fixed.
var RegistrySchema = arrow.NewSchema([]arrow.Field{
	{Name: "name", Type: arrow.BinaryTypes.String},
	{Name: "root", Type: arrow.BinaryTypes.String},
	{Name: "target_rows", Type: arrow.PrimitiveTypes.Int64},
	{Name: "deleted_threshold", Type: arrow.PrimitiveTypes.Float64},
	{Name: "grace_seconds", Type: arrow.PrimitiveTypes.Int64},
	{Name: "keep_last", Type: arrow.PrimitiveTypes.Int64},
	{Name: "registered_at", Type: tsType},
}, nil)

// FormatField is _registry's optional last column: the table's format,
// null or "" for a tablekeep table, "lance" for a Lance dataset.
var FormatField = arrow.Field{Name: "format", Type: arrow.BinaryTypes.String, Nullable: true}

// StatsSchema: one row per table.
var StatsSchema = arrow.NewSchema([]arrow.Field{
	{Name: "name", Type: arrow.BinaryTypes.String},
	{Name: "rows", Type: arrow.PrimitiveTypes.Int64},
	{Name: "fragments", Type: arrow.PrimitiveTypes.Int64},
	{Name: "small_fragments", Type: arrow.PrimitiveTypes.Int64},
	{Name: "versions", Type: arrow.PrimitiveTypes.Int64},
	{Name: "unreclaimed_versions", Type: arrow.PrimitiveTypes.Int64},
	{Name: "data_bytes", Type: arrow.PrimitiveTypes.Int64},
	{Name: "manifest_bytes", Type: arrow.PrimitiveTypes.Int64},
	{Name: "last_compaction", Type: tsType, Nullable: true},
	{Name: "last_cleanup", Type: tsType, Nullable: true},
	{Name: "updated_at", Type: tsType},
}, nil)

var tableName = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$`)

// Catalog is a warehouse: a store prefix holding _registry, _stats and the
// managed tables.
type Catalog struct {
	store    objstore.Store
	root     string
	opts     table.Options
	registry *table.Table
	stats    *table.Table
}

var _ maintenance.Catalog = (*Catalog)(nil)

// Open opens the warehouse at root, creating its system tables if needed.
func Open(ctx context.Context, store objstore.Store, root string, opts table.Options) (*Catalog, error) {
	c := &Catalog{store: store, root: table.NormalizeRoot(root), opts: opts}
	var err error
	if c.registry, err = openOrCreate(ctx, store, c.root+RegistryName, RegistrySchema, opts); err != nil {
		return nil, err
	}
	if c.stats, err = openOrCreate(ctx, store, c.root+StatsName, StatsSchema, opts); err != nil {
		return nil, err
	}
	for _, n := range []string{RegistryName, StatsName} {
		if _, err := c.Resolve(ctx, n); errors.Is(err, maintenance.ErrUnknownTable) {
			if err := c.Register(ctx, n, n, maintenance.DefaultPolicy()); err != nil {
				return nil, err
			}
		} else if err != nil {
			return nil, err
		}
	}
	return c, nil
}

func openOrCreate(ctx context.Context, store objstore.Store, root string, schema *arrow.Schema, opts table.Options) (*table.Table, error) {
	t, err := table.Open(ctx, store, root, opts)
	if errors.Is(err, table.ErrNotATable) {
		t, err = table.Create(ctx, store, root, schema, "name", opts)
		if errors.Is(err, table.ErrTableExists) { // a concurrent creator won
			t, err = table.Open(ctx, store, root, opts)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("catalog %s: %w", root, err)
	}
	return t, nil
}

// Root is the warehouse prefix.
func (c *Catalog) Root() string { return c.root }

// Store is the warehouse's object store.
func (c *Catalog) Store() objstore.Store { return c.store }

// TableRoot is where a table called name lives (relative names) or rel.
func (c *Catalog) TableRoot(rel string) string {
	return table.NormalizeRoot(c.root + strings.Trim(rel, "/"))
}

// Register adds or updates a managed tablekeep table. rel is the table's
// location relative to the warehouse root.
func (c *Catalog) Register(ctx context.Context, name, rel string, p maintenance.Policy) error {
	return c.RegisterBatch(ctx, []Registration{{Name: name, Rel: rel, Policy: p}})
}

// RegisterFormat is Register for a table of the given format ("" or
// "tablekeep", "lance"; see RegisterBatch).
func (c *Catalog) RegisterFormat(ctx context.Context, name, rel string, p maintenance.Policy, format string) error {
	return c.RegisterBatch(ctx, []Registration{{Name: name, Rel: rel, Policy: p, Format: format}})
}

// Registration is one table to register.
type Registration struct {
	Name, Rel string
	Policy    maintenance.Policy
	// Format is the table's format: "" (or "tablekeep") for a tablekeep
	// table, FormatLance for a Lance dataset (ValidateFormat).
	Format string
}

// RegisterBatch adds or updates many managed tables in one commit.
//
// A registration of another format than tablekeep's needs _registry's
// format column: the first one adds it (AddColumns, one commit more).
// A warehouse that never registers such a table keeps RegistrySchema, so
// releases that predate the column can still read its registry.
//
// A registered name keeps its format: registering it again with another
// one is ErrFormatChange (unregister it first). This is checked against
// the registry version read, so two registrars racing on one name with
// different formats leave the last one's.
func (c *Catalog) RegisterBatch(ctx context.Context, regs []Registration) error {
	if len(regs) == 0 {
		return nil
	}
	regs = slices.Clone(regs)
	others := false // a format other than tablekeep's
	for i, r := range regs {
		name, rel, p := r.Name, strings.Trim(r.Rel, "/"), r.Policy
		if !tableName.MatchString(name) {
			return fmt.Errorf("%w: table name %q", maintenance.ErrInvalidMessage, name)
		}
		if err := objstore.ValidateKey(rel); err != nil {
			return fmt.Errorf("register %s: %w", name, err)
		}
		// The fleet index lives in _fleet/ under the warehouse root.
		if fleet := strings.TrimSuffix(fleet.Dir, "/"); rel == fleet || strings.HasPrefix(rel, fleet+"/") {
			return fmt.Errorf("register %s: %w: %q is reserved for the fleet index", name, objstore.ErrInvalidKey, rel)
		}
		if d := systemDir(rel); d != "" && (name != rel || (name != RegistryName && name != StatsName)) {
			return fmt.Errorf("register %s: %w: %s is the warehouse's own %s", name, ErrSystemTable, rel, d)
		}
		p = p.WithDefaults()
		if err := validateThreshold(p.DeletedThreshold); err != nil {
			return err
		}
		if err := p.Validate(); err != nil {
			return err
		}
		f, err := ValidateFormat(r.Format)
		if err != nil {
			return fmt.Errorf("register %s: %w", name, err)
		}
		if f != "" && (name == RegistryName || name == StatsName) {
			return fmt.Errorf("register %s: %w: always a tablekeep table", name, ErrSystemTable)
		}
		others = others || f != ""
		regs[i] = Registration{Name: name, Rel: rel, Policy: p, Format: f}
	}
	if err := c.checkRoots(ctx, regs); err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		snap, err := c.registry.Latest(ctx)
		if err != nil {
			return err
		}
		m := snap.Manifest()
		retry := attempt < 3
		if others && !m.Schema.HasField(FormatField.Name) {
			// ErrInvalidSchema: a concurrent registrar added it first.
			_, err := c.registry.AddColumns(ctx, FormatField)
			if err == nil || (errors.Is(err, table.ErrInvalidSchema) && retry) {
				continue
			}
			return fmt.Errorf("register: add the %q column to %s: %w", FormatField.Name, RegistryName, err)
		}
		if err := c.checkFormats(ctx, snap, regs); err != nil {
			return err
		}
		rec := registryBatch(m.Schema, regs)
		_, err = c.registry.Upsert(ctx, rec)
		rec.Release()
		// ErrSchemaMismatch: a concurrent registrar added the format
		// column since: rebuild the rows on the new schema.
		if !errors.Is(err, table.ErrSchemaMismatch) || !retry {
			return err
		}
	}
}

// registryBatch builds the rows of regs (validated) with schema s
// (RegistrySchema, with or without FormatField).
func registryBatch(s *arrow.Schema, regs []Registration) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, s)
	defer b.Release()
	now := arrow.Timestamp(time.Now().UnixMicro())
	formatCol := -1
	if idx := s.FieldIndices(FormatField.Name); len(idx) == 1 {
		formatCol = idx[0]
	}
	for _, r := range regs {
		p := r.Policy
		b.Field(0).(*array.StringBuilder).Append(r.Name)
		b.Field(1).(*array.StringBuilder).Append(r.Rel)
		b.Field(2).(*array.Int64Builder).Append(int64(p.TargetRows))
		b.Field(3).(*array.Float64Builder).Append(p.DeletedThreshold)
		b.Field(4).(*array.Int64Builder).Append(int64(p.Grace / time.Second))
		b.Field(5).(*array.Int64Builder).Append(int64(p.KeepLast))
		b.Field(6).(*array.TimestampBuilder).Append(now)
		if formatCol >= 0 {
			if r.Format == "" {
				b.Field(formatCol).AppendNull()
			} else {
				b.Field(formatCol).(*array.StringBuilder).Append(r.Format)
			}
		}
	}
	return b.NewRecordBatch()
}

// Tables lists the registered tables.
func (c *Catalog) Tables(ctx context.Context) ([]maintenance.TableRef, error) {
	snap, err := c.registry.Latest(ctx)
	if err != nil {
		return nil, err
	}
	var out []maintenance.TableRef
	err = snap.Scan(ctx, table.ScanOptions{}, func(rec arrow.RecordBatch) error {
		for i := range int(rec.NumRows()) {
			out = append(out, c.refOf(rec, i))
		}
		return nil
	})
	return out, err
}

func (c *Catalog) refOf(rec arrow.RecordBatch, i int) maintenance.TableRef {
	p := maintenance.Policy{
		TargetRows:       uint64(rec.Column(2).(*array.Int64).Value(i)),
		DeletedThreshold: rec.Column(3).(*array.Float64).Value(i),
		Grace:            graceOf(rec.Column(4).(*array.Int64).Value(i)),
		KeepLast:         int(rec.Column(5).(*array.Int64).Value(i)),
	}
	return maintenance.TableRef{
		Name:   rec.Column(0).(*array.String).Value(i),
		Root:   c.TableRoot(rec.Column(1).(*array.String).Value(i)),
		Policy: p.WithDefaults(),
		Format: formatOf(rec, i),
	}
}

// graceOf is a registry row's grace_seconds as a policy grace: whole
// seconds, a value beyond table.MaxGrace read as MaxGrace (the longer,
// safe side; the product once wrapped around), and 0 or less as unset
// (the default, 1 h). Registrations above MaxGrace are refused
// (Policy.Validate); this bounds a row written otherwise.
func graceOf(secs int64) time.Duration {
	switch {
	case secs <= 0:
		return 0
	case secs > int64(table.MaxGrace/time.Second):
		return table.MaxGrace
	}
	return time.Duration(secs) * time.Second
}

// formatOf is row i's format: "" without the column or when null.
func formatOf(rec arrow.RecordBatch, i int) string {
	idx := rec.Schema().FieldIndices(FormatField.Name)
	if len(idx) != 1 {
		return ""
	}
	col, ok := rec.Column(idx[0]).(*array.String)
	if !ok || col.IsNull(i) {
		return ""
	}
	return col.Value(i)
}

// Resolve finds a registered table by name; unknown names wrap
// maintenance.ErrUnknownTable.
func (c *Catalog) Resolve(ctx context.Context, name string) (maintenance.TableRef, error) {
	if !tableName.MatchString(name) {
		return maintenance.TableRef{}, fmt.Errorf("%w: %q", maintenance.ErrUnknownTable, name)
	}
	snap, err := c.registry.Latest(ctx)
	if err != nil {
		return maintenance.TableRef{}, err
	}
	rec, err := snap.Get(ctx, name)
	if errors.Is(err, table.ErrNotFound) {
		return maintenance.TableRef{}, fmt.Errorf("%w: %q", maintenance.ErrUnknownTable, name)
	}
	if err != nil {
		return maintenance.TableRef{}, err
	}
	defer rec.Release()
	return c.refOf(rec, 0), nil
}

// Stats returns the _stats rows by table name.
func (c *Catalog) Stats(ctx context.Context) (map[string]maintenance.TableStats, error) {
	if c.stats == nil { // OpenExisting on a warehouse without _stats
		return map[string]maintenance.TableStats{}, nil
	}
	snap, err := c.stats.Latest(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]maintenance.TableStats{}
	err = scanStats(ctx, snap, func(s maintenance.TableStats, _ time.Time) { out[s.Name] = s })
	return out, err
}

// StatsPoint is a table's _stats row as one version of _stats held it; At
// is the row's updated_at.
type StatsPoint struct {
	At time.Time
	maintenance.TableStats
}

// StatsHistory returns each table's _stats rows over the newest versions
// of _stats still stored (at most versions of them), oldest first, one
// point per distinct updated_at: the table's history as the passes
// recorded it. It reads the latest version, then one older version at a
// time (each a Checkout: its floor and manifest, then its data files)
// until one is pruned or missing. A warehouse without _stats has none.
func (c *Catalog) StatsHistory(ctx context.Context, versions int) (map[string][]StatsPoint, error) {
	out := map[string][]StatsPoint{}
	if c.stats == nil || versions < 1 {
		return out, nil
	}
	snap, err := c.stats.Latest(ctx)
	if err != nil {
		return nil, err
	}
	seen := map[string]time.Time{} // the oldest point kept so far
	for n := 0; ; n++ {
		err := scanStats(ctx, snap, func(s maintenance.TableStats, at time.Time) {
			if old, ok := seen[s.Name]; ok && !at.Before(old) {
				return
			}
			seen[s.Name] = at
			out[s.Name] = append(out[s.Name], StatsPoint{At: at, TableStats: s})
		})
		if err != nil {
			return nil, err
		}
		v := snap.Version()
		if n+1 >= versions || v <= 1 {
			break
		}
		snap, err = c.stats.Checkout(ctx, v-1)
		if errors.Is(err, table.ErrVersionPruned) || errors.Is(err, table.ErrVersionNotFound) {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	for _, pts := range out {
		slices.Reverse(pts)
	}
	return out, nil
}

// scanStats calls fn with every _stats row of snap and its updated_at.
func scanStats(ctx context.Context, snap *table.Snapshot, fn func(maintenance.TableStats, time.Time)) error {
	return snap.Scan(ctx, table.ScanOptions{}, func(rec arrow.RecordBatch) error {
		i64 := func(col, i int) int64 { return rec.Column(col).(*array.Int64).Value(i) }
		ts := func(col, i int) time.Time {
			a := rec.Column(col).(*array.Timestamp)
			if a.IsNull(i) {
				return time.Time{}
			}
			return time.UnixMicro(int64(a.Value(i))).UTC()
		}
		for i := range int(rec.NumRows()) {
			fn(maintenance.TableStats{
				Name: rec.Column(0).(*array.String).Value(i), Rows: uint64(i64(1, i)), Fragments: int(i64(2, i)),
				SmallFrags: int(i64(3, i)), Versions: int(i64(4, i)), Unreclaimed: int(i64(5, i)),
				DataBytes: uint64(i64(6, i)), ManifestBytes: i64(7, i), LastCompaction: ts(8, i), LastCleanup: ts(9, i),
			}, ts(10, i))
		}
		return nil
	})
}

// PutStats upserts one table's stats row.
func (c *Catalog) PutStats(ctx context.Context, s maintenance.TableStats) error {
	return c.PutStatsBatch(ctx, []maintenance.TableStats{s})
}

var _ maintenance.StatsBatchPutter = (*Catalog)(nil)

// PutStatsBatch upserts many tables' stats rows in one commit.
func (c *Catalog) PutStatsBatch(ctx context.Context, rows []maintenance.TableStats) error {
	if len(rows) == 0 {
		return nil
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, StatsSchema)
	defer b.Release()
	now := arrow.Timestamp(time.Now().UnixMicro())
	for _, s := range rows {
		b.Field(0).(*array.StringBuilder).Append(s.Name)
		for i, v := range []int64{int64(s.Rows), int64(s.Fragments), int64(s.SmallFrags), int64(s.Versions),
			int64(s.Unreclaimed), int64(s.DataBytes), s.ManifestBytes} {
			b.Field(1 + i).(*array.Int64Builder).Append(v)
		}
		for i, t := range []time.Time{s.LastCompaction, s.LastCleanup} {
			if t.IsZero() {
				b.Field(8 + i).AppendNull()
			} else {
				b.Field(8 + i).(*array.TimestampBuilder).Append(arrow.Timestamp(t.UnixMicro()))
			}
		}
		b.Field(10).(*array.TimestampBuilder).Append(now)
	}
	if c.stats == nil {
		return fmt.Errorf("catalog %s: %w: no %s table", c.root, ErrNoWarehouse, StatsName)
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	_, err := c.stats.Upsert(ctx, rec)
	return err
}

// ErrNoWarehouse: a location without a _registry table. Only Open creates
// one (`tablekeep register`); everything that reads uses OpenExisting.
var ErrNoWarehouse = errors.New("no warehouse")

// Exists reports whether root holds a warehouse: a manifest under
// _registry/_versions/ (one List of at most one key). It writes nothing.
func Exists(ctx context.Context, store objstore.Store, root string) (bool, error) {
	p, err := store.List(ctx, objstore.ListOptions{Prefix: table.NormalizeRoot(root) + RegistryName + "/" + table.VersionsPrefix, MaxKeys: 1})
	if err != nil {
		return false, err
	}
	return len(p.Objects) > 0, nil
}

// OpenExisting opens the warehouse at root without creating or registering
// anything: a root without _registry is ErrNoWarehouse. A warehouse whose
// _stats is missing reads as one with no stats rows.
func OpenExisting(ctx context.Context, store objstore.Store, root string, opts table.Options) (*Catalog, error) {
	c := &Catalog{store: store, root: table.NormalizeRoot(root), opts: opts}
	var err error
	if c.registry, err = table.Open(ctx, store, c.root+RegistryName, opts); errors.Is(err, table.ErrNotATable) {
		return nil, fmt.Errorf("%w (no %s)", ErrNoWarehouse, RegistryName)
	} else if err != nil {
		return nil, fmt.Errorf("catalog %s%s: %w", c.root, RegistryName, err)
	}
	if c.stats, err = table.Open(ctx, store, c.root+StatsName, opts); errors.Is(err, table.ErrNotATable) {
		c.stats = nil
	} else if err != nil {
		return nil, fmt.Errorf("catalog %s%s: %w", c.root, StatsName, err)
	}
	return c, nil
}
