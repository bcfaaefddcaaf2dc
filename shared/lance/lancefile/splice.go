package lancefile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/RoaringBitmap/roaring/v2"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/tablekeep/tablekeep/shared/lance/lanceenc"
)

// Spliceable reports, as an error wrapping ErrUnsupported, what stops the
// splicer from copying f's pages as they are: a version other than 2.0, 2.1
// or 2.2, global buffers besides the file descriptor (a 2.0 page may
// reference a global buffer by index), column-level buffers or a column encoding other than
// plain values (a 2.0 zone index, blob columns), a page layout other than
// mini-block, full-zip or all-null (blob pages point at bytes outside the
// page), or columns that do not follow the schema (checkColumns: pages
// whose rows do not add up to their level's, a field type Validate does
// not know).
func Spliceable(name string, f *File) error {
	v20 := f.Major == 0 && f.Minor == 3
	if !v20 && !(f.Major == 2 && (f.Minor == 1 || f.Minor == 2)) {
		return unsupported(name, "file version %d.%d (the splicer copies 2.0, 2.1 and 2.2 files)", f.Major, f.Minor)
	}
	if f.NumGlobalBuffers != 1 {
		return unsupported(name, "%d global buffers (only the file descriptor is copied)", f.NumGlobalBuffers)
	}
	for i, c := range f.Columns {
		if len(c.Buffers) > 0 {
			return unsupported(name, "column %d has %d column-level buffers", i, len(c.Buffers))
		}
		if !c.Plain {
			return unsupported(name, "column %d has a column encoding other than plain values (blob or zone index)", i)
		}
		for j, p := range c.Pages {
			switch {
			case v20 && p.TypeURL == TypeArrayEncoding:
				// 2.0: buffers are referenced by index, of the page, of
				// the column (none: checked above) or of the file (only
				// the descriptor: checked above).
			case v20 || p.TypeURL != TypePageLayout:
				return unsupported(name, "column %d page %d: encoding %q in a %d.%d file", i, j, p.TypeURL, f.Major, f.Minor)
			case p.Layout != LayoutMiniBlock && p.Layout != LayoutAllNull && p.Layout != LayoutFullZip:
				return unsupported(name, "column %d page %d: page layout %d (blob or unknown)", i, j, p.Layout)
			}
		}
	}
	// Each column's pages hold its level's rows (the file's; in 2.0 a
	// list's items below it), its kind of pages for its field.
	if err := checkColumns(name, f); err != nil {
		if re := (*RuleError)(nil); errors.As(err, &re) {
			return &RuleError{Name: re.Name, Reason: re.Reason, Err: ErrUnsupported}
		}
		return err // corrupt
	}
	return nil
}

// SpliceResult is a spliced file.
type SpliceResult struct {
	Data []byte
	Rows uint64
	// Pages is the number of pages written, PagesIn the inputs' pages.
	Pages, PagesIn int
	// MergedColumns counts the columns whose pages lanceenc merged;
	// Unmerged says, for each column whose pages were copied as they are
	// although merging was asked, why (nil without merging).
	MergedColumns int
	Unmerged      []string
}

// MaxSpliceBytes bounds a spliced file (it is built in memory).
const MaxSpliceBytes = 1 << 31

// MaxMergeSlack bounds how much more than its inputs' bytes the merged
// columns of one splice may decode to (the merge budget): with a group's
// inputs bounded by the compaction's MaxGroupBytes, one splice holds at
// most about 2 x MaxGroupBytes + MaxMergeSlack.
const MaxMergeSlack = 64 << 20

// SpliceOptions choose how Splice writes pages.
type SpliceOptions struct {
	// MergePages: each column's pages (of every file, in order) go through
	// lanceenc.MergeRuns, so that runs of decodable pages become few large
	// pages and the others are kept byte for byte. A column MergeRuns
	// refuses, or whose pages would decode to more than the merge budget,
	// is copied byte for byte (Unmerged says why).
	MergePages bool
	// Limits are MergeRuns' (zero: lanceenc.DefaultLimits).
	Limits lanceenc.Limits
	// Drop, if set, holds rows of the spliced file (offsets in the
	// concatenation of the files) that are not written: every page of
	// every column goes through lanceenc.Filter, then MergeRuns. If any
	// column cannot be filtered (a page lanceenc does not decode, a page
	// that is not a plain direct encoding, list pages), SpliceWith fails
	// with ErrUnfilterable and writes nothing: the caller splices without
	// dropping instead.
	Drop *roaring.Bitmap
}

