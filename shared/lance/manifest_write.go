package lance

import (
	"bytes"
	"encoding/binary"
	"math"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"google.golang.org/protobuf/encoding/protowire"
)

// rawField is one field of a message as it was read.
type rawField struct {
	num protowire.Number
	typ protowire.Type
	v   []byte
	u   uint64
}

func (f rawField) append(out []byte) []byte {
	out = protowire.AppendTag(out, f.num, f.typ)
	switch f.typ {
	case protowire.VarintType:
		out = protowire.AppendVarint(out, f.u)
	case protowire.BytesType:
		out = protowire.AppendBytes(out, f.v)
	case protowire.Fixed32Type:
		out = protowire.AppendFixed32(out, uint32(f.u))
	case protowire.Fixed64Type:
		out = protowire.AppendFixed64(out, f.u)
	}
	return out
}

// rawFragment is a DataFragment with its bytes kept.
type rawFragment struct {
	raw          []byte
	id           uint64
	files        [][]byte // raw DataFile messages
	path         string   // of the only data file
	fileSize     uint64
	major, minor uint64
	deletion     *DeletionFile
	physicalRows uint64
	rowIDs       bool // carries row-id or version sequences
	// fileTmpl is the data file's fields but its path and size: files of
	// one group must agree on it (field ids, column indices, version).
	fileTmpl string
	// dataPart is the fragment without its deletion file: equal dataParts
	// hold the same rows, whatever was deleted since.
	dataPart string
}

// rawManifest is the latest manifest kept as raw fields, so that a new
// manifest copies every field it does not change byte for byte.
type rawManifest struct {
	key          string
	fields       []rawField
	fragments    []rawFragment
	schema       []byte // the concatenated schema fields (1), for equality
	indexSection []byte // raw IndexSection, nil if none
	indexed      *roaring.Bitmap
	txn          []byte // inline transaction, nil if none
	footMajor    uint16
	footMinor    uint16
	m            *Manifest
}

