package cli

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// inputFormat picks the input format: --format if given, else by the
// file's extension, else JSON lines for stdin.
func inputFormat(format, file string) (string, error) {
	switch strings.ToLower(format) {
	case "jsonl", "ndjson", "json":
		return "jsonl", nil
	case "csv":
		return "csv", nil
	case "":
	default:
		return "", Usagef("--format must be jsonl or csv, not %q", format)
	}
	if file == "" || file == "-" {
		return "jsonl", nil
	}
	switch strings.ToLower(filepath.Ext(file)) {
	case ".jsonl", ".ndjson", ".json":
		return "jsonl", nil
	case ".csv":
		return "csv", nil
	}
	return "", Usagef("cannot tell the format of %q from its extension: pass --format jsonl or --format csv", file)
}

// rowReader converts input rows to an Arrow batch of a table's schema.
type rowReader struct {
	schema   *arrow.Schema
	cols     map[string]int
	keyIdx   int            // -1 without a key column
	distinct bool           // reject repeated keys (upserts)
	keyLines map[string]int // key -> first line, when distinct
	b        *array.RecordBuilder
	vals     []any
}

func newRowReader(schema *arrow.Schema, keyColumn string, distinct bool) *rowReader {
	r := &rowReader{
		schema: schema, cols: map[string]int{}, keyIdx: -1, distinct: distinct,
		keyLines: map[string]int{},
		b:        array.NewRecordBuilder(memory.DefaultAllocator, schema),
		vals:     make([]any, schema.NumFields()),
	}
	for i, f := range schema.Fields() {
		r.cols[f.Name] = i
		if f.Name == keyColumn {
			r.keyIdx = i
		}
	}
	return r
}

func (r *rowReader) release() { r.b.Release() }

func (r *rowReader) columnNames() string {
	names := make([]string, r.schema.NumFields())
	for i, f := range r.schema.Fields() {
		names[i] = f.Name
	}
	return strings.Join(names, ", ")
}

func (r *rowReader) unknownColumn(line int, name string) error {
	return fmt.Errorf("line %d: unknown column %q (table columns: %s)", line, name, r.columnNames())
}

// begin starts a row: every column absent.
func (r *rowReader) begin() {
	for i := range r.vals {
		r.vals[i] = absent{}
	}
}

type absent struct{}

// finish checks the row and appends it to the batch.
func (r *rowReader) finish(line int) error {
	for i, f := range r.schema.Fields() {
		if _, ok := r.vals[i].(absent); ok {
			r.vals[i] = nil
			if !f.Nullable {
				return fmt.Errorf("line %d: missing value for required column %q", line, f.Name)
			}
		}
		if r.vals[i] == nil && !f.Nullable {
			return fmt.Errorf("line %d: column %q is not nullable but is null", line, f.Name)
		}
	}
	if r.keyIdx >= 0 && r.distinct {
		k := fmt.Sprint(r.vals[r.keyIdx])
		if first, dup := r.keyLines[k]; dup {
			return fmt.Errorf("line %d: key %q repeats line %d (an upsert's keys must be distinct)", line, k, first)
		}
		r.keyLines[k] = line
	}
	for i, v := range r.vals {
		fb := r.b.Field(i)
		if v == nil {
			fb.AppendNull()
			continue
		}
		switch b := fb.(type) {
		case *array.StringBuilder:
			b.Append(v.(string))
		case *array.Int64Builder:
			b.Append(v.(int64))
		case *array.Int32Builder:
			b.Append(v.(int32))
		case *array.Float64Builder:
			b.Append(v.(float64))
		case *array.BooleanBuilder:
			b.Append(v.(bool))
		case *array.BinaryBuilder:
			b.Append(v.([]byte))
		case *array.TimestampBuilder:
			b.Append(v.(arrow.Timestamp))
		default:
			return fmt.Errorf("column %q: unsupported type %s", r.schema.Field(i).Name, r.schema.Field(i).Type)
		}
	}
	return nil
}

// parseTimestamp accepts RFC 3339 (any offset; stored as UTC microseconds),
// a date and time without a zone (read as UTC), a date (midnight UTC), or
// an integer count of microseconds since the Unix epoch.
func parseTimestamp(s string) (arrow.Timestamp, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return arrow.Timestamp(t.UnixMicro()), nil
	}
	// Without a zone: UTC (as stored).
	for _, layout := range []string{"2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
			return arrow.Timestamp(t.UnixMicro()), nil
		}
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return arrow.Timestamp(n), nil
	}
	return 0, fmt.Errorf("want an RFC 3339 timestamp like 2026-01-02T15:04:05Z, got %q", s)
}

