package cli

import (
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
)

// typeNames maps the type names a schema spec accepts to Arrow types.
var typeNames = map[string]arrow.DataType{
	"utf8": arrow.BinaryTypes.String, "string": arrow.BinaryTypes.String, "str": arrow.BinaryTypes.String,
	"int64": arrow.PrimitiveTypes.Int64, "int": arrow.PrimitiveTypes.Int64, "bigint": arrow.PrimitiveTypes.Int64,
	"int32":   arrow.PrimitiveTypes.Int32,
	"float64": arrow.PrimitiveTypes.Float64, "float": arrow.PrimitiveTypes.Float64, "double": arrow.PrimitiveTypes.Float64,
	"bool": arrow.FixedWidthTypes.Boolean, "boolean": arrow.FixedWidthTypes.Boolean,
	"binary": arrow.BinaryTypes.Binary, "bytes": arrow.BinaryTypes.Binary,
	"timestamp": &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"},
}

// specTypes is the list shown in errors.
const specTypes = "utf8 (string), int64 (int), int32, float64 (float, double), bool, binary (bytes), timestamp"

// ParseSchemaSpec parses a compact schema: comma-separated name:type
// columns. A column is nullable with a "?" after its type ("note:utf8?") or
// a ":nullable" suffix ("note:utf8:nullable"); otherwise it is required.
func ParseSchemaSpec(spec string) (*arrow.Schema, error) {
	if strings.TrimSpace(spec) == "" {
		return nil, fmt.Errorf("empty schema spec (want e.g. 'name:utf8,uri:utf8,created_at:timestamp')")
	}
	var fields []arrow.Field
	seen := map[string]bool{}
	for i, part := range strings.Split(spec, ",") {
		part = strings.TrimSpace(part)
		bits := strings.Split(part, ":")
		for j := range bits {
			bits[j] = strings.TrimSpace(bits[j])
		}
		if len(bits) < 2 || len(bits) > 3 || bits[0] == "" || bits[1] == "" {
			return nil, fmt.Errorf("schema column %d %q: want name:type, name:type? or name:type:nullable", i+1, part)
		}
		name, typ := bits[0], strings.ToLower(bits[1])
		nullable := false
		if t, ok := strings.CutSuffix(typ, "?"); ok {
			typ, nullable = t, true
		}
		if len(bits) == 3 {
			if strings.ToLower(bits[2]) != "nullable" || nullable {
				return nil, fmt.Errorf("schema column %q: unknown modifier %q (only \"nullable\")", name, bits[2])
			}
			nullable = true
		}
		dt, ok := typeNames[typ]
		if !ok {
			return nil, fmt.Errorf("schema column %q: unknown type %q (supported: %s)", name, bits[1], specTypes)
		}
		if seen[name] {
			return nil, fmt.Errorf("schema: duplicate column %q", name)
		}
		seen[name] = true
		fields = append(fields, arrow.Field{Name: name, Type: dt, Nullable: nullable})
	}
	return arrow.NewSchema(fields, nil), nil
}

// typeName is a column type as the schema spec spells it.
func typeName(dt arrow.DataType) string {
	switch dt.ID() {
	case arrow.STRING:
		return "utf8"
	case arrow.TIMESTAMP:
		return "timestamp"
	case arrow.BOOL:
		return "bool"
	}
	return dt.String()
}

// FormatSchemaSpec renders a schema in the spec syntax ParseSchemaSpec reads.
func FormatSchemaSpec(s *arrow.Schema) string {
	parts := make([]string, s.NumFields())
	for i, f := range s.Fields() {
		parts[i] = f.Name + ":" + typeName(f.Type)
		if f.Nullable {
			parts[i] += "?"
		}
	}
	return strings.Join(parts, ",")
}
