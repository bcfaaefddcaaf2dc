package maintenance

import (
	"context"
	"fmt"
	"time"

	"github.com/tablekeep/tablekeep/shared/dataset"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/table"
)

// TableSource is a tablekeep table seen as a Source: its writers write the
// change records, so Prepare has nothing to do; a version's grace window
// starts when its successor is written. It offers tablekeep's fast paths
// as optional interfaces: FloorReader (the floor read SetFloorFrom
// reuses), TableBacked (compaction, stats and the orphan sweep over the
// *table.Table), RecordLister (RangeMessage.Records), SizeLister (the
// cleaner's size listings) and CleanChecker (the floor marker's history).
// T may be a table.Handle that has read nothing: every method reads what it
// needs.
type TableSource struct{ T *table.Table }

var (
	_ Source       = (*TableSource)(nil)
	_ FloorReader  = (*TableSource)(nil)
	_ TableBacked  = (*TableSource)(nil)
	_ RecordLister = (*TableSource)(nil)
	_ SizeLister   = (*TableSource)(nil)
	_ LatestProber = (*TableSource)(nil)
	_ SourceOpener = OpenTableSource
)

// OpenTableSource is the SourceOpener of tablekeep's own format (TableRef.Format
// ""), and what Runner, Cleaner and SweepTable use without one: a
// TableSource on a table.Handle (no request made; the policy's grace is the
// handle's). Any other format is ErrUnknownFormat.
func OpenTableSource(_ context.Context, store objstore.Store, ref TableRef) (Source, error) {
	switch ref.Format {
	case "":
		opts := table.Options{Grace: ref.Policy.WithDefaults().Grace}
		return &TableSource{T: table.Handle(store, ref.Root, opts)}, nil
	}
	return nil, fmt.Errorf("%s: %w: %q (no opener for it)", ref.Name, ErrUnknownFormat, ref.Format)
}

// FloorReader is a Source whose floor read says what it saw (tablekeep's
// markers): the planner reuses it for SetFloorFrom (no second listing) and
// for the stale-marker rule (a marker older than its version's manifest is
// another history's), which the cleaner checks again before deleting.
type FloorReader interface {
	ReadFloor(ctx context.Context) (table.FloorRead, error)
	// SetFloorFrom raises the floor to floor, its marker stamped with at
	// (the stamp of version floor's manifest in the plan's listing).
	SetFloorFrom(ctx context.Context, floor uint64, at table.ManifestStamp, read table.FloorRead) error
}

// RefsReader is a FloorReader that reads the floor and the tags in one
// listing (tablekeep's _refs/: the floor's keys sort before the tags'),
// as ReadFloor then Tags would: the cleaner's check before a range.
type RefsReader interface {
	ReadRefs(ctx context.Context) (table.FloorRead, map[string]uint64, error)
}

// TableBacked is a Source over a tablekeep *table.Table: the runner opens it
// under the table's lease (OpenTable, with the lease's fence) and compacts
// it with its Compactor; its stats and mark are computed from the manifest
// the table holds, and the orphan sweep lists the files its stored
// manifests reference (Sweep).
type TableBacked interface {
	Table() *table.Table
	// OpenTable reads the table's latest version with opts (one LIST, one
	// GET) and reads through it from then on.
	OpenTable(ctx context.Context, opts table.Options) (*table.Table, error)
}

// RecordLister is a Source whose range messages may name the versions that
// have a change record (RangeMessage.Records): EnsureRecords is
// EnsureChangeRecords that also returns, per span, the versions that have
// one afterwards (have nil: the messages go without the field).
type RecordLister interface {
	EnsureRecords(ctx context.Context, spans [][2]uint64) (n int, have [][]uint64, err error)
}

// SizeLister is a Source whose layout the cleaner's size listings know
// (tablekeep's data/, _deletions/, _versions/ and _changes/): the cleaner
// measures the bytes it deletes (CleanResult.Bytes) unless SkipSizes.
type SizeLister interface {
	// SizePrefixes are the data prefixes (relative to the root) listed for
	// the sizes of the data keys deleted.
	SizePrefixes() []string
}