// ErrUnfilterable: SpliceOptions.Drop was set and a column's pages cannot
// be filtered (the rows would be kept).
var ErrUnfilterable = errors.New("lancefile: rows cannot be dropped")

// Splice writes one file holding the rows of files, in order: each page's
// buffers copied byte for byte (each padded to 64 bytes with PadByte, as
// the Lance writer does), its buffer offsets rewritten, its priority (first
// row) raised by the rows of the files before it; then the file descriptor
// with the total length, the column metadata, the two offset tables and the
// footer, in the Lance writer's order. Every file must be Spliceable and
// have the same version, column count and schema bytes (ErrMismatch).
func Splice(names []string, files []*File) (*SpliceResult, error) {
	return SpliceWith(names, files, SpliceOptions{})
}

// outPage is a page as it is written: its buffers, rows, raw Encoding
// message and priority.
type outPage struct {
	bufs     [][]byte
	rows     uint64
	encoding []byte
	priority uint64
}

// SpliceWith is Splice, merging pages if opt.MergePages.
func SpliceWith(names []string, files []*File, opt SpliceOptions) (*SpliceResult, error) {
	if len(files) == 0 || len(names) != len(files) {
		return nil, fmt.Errorf("lancefile: splice of %d files (%d names)", len(files), len(names))
	}
	first := files[0]
	var total, size uint64
	for i, f := range files {
		if err := Spliceable(names[i], f); err != nil {
			return nil, err
		}
		if f.Major != first.Major || f.Minor != first.Minor {
			return nil, fmt.Errorf("%s: %w: version %d.%d, %s is %d.%d", names[i], ErrMismatch, f.Major, f.Minor, names[0], first.Major, first.Minor)
		}
		if f.NumColumns != first.NumColumns || !bytes.Equal(f.Schema, first.Schema) {
			return nil, fmt.Errorf("%s: %w: schema differs from %s's", names[i], ErrMismatch, names[0])
		}
		for c := range f.Columns {
			if !bytes.Equal(f.Columns[c].Encoding, first.Columns[c].Encoding) {
				return nil, fmt.Errorf("%s: %w: column %d encoding differs", names[i], ErrMismatch, c)
			}
		}
		if f.Rows > math.MaxInt64-total || f.Size > MaxSpliceBytes-size {
			return nil, fmt.Errorf("%s: %w: spliced file over %d bytes or rows overflow", names[i], ErrUnsupported, uint64(MaxSpliceBytes))
		}
		total += f.Rows
		size += f.Size
	}
	lim := opt.Limits
	if lim == (lanceenc.Limits{}) {
		lim = lanceenc.DefaultLimits
	}
	// The merge budget bounds what the merged columns may decode to, all
	// columns together (their merged pages are about that size): the
	// inputs' bytes plus 32 bytes a row and column. Only constant pages
	// decode to more than their bytes plus a fixed size a row.
	// It is also at most MaxMergeSlack above the inputs' bytes, so a group
	// of constant pages of many rows and columns (1M rows x 100 columns:
	// 3.2 GB by the first bound) cannot outgrow the function's memory: its
	// columns past the budget are copied byte for byte instead.
	budget := uint64(MaxSpliceBytes)
	if cols := uint64(max(first.NumColumns, 1)); total <= (MaxSpliceBytes-size)/32/cols {
		budget = size + 32*total*cols
	}
	budget = min(budget, size+MaxMergeSlack)
	res := &SpliceResult{Rows: total}
	if opt.Drop != nil {
		if m, ok := opt.Drop.Maximum(), !opt.Drop.IsEmpty(); ok && uint64(m) >= total {
			return nil, fmt.Errorf("%s: %w: row %d to drop beyond the %d rows", names[0], ErrUnfilterable, m, total)
		}
		res.Rows = total - opt.Drop.GetCardinality()
	}
	out := bytes.NewBuffer(make([]byte, 0, size))
	pad := bytes.Repeat([]byte{PadByte}, Alignment)
	metas := make([][]byte, first.NumColumns)
	for c := range first.Columns {
		var cm []byte
		if enc := first.Columns[c].Encoding; enc != nil {
			cm = protowire.AppendTag(cm, 1, protowire.BytesType)
			cm = protowire.AppendBytes(cm, enc)
		}
		copied := copyPages(files, c)
		res.PagesIn += len(copied)
		pages := copied
		if header, ok, err := structHeader20(files, c, total, res.Rows); err != nil {
			return nil, fmt.Errorf("%s: column %d: %w", names[0], c, err)
		} else if ok {
			// A 2.0 struct's header column: one page (the 2.0 reader
			// takes no other), as Lance's writer makes it.
			pages = []outPage{header}
		} else if opt.Drop != nil {
			filtered, est, err := filterPages(files, c, lim, budget, opt.Drop)
			if err != nil {
				return nil, fmt.Errorf("%s: column %d: %w: %w", names[0], c, ErrUnfilterable, err)
			}
			pages = filtered
			budget -= est
			res.MergedColumns++
		} else if opt.MergePages {
			merged, est, why := mergePages(files, c, lim, budget)
			if why == "" {
				pages = merged
				budget -= est
				res.MergedColumns++
			} else {
				res.Unmerged = append(res.Unmerged, fmt.Sprintf("column %d: %s", c, why))
			}
		}
		for _, p := range pages {
			var offs, sizes []byte
			for _, b := range p.bufs {
				offs = protowire.AppendVarint(offs, uint64(out.Len()))
				sizes = protowire.AppendVarint(sizes, uint64(len(b)))
				out.Write(b)
				if r := len(b) % Alignment; r != 0 {
					out.Write(pad[:Alignment-r])
				}
			}
			var pg []byte
			if len(p.bufs) > 0 {
				pg = protowire.AppendTag(pg, 1, protowire.BytesType)
				pg = protowire.AppendBytes(pg, offs)
				pg = protowire.AppendTag(pg, 2, protowire.BytesType)
				pg = protowire.AppendBytes(pg, sizes)
			}
			if p.rows != 0 {
				pg = protowire.AppendTag(pg, 3, protowire.VarintType)
				pg = protowire.AppendVarint(pg, p.rows)
			}
			if p.encoding != nil {
				pg = protowire.AppendTag(pg, 4, protowire.BytesType)
				pg = protowire.AppendBytes(pg, p.encoding)
			}
			if p.priority != 0 {
				pg = protowire.AppendTag(pg, 5, protowire.VarintType)
				pg = protowire.AppendVarint(pg, p.priority)
			}
			cm = protowire.AppendTag(cm, 2, protowire.BytesType)
			cm = protowire.AppendBytes(cm, pg)
			res.Pages++
		}
		if out.Len() > MaxSpliceBytes {
			return nil, fmt.Errorf("%s: %w: spliced file over %d bytes", names[0], ErrUnsupported, uint64(MaxSpliceBytes))
		}
		metas[c] = cm
	}
	// Global buffer 0: the file descriptor, every field copied but the
	// length. From 2.1 on it must start at a multiple of 64 (it does: every
	// page buffer before it is padded).
	fdPos := uint64(out.Len())
	out.Write(rewriteLength(first.Descriptor, res.Rows))
	fdLen := uint64(out.Len()) - fdPos
	cmStart := uint64(out.Len())
	cmo := make([]byte, 0, 16*len(metas))
	for _, m := range metas {
		cmo = binary.LittleEndian.AppendUint64(cmo, uint64(out.Len()))
		cmo = binary.LittleEndian.AppendUint64(cmo, uint64(len(m)))
		out.Write(m)
	}
	cmoStart := uint64(out.Len())
	out.Write(cmo)
	gboStart := uint64(out.Len())
	var tail []byte
	tail = binary.LittleEndian.AppendUint64(tail, fdPos)
	tail = binary.LittleEndian.AppendUint64(tail, fdLen)
	tail = binary.LittleEndian.AppendUint64(tail, cmStart)
	tail = binary.LittleEndian.AppendUint64(tail, cmoStart)
	tail = binary.LittleEndian.AppendUint64(tail, gboStart)
	tail = binary.LittleEndian.AppendUint32(tail, 1)
	tail = binary.LittleEndian.AppendUint32(tail, first.NumColumns)
	tail = binary.LittleEndian.AppendUint16(tail, first.Major)
	tail = binary.LittleEndian.AppendUint16(tail, first.Minor)
	tail = append(tail, Magic...)
	out.Write(tail)
	res.Data = out.Bytes()
	return res, nil
}

