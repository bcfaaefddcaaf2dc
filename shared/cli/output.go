package cli

import (
	"bytes"
	"encoding/base64"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// timeLayout renders timestamps: RFC 3339 in UTC, with as many fractional
// digits as needed (at most microseconds).
const timeLayout = "2006-01-02T15:04:05.999999Z07:00"

// cellJSON is the JSON value of row i of a column: strings, numbers, bools,
// base64 for binary, RFC 3339 strings for timestamps, null for nulls.
// Non-finite floats become the strings "NaN", "+Inf", "-Inf".
func cellJSON(col arrow.Array, i int) any {
	if col.IsNull(i) {
		return nil
	}
	switch a := col.(type) {
	case *array.String:
		return a.Value(i)
	case *array.Int64:
		return a.Value(i)
	case *array.Int32:
		return a.Value(i)
	case *array.Float64:
		f := a.Value(i)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return strconv.FormatFloat(f, 'g', -1, 64)
		}
		return f
	case *array.Boolean:
		return a.Value(i)
	case *array.Binary:
		return base64.StdEncoding.EncodeToString(a.Value(i))
	case *array.Timestamp:
		return time.UnixMicro(int64(a.Value(i))).UTC().Format(timeLayout)
	}
	return col.ValueStr(i)
}

// cellText is row i of a column as a table cell.
func cellText(col arrow.Array, i int) string {
	v := cellJSON(col, i)
	switch v := v.(type) {
	case nil:
		return "NULL"
	case string:
		// Keep one row on one line.
		return strings.NewReplacer("\n", `\n`, "\t", `\t`, "\r", `\r`).Replace(v)
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	return fmt.Sprint(v)
}

// rowPrinter prints record batches as an aligned table, JSON lines or CSV.
type rowPrinter struct {
	json  bool
	out   io.Writer
	tw    *tabwriter.Writer
	csv   *csv.Writer
	names []string
	rows  int
	limit int // 0: no limit
	// keep, if set, selects the rows printed; cols, if set, the columns
	// of the batch printed (in names' order).
	keep func(rec arrow.RecordBatch, i int) bool
	cols []int
}

// newRowPrinter prints in format "table", "json" or "csv".
func newRowPrinter(out io.Writer, format string, names []string, limit int) *rowPrinter {
	asJSON := format == "json"
	p := &rowPrinter{json: asJSON, out: out, names: names, limit: limit}
	if format == "csv" {
		p.csv = csv.NewWriter(out)
		_ = p.csv.Write(names)
		return p
	}
	if !asJSON {
		p.tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		upper := make([]string, len(names))
		for i, n := range names {
			upper[i] = strings.ToUpper(n)
		}
		fmt.Fprintln(p.tw, strings.Join(upper, "\t"))
	}
	return p
}

// full reports whether the row limit has been reached.
func (p *rowPrinter) full() bool { return p.limit > 0 && p.rows >= p.limit }

func (p *rowPrinter) print(rec arrow.RecordBatch) error {
	var line bytes.Buffer
	cols := p.cols
	if cols == nil {
		cols = make([]int, rec.NumCols())
		for c := range cols {
			cols[c] = c
		}
	}
	cells := make([]string, len(cols))
	for i := range int(rec.NumRows()) {
		if p.full() {
			return nil
		}
		if p.keep != nil && !p.keep(rec, i) {
			continue
		}
		p.rows++
		if p.csv != nil {
			for c, col := range cols {
				cells[c] = cellCSV(rec.Column(col), i)
			}
			if err := p.csv.Write(cells); err != nil {
				return err
			}
			continue
		}
		if p.json {
			line.Reset()
			line.WriteByte('{')
			for c, col := range cols {
				if c > 0 {
					line.WriteByte(',')
				}
				k, _ := json.Marshal(p.names[c])
				v, err := json.Marshal(cellJSON(rec.Column(col), i))
				if err != nil {
					return err
				}
				line.Write(k)
				line.WriteByte(':')
				line.Write(v)
			}
			line.WriteString("}\n")
			if _, err := p.out.Write(line.Bytes()); err != nil {
				return err
			}
			continue
		}
		for c, col := range cols {
			cells[c] = cellText(rec.Column(col), i)
		}
		fmt.Fprintln(p.tw, strings.Join(cells, "\t"))
	}
	return nil
}

func (p *rowPrinter) flush() error {
	if p.csv != nil {
		p.csv.Flush()
		return p.csv.Error()
	}
	if p.tw != nil {
		return p.tw.Flush()
	}
	return nil
}

// cellCSV is row i of a column as a CSV field that upsert reads back: null
// is empty, timestamps RFC 3339, binary base64.
func cellCSV(col arrow.Array, i int) string {
	switch v := cellJSON(col, i).(type) {
	case nil:
		return ""
	case string:
		return v
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	default:
		return fmt.Sprint(v)
	}
}

// printJSON writes v as one line of JSON.
// printJSONLines prints f of each item as one JSON line (-o json of the
// listing commands).
func printJSONLines[T any](out io.Writer, items []T, f func(T) any) error {
	for _, it := range items {
		if err := printJSON(out, f(it)); err != nil {
			return err
		}
	}
	return nil
}

func printJSON(out io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "%s\n", b)
	return err
}

// printKV prints label/value pairs aligned.
func printKV(out io.Writer, pairs [][2]string) error {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	for _, p := range pairs {
		fmt.Fprintf(tw, "%s:\t%s\n", p[0], p[1])
	}
	return tw.Flush()
}

// HumanBytes renders a byte count like "1.5 MiB (1572864 bytes)".
func HumanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB (%d bytes)", float64(n)/float64(div), "KMGTPE"[exp], n)
}

// printAligned prints a header and rows as aligned columns.
func printAligned(out io.Writer, head []string, rows [][]string) error {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}
