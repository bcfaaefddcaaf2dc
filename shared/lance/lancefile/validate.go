package lancefile

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
)

// ErrUnreadable: a file that a reader of its file version would refuse (or
// panic on): Validate's verdict on a file about to be committed.
var ErrUnreadable = errors.New("lancefile: a Lance reader of the file's version would refuse it")

// Expect is what Validate checks a file against: the rows its fragment
// will say it has, the footer version and the schema bytes (the
// FileDescriptor's schema) of the files it was made from.
type Expect struct {
	Rows         uint64
	Major, Minor uint16
	Schema       []byte
}

// RuleError is a file that breaks a reader rule: which file, the rule
// broken, and its sentinel (ErrUnreadable from Validate; ErrUnsupported
// when Spliceable finds an input the splicer cannot follow).
type RuleError struct {
	Name, Reason string
	Err          error
}

func (e *RuleError) Error() string { return e.Name + ": " + e.Err.Error() + ": " + e.Reason }

func (e *RuleError) Unwrap() error { return e.Err }

func unreadable(name, format string, a ...any) error {
	return &RuleError{Name: name, Reason: fmt.Sprintf(format, a...), Err: ErrUnreadable}
}

// Validate checks a whole file's bytes against the reader rules of its
// file version (rust/lance-encoding decoder.rs, lance-file reader.rs),
// before it is committed; any violation is an error wrapping
// ErrUnreadable that names it:
//   - the container parses (footer, offset tables, every buffer inside the
//     data section), with the expected version, schema and rows, one
//     global buffer (the descriptor; at a multiple of 64 from 2.1 on);
//   - every page and column buffer starts at a multiple of 64, and no two
//     buffers overlap;
//   - the columns are those the schema maps to in that version (2.0: a
//     header column for each struct, an offsets column for each list, one
//     per leaf; 2.1+: one per leaf), each with the ColumnEncoding values
//     and no column-level buffers;
//   - 2.0: a struct's header column has exactly one page, a SimpleStruct
//     without buffers, of its level's rows; a list's offsets column only
//     List pages, whose num_items give its child's rows; a leaf column no
//     struct or list page; 2.1+: every page a PageLayout (mini-block,
//     all-null/constant or full-zip) with the buffers its layout reads,
//     its priority its first row;
//   - every column's pages hold exactly its level's rows (the top level:
//     the fragment's rows).
//
// Types it does not know (a logical type other than Arrow's scalars,
// strings, binary, fixed-size binary and lists, dictionaries, structs and
// lists; packed or blob fields) are refused too.
func Validate(name string, data []byte, want Expect) error {
	f, err := Parse(name, data)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUnreadable, err)
	}
	return validateFile(name, f, want)
}

// validateFile is Validate of a parsed file.
func validateFile(name string, f *File, want Expect) error {
	if f.Major != want.Major || f.Minor != want.Minor {
		return unreadable(name, "footer version %d.%d, want %d.%d", f.Major, f.Minor, want.Major, want.Minor)
	}
	if !bytes.Equal(f.Schema, want.Schema) {
		return unreadable(name, "the schema differs from its inputs'")
	}
	if f.Rows != want.Rows {
		return unreadable(name, "the descriptor says %d rows, the fragment %d", f.Rows, want.Rows)
	}
	v20 := f.Major == 0 && f.Minor == 3
	if f.NumGlobalBuffers != 1 {
		return unreadable(name, "%d global buffers, want the descriptor only", f.NumGlobalBuffers)
	}
	if !v20 && f.Global[0].Offset%Alignment != 0 {
		return unreadable(name, "the descriptor at %d, not a multiple of %d", f.Global[0].Offset, Alignment)
	}
	if err := checkBuffers(name, f); err != nil {
		return err
	}
	return checkColumns(name, f)
}

// checkColumns walks the schema over the columns: the columns the schema
// maps to in the file's version, each column's encodings and the rows of
// its level (Validate's last three rules).
func checkColumns(name string, f *File) error {
	fields, err := schemaTree(name, f.Schema)
	if err != nil {
		return err
	}
	c := &checker{name: name, f: f, v20: f.Major == 0 && f.Minor == 3}
	for _, fd := range fields {
		if err := c.field(fd, f.Rows); err != nil {
			return err
		}
	}
	if c.next != len(f.Columns) {
		return unreadable(name, "%d columns, the schema maps to %d", len(f.Columns), c.next)
	}
	return nil
}

