package lanceenc

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
)

// Describe names a page's encoding for reports and refusals, e.g.
// "MiniBlock Flat(64) ALL_VALID_ITEM" or "MiniBlock Fsst>Variable def
// OutOfLineBitpacking NULLABLE_ITEM". It reads any encoding, decoded here or
// not; a page that does not parse is described as such.
func Describe(v Version, p Page) string {
	url, val, err := parseAny(p.Encoding)
	if err != nil {
		return "unparsable encoding"
	}
	if url != typeURLPageLayout21 {
		return describe20(url, val)
	}
	fs, err := parseFields(val)
	if err != nil || len(fs) != 1 {
		return "unparsable PageLayout"
	}
	name := map[protowire.Number]string{1: "MiniBlock", 2: "AllNull", 3: "FullZip", 4: "Blob"}[fs[0].num]
	if name == "" {
		name = fmt.Sprintf("PageLayout#%d", fs[0].num)
	}
	parts := []string{name}
	inner, err := parseFields(fs[0].b)
	if err != nil {
		return name + " (unparsable)"
	}
	if fs[0].num == 2 {
		for _, f := range inner {
			if f.num != 5 { // 2.2 ConstantLayout: inline value, levels
				name, parts = "Constant", []string{"Constant"}
				break
			}
		}
		if len(p.Buffers) > 0 {
			name, parts = "Constant", []string{"Constant"}
		}
	}
	var layers []string
	for _, f := range inner {
		switch {
		case fs[0].num == 1 && f.num == 1:
			parts = append(parts, "rep "+describeCompression(f.b, 0))
		case fs[0].num == 1 && f.num == 2:
			parts = append(parts, "def "+describeCompression(f.b, 0))
		case fs[0].num == 1 && f.num == 3, fs[0].num == 3 && f.num == 7:
			parts = append(parts, describeCompression(f.b, 0))
		case fs[0].num == 1 && f.num == 4:
			parts = append(parts, "dictionary "+describeCompression(f.b, 0))
		case fs[0].num == 3 && f.num == 2 && f.u > 0:
			parts = append(parts, fmt.Sprintf("def %d bits", f.u))
		case fs[0].num == 3 && f.num == 1 && f.u > 0:
			parts = append(parts, fmt.Sprintf("rep %d bits", f.u))
		case (fs[0].num == 1 && f.num == 6) || (fs[0].num == 2 && f.num == 5) || (fs[0].num == 3 && f.num == 8):
			ls, _ := f.varints("layers", nil)
			for _, l := range ls {
				layers = append(layers, layerName(l))
			}
		}
	}
	return strings.Join(append(parts, layers...), " ")
}

func layerName(l uint64) string {
	names := []string{"UNSPECIFIED", "ALL_VALID_ITEM", "ALL_VALID_LIST", "NULLABLE_ITEM", "NULLABLE_LIST", "EMPTYABLE_LIST", "NULL_AND_EMPTY_LIST"}
	if l < uint64(len(names)) {
		return names[l]
	}
	return fmt.Sprintf("layer%d", l)
}

// describeCompression names a CompressiveEncoding and what it wraps.
func describeCompression(b []byte, depth int) string {
	fs, err := parseFields(b)
	if err != nil || len(fs) != 1 || depth > 6 {
		return "?"
	}
	f := fs[0]
	name := compressiveNames[f.num]
	if name == "" {
		name = fmt.Sprintf("Compression#%d", f.num)
	}
	inner, err := parseFields(f.b)
	if err != nil {
		return name
	}
	for _, g := range inner {
		if f.num == 1 && g.num == 1 {
			name += fmt.Sprintf("(%d)", g.u)
		}
		if f.num == 1 && g.num == 2 || f.num == 2 && g.num == 2 {
			name += "+buffer compression"
		}
		// nested encodings: Variable.offsets(1), Fsst.values(2), General.values(3), ...
		nested := (f.num == 2 && g.num == 1) || (f.num == 6 && g.num == 2) || (f.num == 10 && g.num == 3) ||
			(f.num == 4 && g.num == 3) || (f.num == 8 && g.num == 1) || (f.num == 9 && g.num == 1) || (f.num == 11 && g.num == 2)
		if nested && g.typ == protowire.BytesType {
			name += ">" + describeCompression(g.b, depth+1)
		}
	}
	return name
}

func describe20(url string, val []byte) string {
	if url != typeURLArrayEnc20 {
		return strings.TrimPrefix(url, "/")
	}
	return "2.0 " + describeArray20(val, 0)
}

// describeArray20 names a 2.0 ArrayEncoding tree, e.g. "Nullable(some_nulls
// Flat(1) Flat(64))", "Binary(Nullable(no_nulls Flat(64)) Flat(8))".
func describeArray20(b []byte, depth int) string {
	fs, err := parseFields(b)
	if err != nil || len(fs) != 1 || depth > 6 {
		return "?"
	}
	f := fs[0]
	name := arrayNames20[f.num]
	if name == "" {
		name = fmt.Sprintf("ArrayEncoding#%d", f.num)
	}
	inner, err := parseFields(f.b)
	if err != nil {
		return name
	}
	var parts []string
	switch f.num {
	case 1:
		for _, g := range inner {
			if g.num == 1 {
				return fmt.Sprintf("Flat(%d)", g.u)
			}
		}
	case 2:
		if len(inner) == 1 {
			kind := map[protowire.Number]string{1: "no_nulls", 2: "some_nulls", 3: "all_nulls"}[inner[0].num]
			parts = append(parts, kind)
			if sub, err := parseFields(inner[0].b); err == nil {
				for _, g := range sub {
					parts = append(parts, describeArray20(g.b, depth+1))
				}
			}
		}
	case 6, 7, 8:
		for _, g := range inner {
			if g.typ == protowire.BytesType && g.num <= 2 {
				parts = append(parts, describeArray20(g.b, depth+1))
			}
		}
	}
	if len(parts) == 0 {
		return name
	}
	return name + "(" + strings.Join(parts, " ") + ")"
}
