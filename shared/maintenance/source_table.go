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
// starts when its successor is written.
type TableSource struct{ T *table.Table }

var _ Source = TableSource{}

func (s TableSource) Root() string                      { return s.T.Root() }
func (s TableSource) Store() objstore.Store             { return s.T.Store() }
func (s TableSource) StateRoot() string                 { return s.T.Root() }
func (s TableSource) Prepare(ctx context.Context) error { return nil }

// Versions lists the stored versions; Time is the store time of the next
// stored manifest (the latest's own).
func (s TableSource) Versions(ctx context.Context) ([]dataset.VersionInfo, error) {
	vs, err := s.T.Versions(ctx)
	for i := 0; i+1 < len(vs); i++ {
		vs[i].Time = vs[i+1].Time
	}
	return vs, err
}

func (s TableSource) Floor(ctx context.Context) (uint64, error) { return s.T.Floor(ctx) }
func (s TableSource) SetFloor(ctx context.Context, f uint64) error {
	return s.T.SetFloor(ctx, f)
}
func (s TableSource) Tags(ctx context.Context) (map[string]uint64, error) { return s.T.Tags(ctx) }
func (s TableSource) ChangeRecord(ctx context.Context, v uint64) (*dataset.ChangeRecord, error) {
	return s.T.ChangeRecord(ctx, v)
}
func (s TableSource) EnsureChangeRecords(ctx context.Context, spans [][2]uint64) (int, error) {
	return ensureChangeRecords(ctx, s.T, spans)
}
func (s TableSource) CheckKey(rel string) error {
	if !table.IsDataKey(rel) {
		return fmt.Errorf("%q is not a data or deletion file", rel)
	}
	return nil
}
func (s TableSource) ManifestKeys(_ context.Context, v uint64) ([]string, error) {
	return []string{table.ManifestKey(v)}, nil
}
func (s TableSource) RecordKey(v uint64) string { return table.ChangeKey(v) }
func (s TableSource) LatestRefs(ctx context.Context) (uint64, []string, error) {
	return tableLatest(s.T.Store(), s.T.Root(), s.T.Options())(ctx)
}
func (s TableSource) Grace(policyGrace time.Duration) time.Duration {
	return table.RetentionGrace(policyGrace, s.T.WriterGrace())
}