// structHeader20 is, when column c of 2.0 files is a struct's header
// column (every page a SimpleStruct, without buffers), its one page as
// Lance's writer writes it (StructFieldEncoder.finish: length the struct's
// rows, the encoding, no buffers, priority 0). The header of a top-level
// struct holds the file's rows (kept: the rows written); one under a list
// holds items, which cannot be dropped by row (ErrUnfilterable).
func structHeader20(files []*File, c int, total, kept uint64) (outPage, bool, error) {
	if f := files[0]; !(f.Major == 0 && f.Minor == 3) {
		return outPage{}, false, nil
	}
	var rows uint64
	var enc []byte
	for _, f := range files {
		for j, p := range f.Columns[c].Pages {
			num, _, err := arrayEncoding20("", c, j, p)
			if err != nil || num != arrayStruct20 || len(p.Buffers) != 0 {
				return outPage{}, false, nil
			}
			if enc == nil {
				enc = p.Encoding
			}
			if !bytes.Equal(p.Encoding, enc) {
				return outPage{}, false, nil
			}
			rows += p.Length
		}
	}
	if enc == nil {
		return outPage{}, false, nil
	}
	if kept != total {
		if rows != total {
			return outPage{}, false, fmt.Errorf("%w: a struct header of %d items under a list", ErrUnfilterable, rows)
		}
		rows = kept
	}
	return outPage{rows: rows, encoding: enc}, true, nil
}