// parseRawManifest decodes a manifest file for rewriting (after
// DecodeManifest accepted it).
func parseRawManifest(key string, b []byte) (*rawManifest, error) {
	m, err := DecodeManifest(key, b)
	if err != nil {
		return nil, err
	}
	body := b[:len(b)-16]
	foot := b[len(b)-16:]
	msg, err := message(key, body, binary.LittleEndian.Uint64(foot[0:8]))
	if err != nil {
		return nil, err
	}
	rm := &rawManifest{key: key, m: m, footMajor: m.FileMajor, footMinor: m.FileMinor, indexed: roaring.New()}
	err = fields(key, "Manifest", msg, func(num protowire.Number, typ protowire.Type, v []byte, u uint64) error {
		rm.fields = append(rm.fields, rawField{num, typ, v, u})
		switch num {
		case 1:
			rm.schema = protowire.AppendBytes(rm.schema, v)
		case 2:
			f, err := parseRawFragment(key, v)
			if err != nil {
				return err
			}
			rm.fragments = append(rm.fragments, f)
		case 4:
			if u != 0 {
				return unsupported(key, "version auxiliary data")
			}
		case 6:
			sec, err := message(key, body, u)
			if err != nil {
				return err
			}
			rm.indexSection = sec
		case 21:
			t, err := message(key, body, u)
			if err != nil {
				return err
			}
			rm.txn = t
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if rm.indexSection != nil {
		if err := fields(key, "IndexSection", rm.indexSection, func(_ protowire.Number, _ protowire.Type, v []byte, _ uint64) error {
			return fields(key, "IndexMetadata", v, func(num protowire.Number, _ protowire.Type, v []byte, _ uint64) error {
				if num != 5 {
					return nil
				}
				bm := roaring.New()
				if _, err := bm.ReadFrom(bytes.NewReader(v)); err != nil {
					return corrupt(key, "index fragment bitmap: %v", err)
				}
				rm.indexed.Or(bm)
				return nil
			})
		}); err != nil {
			return nil, err
		}
	}
	return rm, nil
}

func parseRawFragment(key string, b []byte) (rawFragment, error) {
	f := rawFragment{raw: b}
	err := fields(key, "DataFragment", b, func(num protowire.Number, typ protowire.Type, v []byte, u uint64) error {
		if num != 3 {
			f.dataPart += string(rawField{num, typ, v, u}.append(nil))
		}
		switch num {
		case 1:
			f.id = u
		case 2:
			f.files = append(f.files, v)
			return fields(key, "DataFile", v, func(n protowire.Number, typ protowire.Type, v []byte, u uint64) error {
				switch n {
				case 1:
					f.path = string(v)
				case 4:
					f.major = u
				case 5:
					f.minor = u
				case 6:
					f.fileSize = u
				}
				if n != 1 && n != 6 {
					f.fileTmpl += string(rawField{n, typ, v, u}.append(nil))
				}
				return nil
			})
		case 3:
			d, err := decodeDeletion(key, v)
			if err != nil {
				return err
			}
			f.deletion = &d
		case 4:
			f.physicalRows = u
		case 5, 6, 7, 8, 9, 10:
			f.rowIDs = true
		}
		return nil
	})
	return f, err
}

// newDataFile is a DataFile like tmpl (its field ids, column indices and
// file version) naming path, of size bytes.
func newDataFile(key string, tmpl []byte, path string, size uint64) []byte {
	var out []byte
	out = protowire.AppendTag(out, 1, protowire.BytesType)
	out = protowire.AppendString(out, path)
	_ = fields(key, "DataFile", tmpl, func(num protowire.Number, typ protowire.Type, v []byte, u uint64) error {
		if num != 1 && num != 6 {
			out = rawField{num, typ, v, u}.append(out)
		}
		return nil
	})
	out = protowire.AppendTag(out, 6, protowire.VarintType)
	return protowire.AppendVarint(out, size)
}

// newFragment encodes a DataFragment with one data file and an optional
// deletion file.
func newFragment(id uint64, dataFile []byte, del *DeletionFile, physicalRows uint64) []byte {
	var out []byte
	out = protowire.AppendTag(out, 1, protowire.VarintType)
	out = protowire.AppendVarint(out, id)
	out = protowire.AppendTag(out, 2, protowire.BytesType)
	out = protowire.AppendBytes(out, dataFile)
	if del != nil {
		var d []byte
		if del.Type != 0 {
			d = protowire.AppendTag(d, 1, protowire.VarintType)
			d = protowire.AppendVarint(d, del.Type)
		}
		d = protowire.AppendTag(d, 2, protowire.VarintType)
		d = protowire.AppendVarint(d, del.ReadVersion)
		d = protowire.AppendTag(d, 3, protowire.VarintType)
		d = protowire.AppendVarint(d, del.ID)
		d = protowire.AppendTag(d, 4, protowire.VarintType)
		d = protowire.AppendVarint(d, del.NumDeleted)
		out = protowire.AppendTag(out, 3, protowire.BytesType)
		out = protowire.AppendBytes(out, d)
	}
	out = protowire.AppendTag(out, 4, protowire.VarintType)
	return protowire.AppendVarint(out, physicalRows)
}

// nextManifest is what a commit changes in the latest manifest.
type nextManifest struct {
	Version         uint64
	Timestamp       time.Time
	Fragments       [][]byte // the whole new list, raw
	MaxFragmentID   uint64
	TransactionFile string
}

// encode writes the next manifest file: the index section copied as it is
// (at position 0), then the Manifest with every field of rm copied but the
// fragments, version, timestamp, max fragment id, transaction file and
// index-section position (rewritten) and the inline transaction (dropped:
// the transaction is in its file), then the 16-byte footer.
func (rm *rawManifest) encode(n nextManifest) []byte {
	var out []byte
	indexPos := int64(-1)
	if rm.indexSection != nil {
		indexPos = 0
		out = binary.LittleEndian.AppendUint32(out, uint32(len(rm.indexSection)))
		out = append(out, rm.indexSection...)
	}
	var msg []byte
	put := func(num protowire.Number, u uint64) {
		msg = protowire.AppendTag(msg, num, protowire.VarintType)
		msg = protowire.AppendVarint(msg, u)
	}
	seen := map[protowire.Number]bool{}
	emit := func(num protowire.Number) {
		if seen[num] {
			return
		}
		seen[num] = true
		switch num {
		case 2:
			for _, f := range n.Fragments {
				msg = protowire.AppendTag(msg, 2, protowire.BytesType)
				msg = protowire.AppendBytes(msg, f)
			}
		case 3:
			put(3, n.Version)
		case 6:
			if indexPos >= 0 {
				put(6, uint64(indexPos))
			}
		case 7:
			var ts []byte
			ts = protowire.AppendTag(ts, 1, protowire.VarintType)
			ts = protowire.AppendVarint(ts, uint64(n.Timestamp.Unix()))
			ts = protowire.AppendTag(ts, 2, protowire.VarintType)
			ts = protowire.AppendVarint(ts, uint64(n.Timestamp.Nanosecond()))
			msg = protowire.AppendTag(msg, 7, protowire.BytesType)
			msg = protowire.AppendBytes(msg, ts)
		case 11:
			put(11, n.MaxFragmentID)
		case 12:
			msg = protowire.AppendTag(msg, 12, protowire.BytesType)
			msg = protowire.AppendString(msg, n.TransactionFile)
		}
	}
	for _, f := range rm.fields {
		switch f.num {
		case 2, 3, 6, 7, 11, 12:
			emit(f.num)
		case 21, 4:
			// inline transaction dropped; no auxiliary data (refused)
		default:
			msg = f.append(msg)
		}
	}
	for _, num := range []protowire.Number{2, 3, 6, 7, 11, 12} {
		emit(num)
	}
	pos := int64(len(out))
	out = binary.LittleEndian.AppendUint32(out, uint32(len(msg)))
	out = append(out, msg...)
	out = binary.LittleEndian.AppendUint64(out, uint64(pos))
	out = binary.LittleEndian.AppendUint16(out, rm.footMajor)
	out = binary.LittleEndian.AppendUint16(out, rm.footMinor)
	return append(out, magic...)
}

// maxFragmentID is the manifest's max_fragment_id, or the largest id.
func (rm *rawManifest) maxFragmentID() uint64 {
	mx := uint64(0)
	if rm.m.HasMaxFragment {
		mx = rm.m.MaxFragmentID
	}
	for _, f := range rm.fragments {
		mx = max(mx, f.id)
	}
	return mx
}

// fitsU32 reports whether a fragment id fits a row address's 32 bits.
func fitsU32(id uint64) bool { return id <= math.MaxUint32 }
