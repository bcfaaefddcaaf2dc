package table

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

const deletionMagic = "TKD1"

// encodeDeletion writes sorted, distinct row positions as delta uvarints.
func encodeDeletion(positions []uint32) []byte {
	buf := append([]byte(nil), deletionMagic...)
	buf = binary.AppendUvarint(buf, uint64(len(positions)))
	prev := uint64(0)
	for i, p := range positions {
		d := uint64(p)
		if i > 0 {
			d = uint64(p) - prev
		}
		buf = binary.AppendUvarint(buf, d)
		prev = uint64(p)
	}
	return seal(buf)
}

func decodeDeletion(key string, b []byte) ([]uint32, error) {
	body, ok := unseal(b)
	if !ok || len(body) < len(deletionMagic) || string(body[:len(deletionMagic)]) != deletionMagic {
		return nil, objErr(key, ErrCorruptObject, "bad deletion vector (magic or checksum)")
	}
	r := &reader{b: body[len(deletionMagic):]}
	n := r.uvarint()
	if r.err == nil && n > uint64(len(r.b)) {
		r.fail("count beyond object size")
		n = 0 // no allocation for a forged count (found by FuzzDeletionDecode: out of memory)
	}
	out := make([]uint32, 0, n)
	prev := uint64(0)
	for i := uint64(0); r.err == nil && i < n; i++ {
		d := r.uvarint()
		if i > 0 && d == 0 {
			r.fail("positions not strictly increasing")
		}
		// Checked before adding: a huge delta would wrap prev around to a
		// smaller position (found by FuzzDeletionDecode).
		if d > 1<<32-1-prev {
			r.fail("position overflow")
		}
		prev += d
		out = append(out, uint32(prev))
	}
	r.done()
	if r.err != nil {
		return nil, objErr(key, ErrCorruptObject, r.err.Error())
	}
	return out, nil
}

// unionPositions merges two sorted distinct position lists.
func unionPositions(a, b []uint32) []uint32 {
	out := make([]uint32, 0, len(a)+len(b))
	out = append(out, a...)
	out = append(out, b...)
	slices.Sort(out)
	return slices.Compact(out)
}

// writerProps: zstd, one row group per fragment, statistics on.
func writerProps() *parquet.WriterProperties {
	return parquet.NewWriterProperties(
		parquet.WithCompression(compress.Codecs.Zstd),
		parquet.WithStats(true),
		parquet.WithMaxRowGroupLength(1<<30),
	)
}

// encodeParquet writes one record batch as a Parquet file.
func encodeParquet(rec arrow.RecordBatch) ([]byte, error) {
	var buf bytes.Buffer
	w, err := pqarrow.NewFileWriter(rec.Schema(), &buf, writerProps(), pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		return nil, err
	}
	if err := w.Write(rec); err != nil {
		w.Close()
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// decodeParquet reads the given columns (nil: all) of a Parquet data file
// into one record batch with the table's schema (projected). The file may
// hold a prefix of the schema (it was written before AddColumns): the
// columns it lacks read as nulls.
func decodeParquet(ctx context.Context, key string, data []byte, schema *arrow.Schema, cols []int) (arrow.RecordBatch, error) {
	// A buffered stream reads column chunks from data in small pieces
	// rather than copying each chunk whole first: one copy of the file
	// fewer on the heap while it is decoded.
	props := parquet.NewReaderProperties(memory.DefaultAllocator)
	props.BufferedStreamEnabled = true
	rdr, err := pqarrow.ReadTable(ctx, bytes.NewReader(data), props,
		pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		return nil, objErr(key, ErrCorruptObject, err.Error())
	}
	defer rdr.Release()
	if cols == nil {
		cols = make([]int, schema.NumFields())
		for i := range cols {
			cols[i] = i
		}
	}
	have := int(rdr.NumCols())
	if have < 1 || have > schema.NumFields() {
		return nil, objErr(key, ErrCorruptObject, fmt.Sprintf("%d columns, table has %d", have, schema.NumFields()))
	}
	for i := range have {
		ff, tf := rdr.Schema().Field(i), schema.Field(i)
		fc, _ := typeCode(ff.Type)
		tc, _ := typeCode(tf.Type)
		sameType := fc == tc || (ff.Type.ID() == arrow.TIMESTAMP && tc == typeTimestamp)
		if ff.Name != tf.Name || !sameType {
			return nil, objErr(key, ErrCorruptObject, fmt.Sprintf("column %d is %q %s, table has %q %s", i, ff.Name, ff.Type, tf.Name, tf.Type))
		}
	}
	fields := make([]arrow.Field, len(cols))
	arrs := make([]arrow.Array, len(cols))
	for i, c := range cols {
		fields[i] = schema.Field(c)
		if c >= have { // added after the file was written
			arrs[i] = array.MakeArrayOfNull(memory.DefaultAllocator, fields[i].Type, int(rdr.NumRows()))
			continue
		}
		chunked := rdr.Column(c).Data()
		var a arrow.Array
		if len(chunked.Chunks()) == 1 {
			a = chunked.Chunk(0)
			a.Retain()
		} else {
			a, err = array.Concatenate(chunked.Chunks(), memory.DefaultAllocator)
			if err != nil {
				return nil, objErr(key, ErrCorruptObject, err.Error())
			}
		}
		if !arrow.TypeEqual(a.DataType(), fields[i].Type) {
			// Timestamps may come back without their zone; cast to the table type.
			casted, err := compute.CastArray(ctx, a, compute.SafeCastOptions(fields[i].Type))
			a.Release()
			if err != nil {
				return nil, objErr(key, ErrCorruptObject, fmt.Sprintf("column %q: %v", fields[i].Name, err))
			}
			a = casted
		}
		arrs[i] = a
	}
	rec := array.NewRecordBatch(arrow.NewSchema(fields, nil), arrs, rdr.NumRows())
	for _, a := range arrs {
		a.Release()
	}
	return rec, nil
}

// filterDeleted drops the rows at the given sorted positions.
func filterDeleted(ctx context.Context, rec arrow.RecordBatch, deleted []uint32) (arrow.RecordBatch, error) {
	if len(deleted) == 0 {
		rec.Retain()
		return rec, nil
	}
	b := array.NewBooleanBuilder(memory.DefaultAllocator)
	defer b.Release()
	n := int(rec.NumRows())
	b.Reserve(n)
	j := 0
	for i := range n {
		if j < len(deleted) && int(deleted[j]) == i {
			b.UnsafeAppend(false)
			j++
		} else {
			b.UnsafeAppend(true)
		}
	}
	mask := b.NewArray()
	defer mask.Release()
	return compute.FilterRecordBatch(ctx, rec, mask, compute.DefaultFilterOptions())
}