// copyPages is column c's pages of every file, as they are: buffers byte
// for byte, priorities raised by the rows of the files before.
func copyPages(files []*File, c int) []outPage {
	var pages []outPage
	var base uint64
	for _, f := range files {
		for _, p := range f.Columns[c].Pages {
			bufs := make([][]byte, len(p.Buffers))
			for i, b := range p.Buffers {
				bufs[i] = f.data[b.Offset : b.Offset+b.Size]
			}
			pages = append(pages, outPage{bufs: bufs, rows: p.Length, encoding: p.Encoding, priority: base + p.Priority})
		}
		base += f.Rows
	}
	return pages
}

// mergePages is column c's pages of every file through lanceenc.MergeRuns,
// with priority = first row; est is what the column was estimated to
// decode to. A reason (why != "") means the column is to be copied: a page
// whose encoding is not a plain direct one or whose priority is not its
// first row (list pages), an estimate over the budget, MergeRuns' error,
// or nothing merged.
func mergePages(files []*File, c int, lim lanceenc.Limits, budget uint64) (out []outPage, est uint64, why string) {
	ma, mi := files[0].Version()
	v := lanceenc.Version{Major: ma, Minor: mi}
	var in []lanceenc.Page
	var base, rows uint64
	for _, f := range files {
		for _, p := range f.Columns[c].Pages {
			anyb, ok := directEncoding(p.Encoding)
			if !ok || !bytes.Equal(wrapDirect(anyb), p.Encoding) {
				return nil, 0, "a page encoding that is not a direct encoding"
			}
			if base+p.Priority != rows {
				return nil, 0, "a page whose priority is not its first row"
			}
			bufs := make([][]byte, len(p.Buffers))
			var n uint64
			for i, b := range p.Buffers {
				bufs[i] = f.data[b.Offset : b.Offset+b.Size]
				n += b.Size
			}
			// What the page may decode to: its bytes, offsets, validity
			// and fixed values of up to 16 bytes a row; a constant page
			// (the all-null layout's field) repeats its value every row.
			per := uint64(25)
			if p.Layout == LayoutAllNull {
				per = min(per+n, budget+1) // saturates
			}
			if (p.Length != 0 && per > (budget-est)/p.Length) || n > budget-est-per*p.Length {
				return nil, 0, "its pages would decode to more than the merge budget"
			}
			est += n + per*p.Length
			in = append(in, lanceenc.Page{Rows: p.Length, Buffers: bufs, Encoding: anyb})
			rows += p.Length
		}
		base += f.Rows
	}
	merged, kept, err := lanceenc.MergeRuns(v, in, lim)
	if err != nil {
		return nil, 0, err.Error()
	}
	if len(merged) == len(in) {
		all := true
		for _, k := range kept {
			all = all && k
		}
		if all {
			return nil, 0, "no page decodable"
		}
	}
	var at uint64
	for _, p := range merged {
		out = append(out, outPage{bufs: p.Buffers, rows: p.Rows, encoding: wrapDirect(p.Encoding), priority: at})
		at += p.Rows
	}
	if at != rows {
		return nil, 0, fmt.Sprintf("merged pages hold %d rows, not %d", at, rows)
	}
	return out, est, ""
}