// checkBuffers: every page and column buffer at a multiple of 64, none
// overlapping another or the descriptor.
func checkBuffers(name string, f *File) error {
	type span struct {
		at, n          uint64
		col, page, buf int // col -1: the descriptor
	}
	what := func(s span) string {
		if s.col < 0 {
			return "the descriptor"
		}
		return fmt.Sprintf("column %d page %d buffer %d", s.col, s.page, s.buf)
	}
	spans := []span{{at: f.Global[0].Offset, n: f.Global[0].Size, col: -1}}
	for i, c := range f.Columns {
		if len(c.Buffers) > 0 {
			return unreadable(name, "column %d has %d column-level buffers", i, len(c.Buffers))
		}
		for j, p := range c.Pages {
			for k, b := range p.Buffers {
				if b.Offset%Alignment != 0 {
					return unreadable(name, "column %d page %d buffer %d at %d, not a multiple of %d", i, j, k, b.Offset, Alignment)
				}
				spans = append(spans, span{b.Offset, b.Size, i, j, k})
			}
		}
	}
	slices.SortFunc(spans, func(a, b span) int { return cmp.Compare(a.at, b.at) })
	var end uint64 // the end of the nonempty buffers so far
	var last span
	for _, sp := range spans {
		if sp.n == 0 {
			continue
		}
		if sp.at < end {
			return unreadable(name, "%s overlaps %s", what(last), what(sp))
		}
		end, last = sp.at+sp.n, sp
	}
	return nil
}

// field is one schema field (lance.file.Field) with its children.
type field struct {
	name, typ string
	meta      []string // metadata keys
	children  []*field
}

// schemaTree parses a lance.file.Schema's fields (pre-order, each naming
// its parent's id) into the top-level fields.
func schemaTree(name string, schema []byte) ([]*field, error) {
	var top []*field
	byID := map[int32]*field{}
	err := walk(name, "Schema", schema, func(num protowire.Number, _ protowire.Type, v []byte, _ uint64) error {
		if num != 1 {
			return nil
		}
		fd := &field{}
		var id, parent int32 = 0, -1
		err := walk(name, "Field", v, func(n protowire.Number, _ protowire.Type, b []byte, u uint64) error {
			switch n {
			case 2:
				fd.name = string(b)
			case 3:
				id = int32(u)
			case 4:
				parent = int32(u)
			case 5:
				fd.typ = string(b)
			case 10:
				return walk(name, "Field.metadata", b, func(k protowire.Number, _ protowire.Type, kb []byte, _ uint64) error {
					if k == 1 {
						fd.meta = append(fd.meta, string(kb))
					}
					return nil
				})
			}
			return nil
		})
		if err != nil {
			return err
		}
		if _, dup := byID[id]; dup {
			return unreadable(name, "field id %d twice in the schema", id)
		}
		byID[id] = fd
		if parent == -1 {
			top = append(top, fd)
			return nil
		}
		p, ok := byID[parent]
		if !ok {
			return unreadable(name, "field %q names parent %d before it", fd.name, parent)
		}
		p.children = append(p.children, fd)
		return nil
	})
	if err != nil {
		if errors.Is(err, ErrCorrupt) {
			return nil, fmt.Errorf("%w: %w", ErrUnreadable, err)
		}
		return nil, err
	}
	return top, nil
}

// kind is how a field maps to columns.
type kind int

const (
	kindLeaf kind = iota
	kindStruct
	kindList
)

