package table

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Inline writes (format 3, docs/format.md 4.6): a commit whose new rows and
// deletions are small keeps them in the next manifest instead of a data file
// and a deletion vector, so a one-row upsert writes one object.

// DefaultInlineMaxBytes is the inline bound a format-3 table is created
// with: the encoded inline rows plus the inline deletion positions of the
// latest manifest never exceed it. 2 KiB keeps the registry workload's
// latest manifest (schema, a few fragments, the inline rows) under 4 KB.
const DefaultInlineMaxBytes = 2048

// MaxInlineMaxBytes bounds the stored inline bound (a manifest is read
// whole on every open).
const MaxInlineMaxBytes = 1 << 20

// InlineRow is one row kept in the manifest. (Version, Seq) identifies it
// for ever: the version that wrote it and its position among that
// commit's rows. A row is live in exactly one place: the manifest's inline
// rows, or the fragment a flush moved it to.
type InlineRow struct {
	Version uint64
	Seq     uint64
	Data    []byte // the encoded column values (docs/format.md 4.6)
	Key     []byte // the key column's order-preserving bytes (nil without a key column); not stored
}

type inlineID struct{ version, seq uint64 }

func (r InlineRow) id() inlineID { return inlineID{r.Version, r.Seq} }

// errInlineFull: the commit's result would exceed the inline bound; it is
// retried with its rows in a data file.
var errInlineFull = errors.New("inline bound exceeded")

// inlineBytes is what the bound counts: the encoded inline rows and the
// inline deletion positions of every fragment that has some, as stored.
func inlineBytes(m *Manifest) uint64 {
	var n uint64
	for _, r := range m.Inline {
		n += uint64(len(appendInlineRow(nil, r)))
	}
	for _, f := range m.Fragments {
		if len(f.Inline) > 0 {
			n += uint64(len(appendPositions(nil, f.Inline)))
		}
	}
	return n
}

// InlineBytes is what the inline bound counts (InlineMaxBytes).
func (m *Manifest) InlineBytes() uint64 { return inlineBytes(m) }

// appendPositions writes sorted distinct positions: a uvarint count, then
// the first position and the deltas as uvarints (a deletion vector's body).
func appendPositions(buf []byte, p []uint32) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(p)))
	prev := uint64(0)
	for i, x := range p {
		d := uint64(x)
		if i > 0 {
			d = uint64(x) - prev
		}
		buf = binary.AppendUvarint(buf, d)
		prev = uint64(x)
	}
	return buf
}

func readPositions(r *reader, rows uint64) []uint32 {
	n := r.uvarint()
	if r.err == nil && n > uint64(len(r.b)) {
		r.fail("inline deletion count beyond object size")
		return nil
	}
	var out []uint32
	prev := uint64(0)
	for i := uint64(0); r.err == nil && i < n; i++ {
		d := r.uvarint()
		if i > 0 && d == 0 {
			r.fail("inline deletions not strictly increasing")
		}
		if d > math.MaxUint32-prev {
			r.fail("inline deletion position overflow")
		}
		prev += d
		if r.err == nil && prev >= rows {
			r.fail("inline deletion beyond the fragment's rows")
		}
		out = append(out, uint32(prev))
	}
	return out
}

func appendInlineRow(buf []byte, r InlineRow) []byte {
	buf = binary.AppendUvarint(buf, r.Version)
	buf = binary.AppendUvarint(buf, r.Seq)
	return appendBytes(buf, r.Data)
}

// encodeRowValues encodes row i of rec (in the table's schema): a uvarint
// column count, then per column a presence byte (0 null, 1 value) and the
// value: utf8 and binary as uvarint length + bytes, int64, int32 and
// timestamp (microseconds) as zigzag varints, float64 as 8 bytes
// little-endian IEEE 754, bool as one byte 0/1.
func encodeRowValues(buf []byte, rec arrow.RecordBatch, i int) ([]byte, error) {
	buf = binary.AppendUvarint(buf, uint64(rec.NumCols()))
	for c := range int(rec.NumCols()) {
		col := rec.Column(c)
		if col.IsNull(i) {
			buf = append(buf, 0)
			continue
		}
		buf = append(buf, 1)
		switch a := col.(type) {
		case *array.String:
			buf = appendBytes(buf, []byte(a.Value(i)))
		case *array.Binary:
			buf = appendBytes(buf, a.Value(i))
		case *array.Int64:
			buf = binary.AppendVarint(buf, a.Value(i))
		case *array.Int32:
			buf = binary.AppendVarint(buf, int64(a.Value(i)))
		case *array.Timestamp:
			buf = binary.AppendVarint(buf, int64(a.Value(i)))
		case *array.Float64:
			buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(a.Value(i)))
		case *array.Boolean:
			if a.Value(i) {
				buf = append(buf, 1)
			} else {
				buf = append(buf, 0)
			}
		default:
			return nil, fmt.Errorf("%w: inline column type %s", ErrSchemaMismatch, col.DataType())
		}
	}
	return buf, nil
}