// fromText converts a CSV field (non-empty, or empty in a utf8/binary column).
func fromText(dt arrow.DataType, s string) (any, error) {
	switch dt.ID() {
	case arrow.STRING:
		return s, nil
	case arrow.INT64:
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("want an int64, got %q", s)
		}
		return n, nil
	case arrow.INT32:
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 32)
		if err != nil {
			return nil, fmt.Errorf("want an int32, got %q", s)
		}
		return int32(n), nil
	case arrow.FLOAT64:
		f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil {
			return nil, fmt.Errorf("want a float64, got %q", s)
		}
		return f, nil
	case arrow.BOOL:
		b, err := strconv.ParseBool(strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("want true or false, got %q", s)
		}
		return b, nil
	case arrow.BINARY:
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, fmt.Errorf("want base64, got %q", s)
		}
		return b, nil
	case arrow.TIMESTAMP:
		return parseTimestamp(strings.TrimSpace(s))
	}
	return nil, fmt.Errorf("unsupported type %s", dt)
}

// fromJSON converts one JSON value.
func fromJSON(dt arrow.DataType, raw json.RawMessage) (any, error) {
	raw = bytes.TrimSpace(raw)
	if string(raw) == "null" {
		return nil, nil
	}
	var s string
	isString := len(raw) > 0 && raw[0] == '"'
	if isString {
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
	}
	isNumber := len(raw) > 0 && (raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9'))
	switch dt.ID() {
	case arrow.STRING:
		if isString {
			return s, nil
		}
		return nil, fmt.Errorf("want a string, got %s", raw)
	case arrow.INT64, arrow.INT32:
		bits := 64
		if dt.ID() == arrow.INT32 {
			bits = 32
		}
		if !isNumber {
			return nil, fmt.Errorf("want an int%d, got %s", bits, raw)
		}
		n, err := strconv.ParseInt(string(raw), 10, bits)
		if err != nil {
			// Accept integral values written as 3.0 or 1e3.
			f, ferr := strconv.ParseFloat(string(raw), 64)
			if ferr != nil || f != math.Trunc(f) || math.Abs(f) >= 1<<53 {
				return nil, fmt.Errorf("want an int%d, got %s", bits, raw)
			}
			n = int64(f)
			if bits == 32 && (n < math.MinInt32 || n > math.MaxInt32) {
				return nil, fmt.Errorf("want an int32, got %s", raw)
			}
		}
		if bits == 32 {
			return int32(n), nil
		}
		return n, nil
	case arrow.FLOAT64:
		if !isNumber {
			return nil, fmt.Errorf("want a number, got %s", raw)
		}
		f, err := strconv.ParseFloat(string(raw), 64)
		if err != nil {
			return nil, fmt.Errorf("want a number, got %s", raw)
		}
		return f, nil
	case arrow.BOOL:
		switch string(raw) {
		case "true":
			return true, nil
		case "false":
			return false, nil
		}
		return nil, fmt.Errorf("want true or false, got %s", raw)
	case arrow.BINARY:
		if !isString {
			return nil, fmt.Errorf("want a base64 string, got %s", raw)
		}
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, fmt.Errorf("want a base64 string, got %s", raw)
		}
		return b, nil
	case arrow.TIMESTAMP:
		if isString {
			return parseTimestamp(s)
		}
		if isNumber {
			n, err := strconv.ParseInt(string(raw), 10, 64)
			if err == nil {
				return arrow.Timestamp(n), nil
			}
		}
		return nil, fmt.Errorf("want an RFC 3339 timestamp string, got %s", raw)
	}
	return nil, fmt.Errorf("unsupported type %s", dt)
}

