package table

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"golang.org/x/sync/errgroup"

	"github.com/tablekeep/tablekeep/shared/objstore"
)

// Snapshot is a read-only view of one version.
type Snapshot struct {
	t *Table
	m *Manifest
}

// Manifest is the snapshot's manifest (do not modify).
func (s *Snapshot) Manifest() *Manifest { return s.m }

// Version is the snapshot's version.
func (s *Snapshot) Version() uint64 { return s.m.Version }

// Schema is the table schema.
func (s *Snapshot) Schema() *arrow.Schema { return s.m.Schema }

// ScanOptions select what a scan reads.
type ScanOptions struct {
	Columns []string // nil: all, in schema order
}

func (s *Snapshot) columnIndices(names []string) ([]int, error) {
	if names == nil {
		return nil, nil
	}
	out := make([]int, len(names))
	for i, n := range names {
		idx := s.m.Schema.FieldIndices(n)
		if len(idx) != 1 {
			return nil, fmt.Errorf("%w: no column %q", ErrSchemaMismatch, n)
		}
		out[i] = idx[0]
	}
	return out, nil
}

// Scan calls fn with the live rows of each fragment in order. fn must not
// keep the batch after returning without Retain.
func (s *Snapshot) Scan(ctx context.Context, opts ScanOptions, fn func(arrow.RecordBatch) error) error {
	cols, err := s.columnIndices(opts.Columns)
	if err != nil {
		return err
	}
	for _, f := range s.m.Fragments {
		if err := ctx.Err(); err != nil {
			return err
		}
		rec, _, err := s.t.ReadFragment(ctx, s.m.Schema, f, cols)
		if err != nil {
			return s.prunedErr(ctx, err)
		}
		err = fn(rec)
		rec.Release()
		if err != nil {
			return err
		}
	}
	if len(s.m.Inline) == 0 {
		return nil
	}
	// The inline rows (format 3) come last, as one batch.
	rec, err := inlineBatch(s.m.Schema, s.m.Inline, cols)
	if err != nil {
		return err
	}
	defer rec.Release()
	return fn(rec)
}

// Get returns the live row with the given key as a one-row batch, or an
// error wrapping ErrNotFound. It reads only fragments whose key bounds can
// hold the key, newest first, and stops at the first live match.
func (s *Snapshot) Get(ctx context.Context, key any) (arrow.RecordBatch, error) {
	if s.m.KeyColumn == "" {
		return nil, ErrNoKeyColumn
	}
	keyIdx := s.m.Schema.FieldIndices(s.m.KeyColumn)[0]
	want, err := KeyOf(s.m.Schema.Field(keyIdx).Type, key)
	if err != nil {
		return nil, err
	}
	// Inline rows are newer than any fragment row: found there, no
	// fragment is read.
	for i := len(s.m.Inline) - 1; i >= 0; i-- {
		if string(s.m.Inline[i].Key) == string(want) {
			return inlineBatch(s.m.Schema, s.m.Inline[i:i+1], nil)
		}
	}
	pred := newKeySet([][]byte{want})
	for i := len(s.m.Fragments) - 1; i >= 0; i-- {
		f := s.m.Fragments[i]
		if !pred.mayMatch(f.MinKey, f.MaxKey) {
			continue
		}
		rec, _, err := s.t.ReadFragment(ctx, s.m.Schema, f, nil)
		if err != nil {
			return nil, s.prunedErr(ctx, err)
		}
		keys, err := keyColumnBytes(rec.Column(keyIdx))
		if err != nil {
			rec.Release()
			return nil, err
		}
		for row, k := range keys {
			if string(k) == string(want) {
				one := rec.NewSlice(int64(row), int64(row+1))
				rec.Release()
				return one, nil
			}
		}
		rec.Release()
	}
	return nil, fmt.Errorf("%w: %v", ErrNotFound, key)
}

