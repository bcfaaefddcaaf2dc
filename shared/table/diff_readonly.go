package table

import (
	"context"
	"fmt"

	"github.com/tablekeep/tablekeep/shared/dataset"
)

// ComputeChangeRecord returns version v's change record as the diff of the
// manifests of v-1 and v, without writing it. The orphan sweep uses it where
// a record is missing: re-creating one (RepairChangeRecord) could resurrect
// a record a cleaner has just deleted, which nothing would delete again.
func (t *Table) ComputeChangeRecord(ctx context.Context, v uint64) (*dataset.ChangeRecord, error) {
	next, err := t.readManifest(ctx, v)
	if err != nil {
		return nil, err
	}
	var prev *Manifest
	if v > 1 {
		if prev, err = t.readManifest(ctx, v-1); err != nil {
			return nil, fmt.Errorf("change record %d: %w", v, err)
		}
	}
	return diffManifests(prev, next), nil
}

// ReadManifest reads version v's manifest: one GET, no floor check (the
// orphan sweep reads the files of a retained version whose change record is
// missing).
func (t *Table) ReadManifest(ctx context.Context, v uint64) (*Manifest, error) {
	return t.readManifest(ctx, v)
}