func (s *TableSource) Root() string                      { return s.T.Root() }
func (s *TableSource) Store() objstore.Store             { return s.T.Store() }
func (s *TableSource) StateRoot() string                 { return s.T.Root() }
func (s *TableSource) Prepare(ctx context.Context) error { return nil }
func (s *TableSource) Table() *table.Table               { return s.T }

func (s *TableSource) OpenTable(ctx context.Context, opts table.Options) (*table.Table, error) {
	t, err := table.Open(ctx, s.T.Store(), s.T.Root(), opts)
	if err != nil {
		return nil, err
	}
	s.T = t
	return t, nil
}

// OpenTableListed is OpenTable on version v, which a LIST sent after at
// named the latest (table.RefreshListed: one GET, no LIST).
func (s *TableSource) OpenTableListed(ctx context.Context, opts table.Options, v uint64, at time.Time) (*table.Table, error) {
	t := table.Handle(s.T.Store(), s.T.Root(), opts)
	if _, err := t.RefreshListed(ctx, v, at); err != nil {
		return nil, err
	}
	s.T = t
	return t, nil
}

// Versions lists the stored versions (Time: the manifest's store time); a
// version's grace window starts at its successor's (GraceFrom; none for
// the latest).
func (s *TableSource) Versions(ctx context.Context) ([]dataset.VersionInfo, error) {
	vs, err := s.T.Versions(ctx)
	for i := 0; i+1 < len(vs); i++ {
		vs[i].GraceFrom = vs[i+1].Time
	}
	return vs, err
}

func (s *TableSource) Floor(ctx context.Context) (uint64, error) { return s.T.Floor(ctx) }
func (s *TableSource) SetFloor(ctx context.Context, f uint64) error {
	return s.T.SetFloor(ctx, f)
}
func (s *TableSource) ReadFloor(ctx context.Context) (table.FloorRead, error) {
	return s.T.ReadFloor(ctx)
}
func (s *TableSource) SetFloorFrom(ctx context.Context, f uint64, at table.ManifestStamp, r table.FloorRead) error {
	return s.T.SetFloorFrom(ctx, f, at, r)
}
func (s *TableSource) Tags(ctx context.Context) (map[string]uint64, error) { return s.T.Tags(ctx) }
func (s *TableSource) ReadRefs(ctx context.Context) (table.FloorRead, map[string]uint64, error) {
	return s.T.ReadRefs(ctx)
}
func (s *TableSource) ChangeRecord(ctx context.Context, v uint64) (*dataset.ChangeRecord, error) {
	return s.T.ChangeRecord(ctx, v)
}
func (s *TableSource) EnsureChangeRecords(ctx context.Context, spans [][2]uint64) (int, error) {
	return ensureChangeRecords(ctx, s.T, spans)
}

// EnsureRecords: on a format-3 table (the latest manifest held says so)
// the versions with a record are named in the messages.
func (s *TableSource) EnsureRecords(ctx context.Context, spans [][2]uint64) (int, [][]uint64, error) {
	n, have, err := ensureChangeRecordsIndexed(ctx, s.T, spans)
	if m := s.T.Cached(); m == nil || m.Format < 3 {
		have = nil
	}
	return n, have, err
}

func (s *TableSource) CheckKey(rel string) error {
	if !table.IsDataKey(rel) {
		return fmt.Errorf("%q is not a data or deletion file", rel)
	}
	return nil
}
func (s *TableSource) ManifestKeys(_ context.Context, v uint64) ([]string, error) {
	return []string{table.ManifestKey(v)}, nil
}
func (s *TableSource) RecordKey(v uint64) string { return table.ChangeKey(v) }
func (s *TableSource) LatestRefs(ctx context.Context) (uint64, []string, error) {
	return tableLatest(s.T.Store(), s.T.Root(), s.T.Options())(ctx)
}
func (s *TableSource) Grace(policyGrace time.Duration) time.Duration {
	return table.RetentionGrace(policyGrace, s.T.WriterGrace())
}

// LatestVersion is the fleet scan's probe: one LIST with max-keys 1
// (LatestVersion), whatever the version known.
func (s *TableSource) LatestVersion(ctx context.Context, _ uint64) (uint64, error) {
	return LatestVersion(ctx, s.T.Store(), s.T.Root())
}

func (s *TableSource) SizePrefixes() []string {
	return []string{table.DataPrefix, table.DeletionsPrefix}
}