// prunedErr turns a missing file of this snapshot into ErrVersionPruned
// when the snapshot's version is below the retention floor: cleaners
// deleted its files after the snapshot was taken.
func (s *Snapshot) prunedErr(ctx context.Context, err error) error {
	if !errors.Is(err, objstore.ErrNotExist) {
		return err
	}
	floor, ferr := s.t.Floor(ctx)
	if ferr != nil || s.m.Version >= floor {
		return err
	}
	return objErr(s.t.key(manifestKey(s.m.Version)), ErrVersionPruned,
		fmt.Sprintf("version %d fell below the retention floor %d and its files were deleted: %v", s.m.Version, floor, err))
}

// CountRows counts live rows by reading only the manifest.
func (s *Snapshot) CountRows() uint64 { return s.m.Rows() }

// ReadFragment reads a fragment's columns (nil: all) with its deletion
// vector applied, returning the live rows and the deletion vector used.
// The data file and the deletion vector are fetched concurrently: one
// round trip, two GETs.
func (t *Table) ReadFragment(ctx context.Context, schema *arrow.Schema, f Fragment, cols []int) (arrow.RecordBatch, []uint32, error) {
	k := t.key(f.File.DataKey())
	// No shared cancellation: the data file's error, if any, is the one
	// reported, and a cancelled sibling would mask it.
	var (
		dv      errgroup.Group
		deleted []uint32
		dvErr   error
	)
	if f.Deletion != nil {
		dv.Go(func() error {
			deleted, dvErr = t.readDeletion(ctx, f)
			return nil
		})
	}
	data, err := t.store.Get(ctx, k)
	if err != nil {
		dv.Wait()
		return nil, nil, err
	}
	rec, err := decodeParquet(ctx, k, data, schema, cols)
	if err != nil {
		dv.Wait()
		return nil, nil, err
	}
	defer rec.Release()
	dv.Wait()
	if uint64(rec.NumRows()) != f.Rows {
		return nil, nil, objErr(k, ErrCorruptObject, fmt.Sprintf("%d rows, manifest says %d", rec.NumRows(), f.Rows))
	}
	if dvErr != nil {
		return nil, nil, dvErr
	}
	if len(f.Inline) > 0 {
		deleted = unionPositions(deleted, f.Inline)
	}
	out, err := filterDeleted(ctx, rec, deleted)
	if err != nil {
		return nil, nil, err
	}
	return out, deleted, nil
}

func (t *Table) readDeletion(ctx context.Context, f Fragment) ([]uint32, error) {
	k := t.key(DeletionKey(f.File, f.Deletion.ID))
	b, err := t.store.Get(ctx, k)
	if err != nil {
		return nil, err
	}
	v, err := decodeDeletion(k, b)
	if err != nil {
		return nil, err
	}
	if uint64(len(v)) != f.Deletion.Rows || (len(v) > 0 && uint64(v[len(v)-1]) >= f.Rows) {
		return nil, objErr(k, ErrCorruptObject, "deletion vector does not fit its fragment")
	}
	return v, nil
}

// readKeys reads the key column of a data file (ignoring deletions).
func (t *Table) readKeys(ctx context.Context, schema *arrow.Schema, keyCol string, f Fragment) ([][]byte, error) {
	k := t.key(f.File.DataKey())
	data, err := t.store.Get(ctx, k)
	if err != nil {
		return nil, err
	}
	idx := schema.FieldIndices(keyCol)[0]
	rec, err := decodeParquet(ctx, k, data, schema, []int{idx})
	if err != nil {
		return nil, err
	}
	defer rec.Release()
	return keyColumnBytes(rec.Column(0))
}

// livePositions returns the physical positions not in deleted, in order.
func livePositions(rows uint64, deleted []uint32) []uint32 {
	out := make([]uint32, 0, rows-uint64(len(deleted)))
	for p := uint32(0); uint64(p) < rows; p++ {
		if _, found := slices.BinarySearch(deleted, p); !found {
			out = append(out, p)
		}
	}
	return out
}