// filterPages is column c's pages of every file without the rows in drop
// (lanceenc.Filter page by page), then merged (lanceenc.MergeRuns: every
// page is then decodable). Any page it cannot filter is an error.
func filterPages(files []*File, c int, lim lanceenc.Limits, budget uint64, drop *roaring.Bitmap) (out []outPage, est uint64, err error) {
	ma, mi := files[0].Version()
	v := lanceenc.Version{Major: ma, Minor: mi}
	var in []lanceenc.Page
	var base, rows, kept uint64
	for _, f := range files {
		for _, p := range f.Columns[c].Pages {
			anyb, ok := directEncoding(p.Encoding)
			if !ok || !bytes.Equal(wrapDirect(anyb), p.Encoding) {
				return nil, 0, errors.New("a page encoding that is not a direct encoding")
			}
			if base+p.Priority != rows {
				return nil, 0, errors.New("a page whose priority is not its first row")
			}
			bufs := make([][]byte, len(p.Buffers))
			var n uint64
			for i, b := range p.Buffers {
				bufs[i] = f.data[b.Offset : b.Offset+b.Size]
				n += b.Size
			}
			per := uint64(25)
			if p.Layout == LayoutAllNull {
				per = min(per+n, budget+1) // saturates
			}
			if (p.Length != 0 && per > (budget-est)/p.Length) || n > budget-est-per*p.Length {
				return nil, 0, errors.New("its pages would decode to more than the merge budget")
			}
			est += n + per*p.Length
			pg := lanceenc.Page{Rows: p.Length, Buffers: bufs, Encoding: anyb}
			first := rows
			if drop.IntersectsWithInterval(first, first+p.Length) {
				fp, err := lanceenc.Filter(v, pg, func(r uint64) bool { return !drop.Contains(uint32(first + r)) })
				if err != nil {
					return nil, 0, err
				}
				pg = fp
			}
			rows += p.Length
			if pg.Rows == 0 {
				continue
			}
			kept += pg.Rows
			in = append(in, pg)
		}
		base += f.Rows
	}
	if want := rows - drop.GetCardinality(); kept != want {
		return nil, 0, fmt.Errorf("filtered pages hold %d rows, not %d", kept, want)
	}
	if len(in) == 0 {
		return nil, est, nil
	}
	merged, _, err := lanceenc.MergeRuns(v, in, lim)
	if err != nil {
		return nil, 0, err
	}
	var at uint64
	for _, p := range merged {
		out = append(out, outPage{bufs: p.Buffers, rows: p.Rows, encoding: wrapDirect(p.Encoding), priority: at})
		at += p.Rows
	}
	if at != kept {
		return nil, 0, fmt.Errorf("merged pages hold %d rows, not %d", at, kept)
	}
	return out, est, nil
}

// directEncoding is the Any of an Encoding message's direct encoding
// (Encoding.direct.encoding).
func directEncoding(enc []byte) ([]byte, bool) {
	var direct []byte
	found := false
	if walk("", "Encoding", enc, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if num == 2 && typ == protowire.BytesType {
			direct, found = v, true
		}
		return nil
	}) != nil || !found {
		return nil, false
	}
	var anyb []byte
	found = false
	if walk("", "DirectEncoding", direct, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if num == 1 && typ == protowire.BytesType {
			anyb, found = v, true
		}
		return nil
	}) != nil {
		return nil, false
	}
	return anyb, found
}

// wrapDirect is the Encoding message of a direct encoding, as prost writes
// it: Encoding{direct: DirectEncoding{encoding: any}}.
func wrapDirect(anyb []byte) []byte {
	d := protowire.AppendTag(nil, 1, protowire.BytesType)
	d = protowire.AppendBytes(d, anyb)
	e := protowire.AppendTag(nil, 2, protowire.BytesType)
	return protowire.AppendBytes(e, d)
}

// rewriteLength copies a FileDescriptor with its length (field 2) set.
func rewriteLength(fd []byte, rows uint64) []byte {
	var out []byte
	_ = walk("", "FileDescriptor", fd, func(num protowire.Number, typ protowire.Type, v []byte, u uint64) error {
		if num == 2 {
			return nil
		}
		out = appendField(out, num, typ, v, u)
		return nil
	})
	if rows != 0 {
		out = protowire.AppendTag(out, 2, protowire.VarintType)
		out = protowire.AppendVarint(out, rows)
	}
	return out
}

// appendField re-encodes one field as walk reported it.
func appendField(out []byte, num protowire.Number, typ protowire.Type, v []byte, u uint64) []byte {
	out = protowire.AppendTag(out, num, typ)
	switch typ {
	case protowire.VarintType:
		out = protowire.AppendVarint(out, u)
	case protowire.BytesType:
		out = protowire.AppendBytes(out, v)
	case protowire.Fixed32Type:
		out = protowire.AppendFixed32(out, uint32(u))
	case protowire.Fixed64Type:
		out = protowire.AppendFixed64(out, u)
	}
	return out
}
