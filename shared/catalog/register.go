package catalog

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/tablekeep/tablekeep/shared/fleet"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/table"
)

// Registration errors.
var (
	// ErrInvalidName: a table name the registry does not accept.
	ErrInvalidName = errors.New("invalid table name")
	// ErrInvalidLocation: a table path that is not a relative path inside
	// the warehouse.
	ErrInvalidLocation = errors.New("invalid table path")
	// ErrSystemTable: _registry and _stats cannot be registered again or
	// unregistered.
	ErrSystemTable = errors.New("system table")
	// ErrFormatChange: a registered table registered again with another
	// format.
	ErrFormatChange = errors.New("table registered with another format")
	// ErrAlreadyRegistered: a root registered under another name. Two
	// names on one root would maintain it under two policies (the harshest
	// wins) and two locks.
	ErrAlreadyRegistered = errors.New("already registered")
	// ErrNestedRoot: a root inside another registered root, or holding
	// one: the outer table's sweep would see the inner one's files as
	// unreferenced.
	ErrNestedRoot = errors.New("nested table roots")
)

// StatusDir holds the warehouse's status page (the scheduled compactor
// writes _status/index.html; docs/format.md 2.8).
const StatusDir = "_status"

// SystemDirs are the warehouse's own top-level directories: its system
// tables, the lock files of a local warehouse, the fleet index and the
// status page. No registered table lives in them.
var SystemDirs = []string{RegistryName, StatsName, "_locks", strings.TrimSuffix(fleet.Dir, "/"), "_maintenance", StatusDir}

// systemDir is the system directory rel lies in ("" if none).
func systemDir(rel string) string {
	first, _, _ := strings.Cut(strings.Trim(rel, "/"), "/")
	for _, d := range SystemDirs {
		if strings.EqualFold(first, d) {
			return d
		}
	}
	return ""
}

// CheckRoot refuses registering name at rel when rel lies in a system
// directory (ErrSystemTable), is registered under another name
// (ErrAlreadyRegistered: "t is already registered as prod"), or lies
// inside another registered root or holds one (ErrNestedRoot). It reads
// the registry once (one scan). Registering a name again at its own root
// is allowed (that updates its policy).
func (c *Catalog) CheckRoot(ctx context.Context, name, rel string) error {
	rel = strings.Trim(rel, "/")
	if d := systemDir(rel); d != "" {
		return fmt.Errorf("%w: %s is the warehouse's own %s, not a table to register", ErrSystemTable, rel, d)
	}
	refs, err := c.Tables(ctx)
	if err != nil {
		return fmt.Errorf("register: read %s: %w", RegistryName, err)
	}
	return c.rootConflict(refs, name, rel)
}

// rootConflict is CheckRoot's rule against the registered refs (not the
// system directory test).
func (c *Catalog) rootConflict(refs []maintenance.TableRef, name, rel string) error {
	root := c.TableRoot(rel)
	for _, ref := range refs {
		if ref.Name == name || ref.Name == RegistryName || ref.Name == StatsName {
			continue
		}
		other := strings.TrimSuffix(strings.TrimPrefix(ref.Root, c.root), "/")
		switch {
		case ref.Root == root:
			return fmt.Errorf("%w: %s is already registered as %s (unregister %s first, or register it again under that name to change its policy)",
				ErrAlreadyRegistered, rel, ref.Name, ref.Name)
		case strings.HasPrefix(root, ref.Root):
			return fmt.Errorf("%w: %s lies inside %s, registered as %s", ErrNestedRoot, rel, other, ref.Name)
		case strings.HasPrefix(ref.Root, root):
			return fmt.Errorf("%w: %s holds %s, registered as %s", ErrNestedRoot, rel, other, ref.Name)
		}
	}
	return nil
}

// checkRoots applies CheckRoot's one-root-one-name rule to a batch, against
// the registry (one scan, whatever the batch's size) and within the batch
// (sorted roots: a root nested in another sorts between it and every root
// after it that it prefixes, so adjacent pairs suffice). Every registration
// path passes here, not only the CLI's.
func (c *Catalog) checkRoots(ctx context.Context, regs []Registration) error {
	var mine []Registration
	for _, r := range regs {
		if r.Name != RegistryName && r.Name != StatsName {
			mine = append(mine, r)
		}
	}
	if len(mine) == 0 {
		return nil
	}
	refs, err := c.Tables(ctx)
	if err != nil {
		return fmt.Errorf("register: read %s: %w", RegistryName, err)
	}
	batch := make([]maintenance.TableRef, 0, len(mine))
	for _, r := range mine {
		if err := c.rootConflict(refs, r.Name, r.Rel); err != nil {
			return err
		}
		batch = append(batch, maintenance.TableRef{Name: r.Name, Root: c.TableRoot(r.Rel)})
	}
	slices.SortFunc(batch, func(a, b maintenance.TableRef) int { return strings.Compare(a.Root, b.Root) })
	for i := 1; i < len(batch); i++ {
		a, b := batch[i-1], batch[i]
		if a.Name != b.Name && strings.HasPrefix(b.Root, a.Root) {
			rel := strings.TrimSuffix(strings.TrimPrefix(b.Root, c.root), "/")
			return c.rootConflict([]maintenance.TableRef{a}, b.Name, rel)
		}
	}
	return nil
}

