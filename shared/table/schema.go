package table

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
)

// Column types tablekeep tables support, by their code in the manifest.
// The set is deliberately small: every type has one Parquet mapping and one
// JSON/CSV rendering in the CLI.
const (
	typeUtf8      byte = 1
	typeInt64     byte = 2
	typeInt32     byte = 3
	typeFloat64   byte = 4
	typeBool      byte = 5
	typeBinary    byte = 6
	typeTimestamp byte = 7 // microseconds, UTC
)

func typeCode(dt arrow.DataType) (byte, bool) {
	switch t := dt.(type) {
	case *arrow.StringType:
		return typeUtf8, true
	case *arrow.Int64Type:
		return typeInt64, true
	case *arrow.Int32Type:
		return typeInt32, true
	case *arrow.Float64Type:
		return typeFloat64, true
	case *arrow.BooleanType:
		return typeBool, true
	case *arrow.BinaryType:
		return typeBinary, true
	case *arrow.TimestampType:
		if t.Unit == arrow.Microsecond && (t.TimeZone == "UTC" || t.TimeZone == "") {
			return typeTimestamp, true
		}
	}
	return 0, false
}

func typeFromCode(c byte) (arrow.DataType, bool) {
	switch c {
	case typeUtf8:
		return arrow.BinaryTypes.String, true
	case typeInt64:
		return arrow.PrimitiveTypes.Int64, true
	case typeInt32:
		return arrow.PrimitiveTypes.Int32, true
	case typeFloat64:
		return arrow.PrimitiveTypes.Float64, true
	case typeBool:
		return arrow.FixedWidthTypes.Boolean, true
	case typeBinary:
		return arrow.BinaryTypes.Binary, true
	case typeTimestamp:
		return &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, true
	}
	return nil, false
}

// SupportedTypes names the Arrow types a column may have.
const SupportedTypes = "utf8, int64, int32, float64, bool, binary, timestamp[us, UTC]"

// validateSchema checks a schema for Create: supported types, unique
// non-empty names, and a key column (if any) that is a non-nullable utf8 or
// int64 column.
func validateSchema(s *arrow.Schema, keyColumn string) error {
	if s == nil || s.NumFields() == 0 {
		return fmt.Errorf("%w: a table needs at least one column", ErrInvalidSchema)
	}
	seen := map[string]bool{}
	for _, f := range s.Fields() {
		if f.Name == "" || len(f.Name) > 255 {
			return fmt.Errorf("%w: column name %q must be 1-255 bytes", ErrInvalidSchema, f.Name)
		}
		if seen[f.Name] {
			return fmt.Errorf("%w: duplicate column %q", ErrInvalidSchema, f.Name)
		}
		seen[f.Name] = true
		if _, ok := typeCode(f.Type); !ok {
			return fmt.Errorf("%w: column %q has type %s; supported: %s", ErrInvalidSchema, f.Name, f.Type, SupportedTypes)
		}
	}
	if keyColumn == "" {
		return nil
	}
	idx := s.FieldIndices(keyColumn)
	if len(idx) != 1 {
		return fmt.Errorf("%w: key column %q is not in the schema", ErrInvalidSchema, keyColumn)
	}
	kf := s.Field(idx[0])
	if kf.Nullable {
		return fmt.Errorf("%w: key column %q must not be nullable", ErrInvalidSchema, keyColumn)
	}
	if kf.Type.ID() != arrow.STRING && kf.Type.ID() != arrow.INT64 {
		return fmt.Errorf("%w: key column %q must be utf8 or int64, not %s", ErrInvalidSchema, keyColumn, kf.Type)
	}
	return nil
}

// normalizeSchema drops metadata and canonicalises types so that two schemas
// that mean the same thing compare equal.
func normalizeSchema(s *arrow.Schema) *arrow.Schema {
	fields := make([]arrow.Field, s.NumFields())
	for i, f := range s.Fields() {
		code, _ := typeCode(f.Type)
		dt, _ := typeFromCode(code)
		fields[i] = arrow.Field{Name: f.Name, Type: dt, Nullable: f.Nullable}
	}
	return arrow.NewSchema(fields, nil)
}