// fieldKind is the field's kind by its logical type; an error for a type
// the validator does not know.
func fieldKind(name string, fd *field) (kind, error) {
	for _, k := range fd.meta {
		if strings.Contains(k, "packed") || strings.Contains(k, "blob") {
			return 0, unreadable(name, "field %q: metadata %q (packed or blob fields are not validated)", fd.name, k)
		}
	}
	t := fd.typ
	switch {
	case t == "struct":
		return kindStruct, nil
	case t == "list" || t == "large_list" || t == "list.struct" || t == "large_list.struct":
		if len(fd.children) != 1 {
			return 0, unreadable(name, "list field %q with %d children", fd.name, len(fd.children))
		}
		return kindList, nil
	case strings.HasPrefix(t, "fixed_size_list:"):
		inner := strings.TrimPrefix(t, "fixed_size_list:")
		if i := strings.LastIndexByte(inner, ':'); i >= 0 {
			inner = inner[:i]
		}
		if !scalarType(inner) || len(fd.children) != 0 {
			return 0, unreadable(name, "field %q: fixed-size list of %q", fd.name, inner)
		}
		return kindLeaf, nil
	case scalarType(t) || strings.HasPrefix(t, "dict:") || strings.HasPrefix(t, "fixed_size_binary:"):
		if len(fd.children) != 0 {
			return 0, unreadable(name, "leaf field %q with children", fd.name)
		}
		return kindLeaf, nil
	}
	return 0, unreadable(name, "field %q: logical type %q", fd.name, t)
}

func scalarType(t string) bool {
	switch t {
	case "null", "bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
		"halffloat", "float", "double", "string", "large_string", "binary", "large_binary", "date32:day", "date64:ms":
		return true
	}
	for _, p := range []string{"decimal:", "time:", "timestamp:", "duration:"} {
		if strings.HasPrefix(t, p) {
			return true
		}
	}
	return false
}

// checker walks the schema over the columns in order.
type checker struct {
	name string
	f    *File
	v20  bool
	next int // the next column
}

func (c *checker) column(fd *field) (int, *Column, error) {
	if c.next >= len(c.f.Columns) {
		return 0, nil, unreadable(c.name, "field %q has no column (%d columns)", fd.name, len(c.f.Columns))
	}
	i := c.next
	c.next++
	col := &c.f.Columns[i]
	if err := valuesEncoded(c.name, i, col.Encoding); err != nil {
		return 0, nil, err
	}
	return i, col, nil
}

// field checks a field whose level holds rows rows (its parent's items).
func (c *checker) field(fd *field, rows uint64) error {
	k, err := fieldKind(c.name, fd)
	if err != nil {
		return err
	}
	if !c.v20 {
		switch k {
		case kindStruct:
			return c.fields(fd.children, rows)
		case kindList:
			return c.field(fd.children[0], rows) // rep levels: pages of rows
		}
		i, col, err := c.column(fd)
		if err != nil {
			return err
		}
		var at uint64
		for j, p := range col.Pages {
			if p.TypeURL != TypePageLayout {
				return unreadable(c.name, "column %d page %d: encoding %q in a %d.%d file", i, j, p.TypeURL, c.f.Major, c.f.Minor)
			}
			if p.Layout != LayoutMiniBlock && p.Layout != LayoutAllNull && p.Layout != LayoutFullZip {
				return unreadable(c.name, "column %d page %d: page layout %d", i, j, p.Layout)
			}
			// The reader takes a mini-block's chunk metadata and chunks
			// (buffers 0 and 1), a full-zip's data (buffer 0).
			need := 0
			switch p.Layout {
			case LayoutMiniBlock:
				need = 2
			case LayoutFullZip:
				need = 1
			}
			if len(p.Buffers) < need {
				return unreadable(c.name, "column %d page %d: %d buffers, its layout needs %d", i, j, len(p.Buffers), need)
			}
			if p.Priority != at {
				return unreadable(c.name, "column %d page %d: priority %d, its first row is %d", i, j, p.Priority, at)
			}
			if at, err = addRows(c.name, i, at, p.Length); err != nil {
				return err
			}
		}
		return c.rowsAre(i, fd, at, rows)
	}
	i, col, err := c.column(fd)
	if err != nil {
		return err
	}
	var total, items uint64
	for j, p := range col.Pages {
		enc, sub, err := arrayEncoding20(c.name, i, j, p)
		if err != nil {
			return err
		}
		switch {
		case k == kindStruct && (enc != arrayStruct20 || len(p.Buffers) != 0):
			return unreadable(c.name, "column %d (struct %q) page %d: not a SimpleStruct header page", i, fd.name, j)
		case k == kindList && enc != arrayList20:
			return unreadable(c.name, "column %d (list %q) page %d: not a List page", i, fd.name, j)
		case k == kindLeaf && (enc == arrayStruct20 || enc == arrayList20 || enc == arrayPackedStruct20):
			return unreadable(c.name, "column %d (%q) page %d: a struct or list page in a leaf column", i, fd.typ, j)
		}
		if k == kindList {
			n, err := listItems20(c.name, sub)
			if err != nil {
				return err
			}
			if items, err = addRows(c.name, i, items, n); err != nil {
				return err
			}
		}
		if total, err = addRows(c.name, i, total, p.Length); err != nil {
			return err
		}
	}
	if k == kindStruct && len(col.Pages) != 1 {
		return unreadable(c.name, "column %d (struct %q): %d pages; a 2.0 reader takes struct header columns of 1 page only", i, fd.name, len(col.Pages))
	}
	if err := c.rowsAre(i, fd, total, rows); err != nil {
		return err
	}
	switch k {
	case kindStruct:
		return c.fields(fd.children, rows)
	case kindList:
		return c.field(fd.children[0], items)
	}
	return nil
}

