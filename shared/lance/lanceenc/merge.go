package lanceenc

import "errors"

// Limits bound the pages Merge writes. Mini-block chunks always follow
// Lance's own rules (at most 4096 values and 32 KiB a chunk, 4 KiB aimed at
// for variable values, 8 KiB for fixed).
type Limits struct {
	// PageBytes: a page is closed once its values reach this many bytes
	// (Lance's writer closes pages at 32 MiB; 8 MiB keeps memory low).
	PageBytes uint64
	// PageRows: at most this many rows a page (below 2^32: full-zip
	// counts items in a uint32).
	PageRows uint64
	// MergeRows: at most this many rows in one Merge call (bounds memory
	// where all-null pages carry rows without bytes).
	MergeRows uint64
}

// DefaultLimits are Merge's limits.
var DefaultLimits = Limits{PageBytes: 8 << 20, PageRows: 1 << 20, MergeRows: 1 << 24}

// ErrTooLarge: a Merge or Filter over more rows than Limits.MergeRows.
var ErrTooLarge = errors.New("lanceenc: too many rows for one merge")

// Merge turns consecutive pages of one column into fewer, larger pages with
// the same rows in the same order, within DefaultLimits. An input page this
// package does not decode makes the whole call fail with an
// *UnsupportedError: the caller then keeps the pages as they are.
func Merge(v Version, pages []Page) ([]Page, error) {
	return MergeLimits(v, pages, DefaultLimits)
}

// MergeLimits is Merge within lim.
func MergeLimits(v Version, pages []Page, lim Limits) ([]Page, error) {
	nv, err := v.norm()
	if err != nil {
		return nil, err
	}
	if lim.PageRows == 0 || lim.PageRows > 0xFFFFFFFF || lim.PageBytes == 0 {
		return nil, errors.New("lanceenc: limits with no page rows or bytes")
	}
	var rows uint64
	for _, p := range pages {
		rows += p.Rows
		if rows > lim.MergeRows || rows < p.Rows {
			return nil, ErrTooLarge
		}
	}
	all := &Values{Kind: KindNull}
	decoded := make([]*Values, 0, len(pages))
	for _, p := range pages {
		d, err := Decode(nv, p)
		if err != nil {
			return nil, err
		}
		if d.Len != p.Rows {
			return nil, corrupt("page of %d rows decodes to %d", p.Rows, d.Len)
		}
		decoded = append(decoded, d)
		if all.Kind == KindNull && d.Kind != KindNull {
			all = &Values{Kind: d.Kind, Bits: d.Bits, OffsetBits: d.OffsetBits}
		}
	}
	if all.Kind == KindVariable {
		all.Offsets = []uint64{0}
	}
	for _, d := range decoded {
		if err := appendValues(all, d); err != nil {
			return nil, err
		}
	}
	return encodePages(nv, all, lim)
}

// encodePages cuts all into pages of at most lim and encodes them.
func encodePages(v Version, all *Values, lim Limits) ([]Page, error) {
	var out []Page
	for from := uint64(0); from < all.Len; {
		to := from
		var bytes uint64
		for to < all.Len && to-from < lim.PageRows && bytes < lim.PageBytes {
			bytes += rowBytes(all, to)
			to++
		}
		p, err := encodePage(v, all.slice(from, to))
		if err != nil {
			return nil, err
		}
		out = append(out, p)
		from = to
	}
	return out, nil
}

func rowBytes(v *Values, i uint64) uint64 {
	switch v.Kind {
	case KindFixed:
		return (v.Bits + 7) / 8
	case KindVariable:
		return v.Offsets[i+1] - v.Offsets[i] + v.OffsetBits/8
	}
	return 0
}

// encodePage writes a page of v. 2.2 mini-blocks use the u32 chunk
// grammar (has_large_chunk): Lance 2.2 readers refuse a 2.2 file with any
// mini-block page in the 2.1 grammar.
func encodePage(v Version, vals *Values) (Page, error) {
	switch v {
	case V2_0:
		return encodePage20(vals)
	case V2_2:
		return encodeStructural(vals, true)
	}
	return encodePage21(vals)
}

// Filter drops the rows of p for which keep(row) is false (row counts from
// 0 at the page's first row), for deletion vectors. The kept rows are
// encoded as one page; if none is kept the result has Rows == 0 and no
// buffers, and the caller must drop it rather than write it.
func Filter(v Version, p Page, keep func(row uint64) bool) (Page, error) {
	nv, err := v.norm()
	if err != nil {
		return Page{}, err
	}
	d, err := Decode(nv, p)
	if err != nil {
		return Page{}, err
	}
	out := &Values{Kind: d.Kind, Bits: d.Bits, OffsetBits: d.OffsetBits}
	if out.Kind == KindVariable {
		out.Offsets = []uint64{0}
	}
	run := uint64(0) // first row of the current run of kept rows
	for i := uint64(0); i <= d.Len; i++ {
		if i < d.Len && keep(i) {
			continue
		}
		if i > run {
			if err := appendValues(out, d.slice(run, i)); err != nil {
				return Page{}, err
			}
		}
		run = i + 1
	}
	if out.Len == 0 {
		return Page{}, nil
	}
	return encodePage(nv, out)
}

// MergeRuns is Merge for a column whose pages are not all decodable: each
// maximal run of consecutive pages this package decodes is merged (runs
// cut at lim.MergeRows rows), and every other page is passed through as it
// is, byte for byte, in its place. kept[i] says out[i] is an input page
// unchanged. Only a corrupt page (or bad limits) is an error: then nothing
// of the column should be rewritten.
func MergeRuns(v Version, pages []Page, lim Limits) (out []Page, kept []bool, err error) {
	nv, err := v.norm()
	if err != nil {
		return nil, nil, err
	}
	var run []Page
	var runRows uint64
	var runKind *Values
	flush := func() error {
		if len(run) == 0 {
			return nil
		}
		merged, err := MergeLimits(nv, run, lim)
		if err != nil {
			return err
		}
		for _, p := range merged {
			out = append(out, p)
			kept = append(kept, false)
		}
		run, runRows, runKind = nil, 0, nil
		return nil
	}
	for _, p := range pages {
		d, err := Decode(nv, p)
		if errors.Is(err, ErrUnsupported) || errors.Is(err, ErrTooLarge) {
			if err := flush(); err != nil {
				return nil, nil, err
			}
			out = append(out, p)
			kept = append(kept, true)
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		compatible := runKind == nil || d.Kind == KindNull || runKind.Kind == KindNull ||
			(d.Kind == runKind.Kind && d.Bits == runKind.Bits && d.OffsetBits == runKind.OffsetBits)
		if !compatible || runRows+p.Rows > lim.MergeRows || runRows+p.Rows < runRows {
			if err := flush(); err != nil {
				return nil, nil, err
			}
		}
		if p.Rows > lim.MergeRows {
			out = append(out, p)
			kept = append(kept, true)
			continue
		}
		run = append(run, p)
		runRows += p.Rows
		if runKind == nil || runKind.Kind == KindNull {
			runKind = &Values{Kind: d.Kind, Bits: d.Bits, OffsetBits: d.OffsetBits}
		}
	}
	if err := flush(); err != nil {
		return nil, nil, err
	}
	return out, kept, nil
}