// Table formats the registry records (Registration.Format, TableRef.Format).
const (
	FormatTablekeep = "" // also accepted as "tablekeep"
	FormatLance     = "lance"
)

// ValidateFormat normalises a table format: "" and "tablekeep" are
// FormatTablekeep (""), "lance" is FormatLance (case and surrounding
// spaces ignored); anything else wraps maintenance.ErrUnknownFormat.
func ValidateFormat(format string) (string, error) {
	switch f := strings.ToLower(strings.TrimSpace(format)); f {
	case "", "tablekeep":
		return FormatTablekeep, nil
	case FormatLance:
		return FormatLance, nil
	}
	return "", fmt.Errorf("%w %q: known formats are tablekeep and lance", maintenance.ErrUnknownFormat, format)
}

// checkFormats refuses a registration that would change the format of a
// table registered in m. Without a format column every registered table is
// tablekeep's, so only the names registered with another format are looked
// up; with it, every name is (by key, or by one scan of the registry when
// that reads fewer data files).
func (c *Catalog) checkFormats(ctx context.Context, snap *table.Snapshot, regs []Registration) error {
	m := snap.Manifest()
	hasColumn := m.Schema.HasField(FormatField.Name)
	want := map[string]string{}
	for _, r := range regs {
		if hasColumn || r.Format != "" {
			want[r.Name] = r.Format
		}
	}
	if len(want) == 0 {
		return nil
	}
	var err error
	have := map[string]string{}
	if len(want) > len(m.Fragments) {
		cols := []string{"name"}
		if hasColumn {
			cols = append(cols, FormatField.Name)
		}
		err = snap.Scan(ctx, table.ScanOptions{Columns: cols}, func(rec arrow.RecordBatch) error {
			for i := range int(rec.NumRows()) {
				if n := rec.Column(0).(*array.String).Value(i); inMap(want, n) {
					have[n] = formatOf(rec, i)
				}
			}
			return nil
		})
	} else {
		for n := range want {
			rec, gerr := snap.Get(ctx, n)
			if errors.Is(gerr, table.ErrNotFound) {
				continue
			}
			if gerr != nil {
				err = gerr
				break
			}
			have[n] = formatOf(rec, 0)
			rec.Release()
		}
	}
	if err != nil {
		return fmt.Errorf("register: read %s: %w", RegistryName, err)
	}
	for _, r := range regs {
		if f, registered := have[r.Name]; registered && f != r.Format {
			return fmt.Errorf("register %s: %w: registered as %s, not %s (unregister it first)", r.Name, ErrFormatChange, formatName(f), formatName(r.Format))
		}
	}
	return nil
}

func inMap(m map[string]string, k string) bool {
	_, ok := m[k]
	return ok
}

func formatName(f string) string {
	if f == "" {
		return "tablekeep"
	}
	return f
}

// ValidateName checks a table name: 1 to 128 letters, digits, '.', '_' or
// '-', not starting with '.' or '-'.
func ValidateName(name string) error {
	if !tableName.MatchString(name) {
		return fmt.Errorf("%w %q: use 1 to 128 letters, digits, '.', '_' or '-' (not starting with '.' or '-')", ErrInvalidName, name)
	}
	return nil
}