func (c *checker) fields(fds []*field, rows uint64) error {
	for _, ch := range fds {
		if err := c.field(ch, rows); err != nil {
			return err
		}
	}
	return nil
}

func (c *checker) rowsAre(i int, fd *field, got, want uint64) error {
	if got != want {
		return unreadable(c.name, "column %d (%q): pages hold %d rows, its level %d", i, fd.name, got, want)
	}
	return nil
}

func addRows(name string, col int, at, n uint64) (uint64, error) {
	if n > math.MaxUint64-at {
		return 0, unreadable(name, "column %d: page rows overflow", col)
	}
	return at + n, nil
}

// valuesEncoded: the column encoding is ColumnEncoding{values} (the 2.0
// reader's ensure_values_encoded; an absent encoding fails it).
func valuesEncoded(name string, col int, enc []byte) error {
	url, val, ok, err := directAny(name, enc)
	if err != nil || !ok || url != "/lance.encodings.ColumnEncoding" {
		return unreadable(name, "column %d: no ColumnEncoding", col)
	}
	values := false
	if err := walk(name, "ColumnEncoding", val, func(num protowire.Number, _ protowire.Type, _ []byte, _ uint64) error {
		values = values || num == 1
		if num != 1 {
			return unreadable(name, "column %d: column encoding field %d, not values", col, num)
		}
		return nil
	}); err != nil {
		return err
	}
	if !values {
		return unreadable(name, "column %d: ColumnEncoding without values", col)
	}
	return nil
}

// ArrayEncoding (encodings_v2_0.proto) oneof numbers the checks use.
const (
	arrayList20         = 4
	arrayStruct20       = 5
	arrayPackedStruct20 = 9
)

// arrayEncoding20 is a 2.0 page's ArrayEncoding oneof number and message.
func arrayEncoding20(name string, col, idx int, p Page) (protowire.Number, []byte, error) {
	if p.TypeURL != TypeArrayEncoding {
		return 0, nil, unreadable(name, "column %d page %d: encoding %q in a 2.0 file", col, idx, p.TypeURL)
	}
	_, val, _, err := directAny(name, p.Encoding)
	if err != nil {
		return 0, nil, fmt.Errorf("%w: %w", ErrUnreadable, err)
	}
	var num protowire.Number
	var sub []byte
	n := 0
	if err := walk(name, "ArrayEncoding", val, func(f protowire.Number, _ protowire.Type, v []byte, _ uint64) error {
		num, sub = f, v
		n++
		return nil
	}); err != nil {
		return 0, nil, fmt.Errorf("%w: %w", ErrUnreadable, err)
	}
	if n != 1 {
		return 0, nil, unreadable(name, "column %d page %d: ArrayEncoding with %d fields", col, idx, n)
	}
	return num, sub, nil
}

// listItems20 is a 2.0 List page's num_items (field 3).
func listItems20(name string, list []byte) (uint64, error) {
	var n uint64
	err := walk(name, "List", list, func(f protowire.Number, _ protowire.Type, _ []byte, u uint64) error {
		if f == 3 {
			n = u
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrUnreadable, err)
	}
	return n, nil
}
