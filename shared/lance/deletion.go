package lance

import (
	"bytes"
	"context"
	"fmt"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// readDeletion reads a fragment's deletion vector: an Arrow IPC file with
// one non-null UInt32 column row_id (.arrow, Lance writes it ZSTD
// compressed) or a portable Roaring bitmap (.bin). Offsets at or above
// physicalRows are refused as corrupt.
func (d *Dataset) readDeletion(ctx context.Context, f rawFragment) (*roaring.Bitmap, error) {
	key := d.root + Fragment{ID: f.id, Deletion: f.deletion}.DeletionKey()
	b, err := d.store.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	bm := roaring.New()
	switch f.deletion.Type {
	case 1:
		if _, err := bm.ReadFrom(bytes.NewReader(b)); err != nil {
			return nil, corrupt(key, "deletion bitmap: %v", err)
		}
	default:
		r, err := ipc.NewFileReader(bytes.NewReader(b), ipc.WithAllocator(memory.NewGoAllocator()))
		if err != nil {
			return nil, corrupt(key, "deletion file: %v", err)
		}
		defer r.Close()
		if s := r.Schema(); s.NumFields() != 1 || s.Field(0).Name != "row_id" || s.Field(0).Type.ID() != arrow.UINT32 {
			return nil, corrupt(key, "deletion file schema %v", r.Schema())
		}
		for i := 0; i < r.NumRecords(); i++ {
			rec, err := r.RecordBatch(i)
			if err != nil {
				return nil, corrupt(key, "deletion file batch %d: %v", i, err)
			}
			col, ok := rec.Column(0).(*array.Uint32)
			if !ok || col.NullN() > 0 {
				return nil, corrupt(key, "deletion file column")
			}
			bm.AddMany(col.Uint32Values())
		}
	}
	if !bm.IsEmpty() && uint64(bm.Maximum()) >= f.physicalRows {
		return nil, corrupt(key, "deleted offset %d in a fragment of %d rows", bm.Maximum(), f.physicalRows)
	}
	if bm.GetCardinality() != f.deletion.NumDeleted && f.deletion.NumDeleted != 0 {
		return nil, corrupt(key, "%d deleted offsets, the manifest says %d", bm.GetCardinality(), f.deletion.NumDeleted)
	}
	return bm, nil
}

// encodeDeletionBitmap serializes a deletion vector as Lance's bitmap
// deletion file (.bin: the portable Roaring format, which the Rust roaring
// crate's deserialize_from reads).
func encodeDeletionBitmap(bm *roaring.Bitmap) ([]byte, error) {
	var buf bytes.Buffer
	if _, err := bm.WriteTo(&buf); err != nil {
		return nil, fmt.Errorf("encode deletion bitmap: %w", err)
	}
	return buf.Bytes(), nil
}
