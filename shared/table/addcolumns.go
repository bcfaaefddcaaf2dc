package table

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/tablekeep/tablekeep/shared/dataset"
)

// maxColumns is the largest schema a manifest may hold (4.1).
const maxColumns = 10000

// AddColumns commits a version whose schema is the latest's with fields
// appended at the end: schema evolution. Fields must be nullable, of a
// supported type, and named unlike every existing column
// (ErrInvalidSchema). Fragments are unchanged: their data files hold a
// prefix of the new schema, and the added columns read as nulls until the
// rows are written again (an upsert, or compaction, which rewrites with
// the full schema). Writes prepared on the old schema that commit after it
// rebase as usual (their files are a prefix too); new writes must supply
// batches of the new schema (ErrSchemaMismatch otherwise).
func (t *Table) AddColumns(ctx context.Context, fields ...arrow.Field) (*CommitResult, error) {
	if len(fields) == 0 {
		return nil, fmt.Errorf("%w: no column to add", ErrInvalidSchema)
	}
	base, at, err := t.base(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := addColumns(base, fields); err != nil {
		return nil, err
	}
	op := t.newOp(dataset.OpAddColumns)
	op.readAt = at
	op.addFields = fields
	return t.commit(ctx, op, base)
}

// addColumns returns base's schema with fields appended, or why not. It
// runs again on every rebase: a concurrent AddColumns of the same name
// makes the later commit fail rather than duplicate the column.
func addColumns(base *Manifest, fields []arrow.Field) (*arrow.Schema, error) {
	all := append(base.Schema.Fields(), fields...)
	if len(all) > maxColumns {
		return nil, fmt.Errorf("%w: %d columns; at most %d", ErrInvalidSchema, len(all), maxColumns)
	}
	for _, f := range fields {
		if !f.Nullable {
			return nil, fmt.Errorf("%w: added column %q must be nullable (existing rows read it as null)", ErrInvalidSchema, f.Name)
		}
		if base.Schema.HasField(f.Name) {
			return nil, fmt.Errorf("%w: column %q already exists in version %d", ErrInvalidSchema, f.Name, base.Version)
		}
	}
	s := arrow.NewSchema(all, nil)
	if err := validateSchema(s, base.KeyColumn); err != nil {
		return nil, err
	}
	return normalizeSchema(s), nil
}