// readJSON reads a JSON array of objects (a .json file written by other
// tools) or, if the input does not start with '[', JSON lines.
func (r *rowReader) readJSON(in io.Reader) error {
	br := bufio.NewReader(in)
	for {
		b, err := br.Peek(1)
		if err != nil {
			return r.readJSONL(br)
		}
		if b[0] == ' ' || b[0] == '\t' || b[0] == '\r' || b[0] == '\n' {
			_, _ = br.ReadByte()
			continue
		}
		if b[0] != '[' {
			return r.readJSONL(br)
		}
		break
	}
	dec := json.NewDecoder(br)
	if _, err := dec.Token(); err != nil {
		return fmt.Errorf("invalid JSON array: %v", err)
	}
	for i := 1; dec.More(); i++ {
		var obj map[string]json.RawMessage
		if err := dec.Decode(&obj); err != nil || obj == nil {
			return fmt.Errorf("array element %d: not a JSON object", i)
		}
		if err := r.addObject(fmt.Sprintf("array element %d", i), i, obj); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil {
		return fmt.Errorf("invalid JSON array: %v", err)
	}
	return nil
}

// addObject adds one JSON object; where names it in errors.
func (r *rowReader) addObject(where string, line int, obj map[string]json.RawMessage) error {
	r.begin()
	for name, raw := range obj {
		i, ok := r.cols[name]
		if !ok {
			return r.unknownColumn(line, name)
		}
		v, err := fromJSON(r.schema.Field(i).Type, raw)
		if err != nil {
			return fmt.Errorf("%s: column %q: %v", where, name, err)
		}
		r.vals[i] = v
	}
	return r.finish(line)
}

func (r *rowReader) readJSONL(in io.Reader) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 256<<20)
	line := 0
	for sc.Scan() {
		line++
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 {
			continue
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(text, &obj); err != nil || obj == nil {
			msg := "not a JSON object"
			var se *json.SyntaxError
			if errors.As(err, &se) {
				msg = "invalid JSON: " + se.Error()
			}
			return fmt.Errorf("line %d: %s", line, msg)
		}
		r.begin()
		for name, raw := range obj {
			i, ok := r.cols[name]
			if !ok {
				return r.unknownColumn(line, name)
			}
			v, err := fromJSON(r.schema.Field(i).Type, raw)
			if err != nil {
				return fmt.Errorf("line %d: column %q: %v", line, name, err)
			}
			r.vals[i] = v
		}
		if err := r.finish(line); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("line %d: %w", line+1, err)
	}
	return nil
}

func (r *rowReader) readCSV(in io.Reader) error {
	cr := csv.NewReader(in)
	cr.ReuseRecord = true
	header, err := cr.Read()
	if err == io.EOF {
		return nil
	}
	if err != nil {
		return csvErr(err)
	}
	idx := make([]int, len(header))
	seen := map[string]bool{}
	for j, name := range header {
		name = strings.TrimSpace(strings.TrimPrefix(name, "\ufeff"))
		i, ok := r.cols[name]
		if !ok {
			return r.unknownColumn(1, name)
		}
		if seen[name] {
			return fmt.Errorf("line 1: column %q appears twice in the header", name)
		}
		seen[name] = true
		idx[j] = i
	}
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return csvErr(err)
		}
		line, _ := cr.FieldPos(0)
		r.begin()
		for j, text := range rec {
			f := r.schema.Field(idx[j])
			if text == "" {
				switch {
				case f.Nullable:
					r.vals[idx[j]] = nil
					continue
				case f.Type.ID() != arrow.STRING && f.Type.ID() != arrow.BINARY:
					return fmt.Errorf("line %d: column %q is not nullable but is empty", line, f.Name)
				}
			}
			v, err := fromText(f.Type, text)
			if err != nil {
				return fmt.Errorf("line %d: column %q: %v", line, f.Name, err)
			}
			r.vals[idx[j]] = v
		}
		if err := r.finish(line); err != nil {
			return err
		}
	}
}

func csvErr(err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return fmt.Errorf("line %d: %v", pe.Line, pe.Err)
	}
	return err
}

// readBatch reads all of in (format "jsonl" or "csv") into one batch of the
// schema. The caller releases it.
func readBatch(in io.Reader, format string, schema *arrow.Schema, keyColumn string, distinct bool) (arrow.RecordBatch, error) {
	r := newRowReader(schema, keyColumn, distinct)
	defer r.release()
	var err error
	if format == "csv" {
		err = r.readCSV(in)
	} else {
		err = r.readJSON(in)
	}
	if err != nil {
		return nil, err
	}
	return r.b.NewRecordBatch(), nil
}