// decodeRowValues parses one row's values against schema: nil for a null
// (and for a column added after the row was written).
func decodeRowValues(schema *arrow.Schema, data []byte) ([]any, error) {
	r := &reader{b: data}
	n := r.uvarint()
	if r.err == nil && (n == 0 || n > uint64(schema.NumFields())) {
		r.fail(fmt.Sprintf("inline row has %d columns, table has %d", n, schema.NumFields()))
	}
	vals := make([]any, schema.NumFields())
	for c := 0; r.err == nil && uint64(c) < n; c++ {
		switch r.byte() {
		case 0:
			if !schema.Field(c).Nullable {
				r.fail(fmt.Sprintf("null in non-nullable column %q", schema.Field(c).Name))
			}
			continue
		case 1:
		default:
			r.fail("bad inline presence byte")
			continue
		}
		code, _ := typeCode(schema.Field(c).Type)
		switch code {
		case typeUtf8:
			vals[c] = string(r.bytes())
		case typeBinary:
			vals[c] = slices.Clone(r.bytes())
		case typeInt64, typeTimestamp:
			vals[c] = r.varint()
		case typeInt32:
			v := r.varint()
			if v < math.MinInt32 || v > math.MaxInt32 {
				r.fail("int32 out of range")
			}
			vals[c] = int32(v)
		case typeFloat64:
			if b := r.fixed(8); b != nil {
				vals[c] = math.Float64frombits(binary.LittleEndian.Uint64(b))
			}
		case typeBool:
			switch r.byte() {
			case 0:
				vals[c] = false
			case 1:
				vals[c] = true
			default:
				r.fail("bad bool")
			}
		default:
			r.fail("unsupported column type")
		}
	}
	r.done()
	for c := int(n); r.err == nil && c < schema.NumFields(); c++ {
		if !schema.Field(c).Nullable {
			r.fail(fmt.Sprintf("inline row lacks non-nullable column %q", schema.Field(c).Name))
		}
	}
	return vals, r.err
}

// inlineKey returns the key bytes of a decoded row.
func inlineKey(schema *arrow.Schema, keyCol string, vals []any) ([]byte, error) {
	if keyCol == "" {
		return nil, nil
	}
	switch v := vals[schema.FieldIndices(keyCol)[0]].(type) {
	case string:
		return []byte(v), nil
	case int64:
		return int64Key(v), nil
	}
	return nil, fmt.Errorf("%w: null inline key", ErrInvalidKey)
}

// inlineBatch builds the rows (all of schema's columns, or cols) as one
// record batch.
func inlineBatch(schema *arrow.Schema, rows []InlineRow, cols []int) (arrow.RecordBatch, error) {
	if cols == nil {
		cols = make([]int, schema.NumFields())
		for i := range cols {
			cols[i] = i
		}
	}
	fields := make([]arrow.Field, len(cols))
	builders := make([]array.Builder, len(cols))
	for i, c := range cols {
		fields[i] = schema.Field(c)
		builders[i] = array.NewBuilder(memory.DefaultAllocator, fields[i].Type)
		defer builders[i].Release()
	}
	for _, row := range rows {
		vals, err := decodeRowValues(schema, row.Data)
		if err != nil {
			return nil, err
		}
		for i, c := range cols {
			appendValue(builders[i], vals[c])
		}
	}
	arrs := make([]arrow.Array, len(cols))
	for i, b := range builders {
		arrs[i] = b.NewArray()
		defer arrs[i].Release()
	}
	return array.NewRecordBatch(arrow.NewSchema(fields, nil), arrs, int64(len(rows))), nil
}

func appendValue(b array.Builder, v any) {
	if v == nil {
		b.AppendNull()
		return
	}
	switch b := b.(type) {
	case *array.StringBuilder:
		b.Append(v.(string))
	case *array.BinaryBuilder:
		b.Append(v.([]byte))
	case *array.Int64Builder:
		b.Append(v.(int64))
	case *array.Int32Builder:
		b.Append(v.(int32))
	case *array.TimestampBuilder:
		b.Append(arrow.Timestamp(v.(int64)))
	case *array.Float64Builder:
		b.Append(v.(float64))
	case *array.BooleanBuilder:
		b.Append(v.(bool))
	}
}

// encodeInlineRows encodes every row of rec (already conformed to the
// table's schema).
func encodeInlineRows(rec arrow.RecordBatch) ([][]byte, uint64, error) {
	out := make([][]byte, rec.NumRows())
	var n uint64
	for i := range out {
		b, err := encodeRowValues(nil, rec, i)
		if err != nil {
			return nil, 0, err
		}
		out[i] = b
		n += uint64(len(b)) + 2*binary.MaxVarintLen64
	}
	return out, n, nil
}