// schemasEqual compares names, types and nullability, ignoring metadata.
func schemasEqual(a, b *arrow.Schema) bool {
	if a.NumFields() != b.NumFields() {
		return false
	}
	for i := range a.NumFields() {
		fa, fb := a.Field(i), b.Field(i)
		ca, _ := typeCode(fa.Type)
		cb, _ := typeCode(fb.Type)
		if fa.Name != fb.Name || ca != cb || ca == 0 || fa.Nullable != fb.Nullable {
			return false
		}
	}
	return true
}

func appendSchema(buf []byte, s *arrow.Schema) []byte {
	buf = binary.AppendUvarint(buf, uint64(s.NumFields()))
	for _, f := range s.Fields() {
		code, _ := typeCode(f.Type)
		flags := byte(0)
		if f.Nullable {
			flags = 1
		}
		buf = appendBytes(buf, []byte(f.Name))
		buf = append(buf, code, flags)
	}
	return buf
}

func readSchema(r *reader) *arrow.Schema {
	n := r.uvarint()
	if r.err != nil || n > 10000 {
		r.fail("schema field count")
		return nil
	}
	fields := make([]arrow.Field, 0, n)
	for range n {
		name := string(r.bytes())
		code := r.byte()
		flags := r.byte()
		if r.err != nil {
			return nil
		}
		dt, ok := typeFromCode(code)
		if !ok {
			r.fail(fmt.Sprintf("unknown column type code %d", code))
			return nil
		}
		fields = append(fields, arrow.Field{Name: name, Type: dt, Nullable: flags&1 == 1})
	}
	return arrow.NewSchema(fields, nil)
}

// KeyOf encodes a Go key value as the order-preserving bytes the manifest's
// key bounds use: utf8 keys are their bytes; int64 keys are big-endian with
// the sign bit flipped so that bytes.Compare orders them numerically.
func KeyOf(keyType arrow.DataType, v any) ([]byte, error) {
	switch keyType.ID() {
	case arrow.STRING:
		if s, ok := v.(string); ok {
			return []byte(s), nil
		}
	case arrow.INT64:
		switch n := v.(type) {
		case int64:
			return int64Key(n), nil
		case int:
			return int64Key(int64(n)), nil
		case float64: // JSON numbers
			if n == math.Trunc(n) && math.Abs(n) < 1<<53 {
				return int64Key(int64(n)), nil
			}
		}
	}
	return nil, fmt.Errorf("%w: key %v (%T) does not fit key type %s", ErrInvalidKey, v, v, keyType)
}

func int64Key(n int64) []byte {
	return binary.BigEndian.AppendUint64(nil, uint64(n)^(1<<63))
}

// keyColumnBytes returns the order-preserving key bytes of every row of a key
// column array. Nulls are an error: a key must identify its row.
func keyColumnBytes(col arrow.Array) ([][]byte, error) {
	out := make([][]byte, col.Len())
	switch a := col.(type) {
	case interface{ Value(int) string }:
		for i := range out {
			if a.(arrow.Array).IsNull(i) {
				return nil, fmt.Errorf("%w: null key at row %d", ErrInvalidKey, i)
			}
			out[i] = []byte(a.Value(i))
		}
	case interface{ Value(int) int64 }:
		for i := range out {
			if a.(arrow.Array).IsNull(i) {
				return nil, fmt.Errorf("%w: null key at row %d", ErrInvalidKey, i)
			}
			out[i] = int64Key(a.Value(i))
		}
	default:
		return nil, fmt.Errorf("%w: key column type %s", ErrInvalidKey, col.DataType())
	}
	return out, nil
}

// keyBounds returns the smallest and largest key.
func keyBounds(keys [][]byte) (lo, hi []byte) {
	if len(keys) == 0 {
		return nil, nil
	}
	lo, hi = keys[0], keys[0]
	for _, k := range keys[1:] {
		if string(k) < string(lo) {
			lo = k
		}
		if string(k) > string(hi) {
			hi = k
		}
	}
	return slices.Clone(lo), slices.Clone(hi)
}