// ValidateLocation checks a table's path: relative to the warehouse, inside
// it (no "." or ".." segment), not a URI, not absolute, not empty, a valid
// object key.
func ValidateLocation(rel string) error {
	switch {
	case strings.TrimSpace(rel) == "":
		return fmt.Errorf("%w: empty (want a path relative to the warehouse, e.g. tables/orders)", ErrInvalidLocation)
	case strings.Contains(rel, "://") || strings.HasPrefix(strings.ToLower(rel), "s3:") || strings.HasPrefix(strings.ToLower(rel), "file:"):
		return fmt.Errorf("%w %q: a URI; want a path relative to the warehouse (the table must live inside it)", ErrInvalidLocation, rel)
	case strings.HasPrefix(rel, "/"):
		return fmt.Errorf("%w %q: an absolute path; want a path relative to the warehouse", ErrInvalidLocation, rel)
	case strings.Contains(rel, "\\"):
		return fmt.Errorf("%w %q: use '/' between path segments", ErrInvalidLocation, rel)
	}
	clean := strings.TrimSuffix(rel, "/")
	for _, seg := range strings.Split(clean, "/") {
		switch seg {
		case "..":
			return fmt.Errorf("%w %q: '..' leaves the warehouse; want a path inside it", ErrInvalidLocation, rel)
		case ".", "":
			return fmt.Errorf("%w %q: empty or '.' segment (want e.g. tables/orders)", ErrInvalidLocation, rel)
		}
	}
	if path.Clean(clean) != clean {
		return fmt.Errorf("%w %q: not a clean path", ErrInvalidLocation, rel)
	}
	if err := objstore.ValidateKey(clean); err != nil {
		return fmt.Errorf("%w %q: %v", ErrInvalidLocation, rel, err)
	}
	return nil
}

// ValidatePolicy checks a policy as given, before defaults fill its zero
// fields: a zero or negative value is an error, not "the default".
func ValidatePolicy(p maintenance.Policy) error {
	if p.TargetRows == 0 {
		return fmt.Errorf("%w: target rows must be at least 1", maintenance.ErrInvalidPolicy)
	}
	if err := validateThreshold(p.DeletedThreshold); err != nil {
		return err
	}
	return p.Validate()
}

// MinDeletedThreshold is the smallest deleted threshold accepted: below
// it, a fragment of a million rows with a single deleted row would be
// rewritten.
const MinDeletedThreshold = 0.001

// validateThreshold refuses a deleted threshold that is not a number, or
// outside [MinDeletedThreshold, 1] (0 and negatives included).
func validateThreshold(v float64) error {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return fmt.Errorf("%w: deleted threshold %v is not a number: want a share of a fragment's rows in [%g, 1], e.g. 0.1", maintenance.ErrInvalidPolicy, v, MinDeletedThreshold)
	case v <= 0 || v > 1:
		return fmt.Errorf("%w: deleted threshold %v must be in (0, 1]: a share of a fragment's rows, e.g. 0.1", maintenance.ErrInvalidPolicy, v)
	case v < MinDeletedThreshold:
		return fmt.Errorf("%w: deleted threshold %v is below %g: it would rewrite a fragment for a single deleted row", maintenance.ErrInvalidPolicy, v, MinDeletedThreshold)
	}
	return nil
}

// RegisterTable validates name, rel and p (as given: see ValidatePolicy),
// checks that rel holds a table (a manifest under rel/_versions/), then
// registers it and returns the entry as stored (defaults filled).
func (c *Catalog) RegisterTable(ctx context.Context, name, rel string, p maintenance.Policy) (maintenance.TableRef, error) {
	if err := ValidateName(name); err != nil {
		return maintenance.TableRef{}, err
	}
	if name == RegistryName || name == StatsName {
		return maintenance.TableRef{}, fmt.Errorf("%w %s: registered with the warehouse", ErrSystemTable, name)
	}
	if err := ValidateLocation(rel); err != nil {
		return maintenance.TableRef{}, err
	}
	if err := ValidatePolicy(p); err != nil {
		return maintenance.TableRef{}, err
	}
	if err := c.CheckRoot(ctx, name, rel); err != nil {
		return maintenance.TableRef{}, err
	}
	root := c.TableRoot(rel)
	if _, err := table.Open(ctx, c.store, root, c.opts); err != nil {
		if _, herr := c.store.Head(ctx, strings.TrimSuffix(root, "/")); herr == nil {
			return maintenance.TableRef{}, fmt.Errorf("%s: %w: it is a file", rel, table.ErrNotATable)
		}
		if errors.Is(err, table.ErrNotATable) {
			return maintenance.TableRef{}, fmt.Errorf("%s: %w (no manifests under %s%s)", rel, table.ErrNotATable, rel+"/", table.VersionsPrefix)
		}
		return maintenance.TableRef{}, fmt.Errorf("%s: %w", rel, err)
	}
	if err := c.Register(ctx, name, rel, p); err != nil {
		return maintenance.TableRef{}, err
	}
	return c.Resolve(ctx, name)
}

// Unregister removes name from the registry: maintenance stops; the
// table's data and its _stats row are left alone. An unknown name wraps
// maintenance.ErrUnknownTable.
func (c *Catalog) Unregister(ctx context.Context, name string) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	if name == RegistryName || name == StatsName {
		return fmt.Errorf("%w %s: part of the warehouse, cannot be unregistered", ErrSystemTable, name)
	}
	if _, err := c.Resolve(ctx, name); err != nil {
		return err
	}
	_, err := c.registry.Delete(ctx, name)
	return err
}
