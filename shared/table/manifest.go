package table

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/tablekeep/tablekeep/shared/dataset"
)

// FormatVersion is the newest manifest format this code writes: tables
// created by this build are format 3 unless Options.Format asks for 2
// (inline writes, docs/format.md 4.7). It
// reads manifests of format 1 (no writer grace field, 32-bit deletion ids,
// which decode with WriterGrace = DefaultGrace), 2 and 3. A table keeps its
// format: commits on a format-1 or -2 table write format 2, as before.
const FormatVersion = 3

// legacyFormat is what commits on a format-1 or -2 table write.
const legacyFormat = 2

// changeFormatVersion is the change-record format, written and read.
const changeFormatVersion = 1

const (
	manifestMagic = "TKM1"
	changeMagic   = "TKC1"

	versionsDir  = "_versions/"
	changesDir   = "_changes/"
	dataDir      = "data/"
	deletionsDir = "_deletions/"
	refsDir      = "_refs/"
	tagsDir      = "_refs/tags/"
	// floorDir holds the retention floor as put-if-absent markers named
	// by the inverted floor, so one List with MaxKeys returns the highest.
	floorDir = "_refs/floor/"
	// legacyFloorKey is the floor object of tables written before the
	// markers: still read (the floor is the higher of the two), never written.
	legacyFloorKey = "_refs/floor.json"
)

// Operation summarises a commit.
type Operation struct {
	Kind        dataset.OpKind
	TxnID       uint64 // random; lets a committer recognise its own manifest after an ambiguous write
	RowsAdded   uint64
	RowsDeleted uint64
	// RestoredFrom is the version a Restore copied.
	RestoredFrom uint64
}

// FileID names a data file: data/{16 hex digits}.parquet. The random
// 64-bit id both spreads keys over S3 partitions and makes names unique.
type FileID uint64

// Deletion is a fragment's deletion vector file.
type Deletion struct {
	// ID names the file (DeletionKey). Writers draw 63 random bits with
	// the top bit set (16 hex digits in the name); ids below 2^32 are the
	// 32-bit ids of format-1 manifests (8 hex digits).
	ID             uint64
	Rows           uint64 // rows it marks deleted
	CreatedVersion uint64 // first version that referenced it
}

// Fragment is one immutable data file plus its current deletion vector.
type Fragment struct {
	ID             uint64 // unique within a table, assigned at commit, never reused
	File           FileID
	Rows           uint64 // physical rows in the data file
	Bytes          uint64 // data file size
	CreatedVersion uint64 // first version that referenced the data file
	Deletion       *Deletion
	MinKey, MaxKey []byte // bounds of the key column (empty without a key column)
	// Inline are row positions deleted in the manifest itself (format 3),
	// sorted, distinct and disjoint from the deletion vector's.
	Inline []uint32

	// uploadedAt is when this handle started uploading the data file (zero
	// if it did not): a writer bounds the age of what it uploaded. Never
	// stored; cleared in manifests.
	uploadedAt time.Time
}

// LiveRows is Rows minus deleted rows.
func (f Fragment) LiveRows() uint64 {
	n := f.Rows - uint64(len(f.Inline))
	if f.Deletion == nil {
		return n
	}
	return n - f.Deletion.Rows
}

// Manifest is one version of a table.
type Manifest struct {
	Version        uint64
	Parent         uint64 // Version-1, 0 for the first
	CommitTime     time.Time
	Schema         *arrow.Schema
	KeyColumn      string
	NextFragmentID uint64
	Op             Operation
	// WriterGrace is the table's writers' grace window: set at Create and
	// carried forward by every commit (DefaultGrace for format-1 manifests).
	WriterGrace time.Duration
	Fragments   []Fragment

	// Format is 3 for a format-3 manifest, else 0 (format 1 or 2): commits
	// on it write format 3, or 2.
	Format uint64
	// InlineMaxBytes (format 3) bounds inlineBytes: the encoded inline rows
	// plus the fragments' inline deletion positions.
	InlineMaxBytes uint64
	// Inline are the rows kept in the manifest (format 3), oldest first:
	// live rows newer than every fragment row with the same key.
	Inline []InlineRow
	// RecordsFrom and Records (format 3) index change records: of the
	// versions [RecordsFrom, Version], exactly those in Records (sorted)
	// added or removed a file and so have a change record. At most
	// MaxRecordIndex entries: the oldest drop out, raising RecordsFrom.
	RecordsFrom uint64
	Records     []uint64
}

// MaxRecordIndex bounds Manifest.Records.
const MaxRecordIndex = 64

// HasRecord reports, for a version v at most m.Version, whether its
// commit wrote a change record (known: the index covers v). Without an
// index (formats 1 and 2, or v below RecordsFrom) known is false: every
// version of such a table has a record.
func (m *Manifest) HasRecord(v uint64) (has, known bool) {
	if m.Format < 3 || m.RecordsFrom == 0 || v < m.RecordsFrom || v > m.Version {
		return false, false
	}
	_, has = slices.BinarySearch(m.Records, v)
	return has, true
}

// indexRecord carries base's record index to next, adding next.Version if
// its commit writes a change record (changed).
func indexRecord(base, next *Manifest, changed bool) {
	if next.Format < 3 {
		return
	}
	next.RecordsFrom = base.RecordsFrom
	if next.RecordsFrom == 0 {
		next.RecordsFrom = next.Version // a table upgraded here: indexed from now on
	}
	next.Records = slices.Clone(base.Records)
	if changed {
		next.Records = append(next.Records, next.Version)
	}
	if n := len(next.Records) - MaxRecordIndex; n > 0 {
		next.RecordsFrom = next.Records[n-1] + 1
		next.Records = slices.Delete(next.Records, 0, n)
	}
}

// FormatVersion is the format the table's commits write: 3, or 2 for a
// table of format 1 or 2 (read alike; a commit on format 1 writes 2).
func (m *Manifest) FormatVersion() uint64 {
	if m.Format >= 3 {
		return m.Format
	}
	return legacyFormat
}

// Rows is the number of live rows.
func (m *Manifest) Rows() uint64 {
	var n uint64
	for _, f := range m.Fragments {
		n += f.LiveRows()
	}
	return n + uint64(len(m.Inline))
}

// manifestKey names version v so that the newest sorts first: one List with
// MaxKeys 1 finds the latest version.
func manifestKey(v uint64) string {
	return fmt.Sprintf("%s%020d.manifest", versionsDir, math.MaxUint64-v)
}

// parseManifestKey is manifestKey's inverse for a key relative to the root.
func parseManifestKey(rel string) (uint64, bool) {
	name, ok := strings.CutPrefix(rel, versionsDir)
	if !ok {
		return 0, false
	}
	digits, ok := strings.CutSuffix(name, ".manifest")
	if !ok || len(digits) != 20 {
		return 0, false
	}
	inv, err := strconv.ParseUint(digits, 10, 64)
	if err != nil || inv == math.MaxUint64 {
		return 0, false
	}
	return math.MaxUint64 - inv, true
}

func changeKey(v uint64) string { return fmt.Sprintf("%s%020d.chg", changesDir, v) }

func parseChangeKey(rel string) (uint64, bool) {
	name, ok := strings.CutPrefix(rel, changesDir)
	if !ok {
		return 0, false
	}
	digits, ok := strings.CutSuffix(name, ".chg")
	if !ok || len(digits) != 20 {
		return 0, false
	}
	v, err := strconv.ParseUint(digits, 10, 64)
	return v, err == nil
}

// DataKey is the data file's key relative to the table root.
func (id FileID) DataKey() string { return fmt.Sprintf("%s%016x.parquet", dataDir, uint64(id)) }

// DeletionKey is the key of fragment file f's deletion vector d: d as 8
// hex digits if below 2^32 (format-1 ids), else as 16.
func DeletionKey(f FileID, d uint64) string {
	if d < 1<<32 {
		return fmt.Sprintf("%s%016x-%08x.del", deletionsDir, uint64(f), d)
	}
	return fmt.Sprintf("%s%016x-%016x.del", deletionsDir, uint64(f), d)
}

// newDeletionID draws a deletion-vector id: 63 random bits, top bit set, so
// that its name never has the 8-digit form of a format-1 id.
func newDeletionID() uint64 { return rand.Uint64() | 1<<63 }

// IsDataKey reports whether rel (relative to a table root) is a data or
// deletion file name this format writes.
func IsDataKey(rel string) bool {
	if name, ok := strings.CutPrefix(rel, dataDir); ok {
		hexPart, ok := strings.CutSuffix(name, ".parquet")
		_, err := hex.DecodeString(hexPart)
		return ok && len(hexPart) == 16 && err == nil
	}
	if name, ok := strings.CutPrefix(rel, deletionsDir); ok {
		body, ok := strings.CutSuffix(name, ".del")
		a, b, ok2 := strings.Cut(body, "-")
		_, e1 := hex.DecodeString(a)
		_, e2 := hex.DecodeString(b)
		return ok && ok2 && len(a) == 16 && (len(b) == 8 || len(b) == 16) && e1 == nil && e2 == nil
	}
	return false
}

// encodeManifest writes the binary manifest (see docs/format.md).
func encodeManifest(m *Manifest) []byte {
	buf := make([]byte, 0, 64+len(m.Fragments)*40)
	buf = append(buf, manifestMagic...)
	fv := uint64(legacyFormat)
	if m.Format >= 3 {
		fv = 3
	}
	buf = binary.AppendUvarint(buf, fv)
	buf = binary.AppendUvarint(buf, m.Version)
	buf = binary.AppendUvarint(buf, m.Parent)
	buf = binary.AppendVarint(buf, m.CommitTime.UnixNano())
	buf = appendSchema(buf, m.Schema)
	buf = appendBytes(buf, []byte(m.KeyColumn))
	buf = binary.AppendUvarint(buf, m.NextFragmentID)
	buf = append(buf, byte(m.Op.Kind))
	buf = binary.LittleEndian.AppendUint64(buf, m.Op.TxnID)
	buf = binary.AppendUvarint(buf, m.Op.RowsAdded)
	buf = binary.AppendUvarint(buf, m.Op.RowsDeleted)
	buf = binary.AppendUvarint(buf, m.Op.RestoredFrom)
	grace := m.WriterGrace
	if grace <= 0 {
		grace = DefaultGrace // an in-memory manifest built without one
	}
	buf = binary.AppendUvarint(buf, uint64(grace))
	buf = binary.AppendUvarint(buf, uint64(len(m.Fragments)))
	for _, f := range m.Fragments {
		buf = appendFragment(buf, f, fv)
	}
	if fv >= 3 {
		buf = binary.AppendUvarint(buf, m.InlineMaxBytes)
		buf = binary.AppendUvarint(buf, uint64(len(m.Inline)))
		for _, r := range m.Inline {
			buf = appendInlineRow(buf, r)
		}
		buf = binary.AppendUvarint(buf, m.RecordsFrom)
		buf = binary.AppendUvarint(buf, uint64(len(m.Records)))
		prev := m.RecordsFrom
		for _, v := range m.Records {
			buf = binary.AppendUvarint(buf, v-prev)
			prev = v
		}
	}
	return seal(buf)
}

func appendFragment(buf []byte, f Fragment, fv uint64) []byte {
	buf = binary.AppendUvarint(buf, f.ID)
	buf = binary.LittleEndian.AppendUint64(buf, uint64(f.File))
	buf = binary.AppendUvarint(buf, f.Rows)
	buf = binary.AppendUvarint(buf, f.Bytes)
	buf = binary.AppendUvarint(buf, f.CreatedVersion)
	if f.Deletion == nil {
		buf = append(buf, 0)
	} else {
		buf = append(buf, 1)
		buf = binary.LittleEndian.AppendUint64(buf, f.Deletion.ID)
		buf = binary.AppendUvarint(buf, f.Deletion.Rows)
		buf = binary.AppendUvarint(buf, f.Deletion.CreatedVersion)
	}
	buf = appendBytes(buf, f.MinKey)
	buf = appendBytes(buf, f.MaxKey)
	if fv >= 3 {
		buf = appendPositions(buf, f.Inline)
	}
	return buf
}

// decodeManifest parses a manifest object; key names it in errors.
func decodeManifest(key string, b []byte) (*Manifest, error) {
	if len(b) < len(manifestMagic)+1+4 || string(b[:len(manifestMagic)]) != manifestMagic {
		return nil, objErr(key, ErrCorruptManifest, "bad magic or too short")
	}
	// The format version comes before the checksum check so that a newer
	// writer's manifest is reported as unsupported, not as corrupt.
	fv, n := binary.Uvarint(b[len(manifestMagic):])
	if n <= 0 {
		return nil, objErr(key, ErrCorruptManifest, "bad format version")
	}
	if fv < 1 || fv > FormatVersion {
		return nil, objErr(key, ErrUnsupportedFormat, fmt.Sprintf("format version %d; this build reads 1 to %d", fv, FormatVersion))
	}
	body, ok := unseal(b)
	if !ok {
		return nil, objErr(key, ErrCorruptManifest, "checksum mismatch (truncated or damaged)")
	}
	r := &reader{b: body[len(manifestMagic)+n:]}
	m := &Manifest{}
	if fv >= 3 {
		m.Format = fv
	}
	m.Version = r.uvarint()
	m.Parent = r.uvarint()
	m.CommitTime = time.Unix(0, r.varint()).UTC()
	m.Schema = readSchema(r)
	m.KeyColumn = string(r.bytes())
	m.NextFragmentID = r.uvarint()
	m.Op.Kind = dataset.OpKind(r.byte())
	if tx := r.fixed(8); tx != nil {
		m.Op.TxnID = binary.LittleEndian.Uint64(tx)
	}
	m.Op.RowsAdded = r.uvarint()
	m.Op.RowsDeleted = r.uvarint()
	m.Op.RestoredFrom = r.uvarint()
	m.WriterGrace = DefaultGrace
	if fv >= 2 {
		g := r.uvarint()
		if r.err == nil && g == 0 {
			r.fail("writer grace 0 ns (must be at least 1)")
		}
		// A grace above MaxGrace (stored by a release before the bound)
		// reads as MaxGrace: still "keep for ever", and readers of such a
		// table keep working, while every sum on it stays far from the limit.
		m.WriterGrace = time.Duration(min(g, uint64(MaxGrace)))
	}
	count := r.uvarint()
	if r.err == nil && count > uint64(len(r.b))/12 {
		r.fail("fragment count beyond object size")
	}
	if r.err == nil {
		m.Fragments = make([]Fragment, 0, count)
		for range count {
			m.Fragments = append(m.Fragments, readFragment(r, fv))
		}
	}
	if fv >= 3 {
		m.InlineMaxBytes = r.uvarint()
		if r.err == nil && m.InlineMaxBytes > MaxInlineMaxBytes {
			r.fail("inline bound above the maximum")
		}
		n := r.uvarint()
		if r.err == nil && n > uint64(len(r.b))/3 {
			r.fail("inline row count beyond object size")
		}
		for i := uint64(0); r.err == nil && i < n; i++ {
			m.Inline = append(m.Inline, InlineRow{Version: r.uvarint(), Seq: r.uvarint(), Data: slices.Clone(r.bytes())})
		}
		m.RecordsFrom = r.uvarint()
		nr := r.uvarint()
		if r.err == nil && nr > MaxRecordIndex {
			r.fail("record index beyond its bound")
		}
		prev := m.RecordsFrom
		for i := uint64(0); r.err == nil && i < nr; i++ {
			d := r.uvarint()
			if (i > 0 && d == 0) || d > m.Version-prev || prev > m.Version {
				r.fail("record index not increasing within the versions")
				break
			}
			prev += d
			m.Records = append(m.Records, prev)
		}
	}
	r.done()
	if r.err == nil && m.Schema != nil {
		if err := validateSchema(m.Schema, m.KeyColumn); err != nil {
			r.fail(err.Error())
		}
	}
	for i := range m.Inline {
		if r.err != nil || m.Schema == nil {
			break
		}
		vals, err := decodeRowValues(m.Schema, m.Inline[i].Data)
		if err == nil {
			m.Inline[i].Key, err = inlineKey(m.Schema, m.KeyColumn, vals)
		}
		if err != nil {
			r.fail(fmt.Sprintf("inline row %d: %v", i, err))
		}
	}
	if r.err != nil {
		return nil, objErr(key, ErrCorruptManifest, r.err.Error())
	}
	return m, nil
}

func readFragment(r *reader, fv uint64) Fragment {
	f := Fragment{}
	f.ID = r.uvarint()
	if b := r.fixed(8); b != nil {
		f.File = FileID(binary.LittleEndian.Uint64(b))
	}
	f.Rows = r.uvarint()
	f.Bytes = r.uvarint()
	f.CreatedVersion = r.uvarint()
	switch r.byte() {
	case 0:
	case 1:
		d := &Deletion{}
		if fv == 1 {
			if b := r.fixed(4); b != nil {
				d.ID = uint64(binary.LittleEndian.Uint32(b))
			}
		} else if b := r.fixed(8); b != nil {
			d.ID = binary.LittleEndian.Uint64(b)
		}
		d.Rows = r.uvarint()
		d.CreatedVersion = r.uvarint()
		f.Deletion = d
	default:
		r.fail("bad deletion flag")
	}
	f.MinKey = r.bytes()
	f.MaxKey = r.bytes()
	if fv >= 3 {
		f.Inline = readPositions(r, f.Rows)
		dv := uint64(0)
		if f.Deletion != nil {
			dv = f.Deletion.Rows
		}
		if r.err == nil && (dv > f.Rows || uint64(len(f.Inline)) > f.Rows-dv) {
			r.fail("inline deletions beyond the fragment's live rows")
		}
	}
	return f
}

func encodeChange(c *dataset.ChangeRecord) []byte {
	buf := append([]byte(nil), changeMagic...)
	buf = binary.AppendUvarint(buf, changeFormatVersion)
	buf = binary.AppendUvarint(buf, c.Version)
	buf = binary.AppendVarint(buf, c.CommitTime.UnixNano())
	buf = append(buf, byte(c.Op))
	buf = binary.AppendUvarint(buf, uint64(len(c.Added)))
	for _, k := range c.Added {
		buf = appendBytes(buf, []byte(k))
	}
	buf = binary.AppendUvarint(buf, uint64(len(c.Removed)))
	for _, rf := range c.Removed {
		buf = appendBytes(buf, []byte(rf.Key))
		buf = binary.AppendUvarint(buf, rf.Since)
	}
	return seal(buf)
}

// DecodeChange parses a change record; key names it in errors.
func DecodeChange(key string, b []byte) (*dataset.ChangeRecord, error) {
	if len(b) < len(changeMagic)+1+4 || string(b[:len(changeMagic)]) != changeMagic {
		return nil, objErr(key, ErrCorruptObject, "bad change-record magic or too short")
	}
	fv, n := binary.Uvarint(b[len(changeMagic):])
	if n <= 0 {
		return nil, objErr(key, ErrCorruptObject, "bad format version")
	}
	if fv != changeFormatVersion {
		return nil, objErr(key, ErrUnsupportedFormat, fmt.Sprintf("change-record format version %d; this build reads %d", fv, changeFormatVersion))
	}
	body, ok := unseal(b)
	if !ok {
		return nil, objErr(key, ErrCorruptObject, "change-record checksum mismatch")
	}
	r := &reader{b: body[len(changeMagic)+n:]}
	c := &dataset.ChangeRecord{}
	c.Version = r.uvarint()
	c.CommitTime = time.Unix(0, r.varint()).UTC()
	c.Op = dataset.OpKind(r.byte())
	na := r.uvarint()
	if r.err == nil && na > uint64(len(r.b)) {
		r.fail("added count beyond object size")
	}
	for i := uint64(0); r.err == nil && i < na; i++ {
		c.Added = append(c.Added, string(r.bytes()))
	}
	nr := r.uvarint()
	if r.err == nil && nr > uint64(len(r.b)) {
		r.fail("removed count beyond object size")
	}
	for i := uint64(0); r.err == nil && i < nr; i++ {
		k := string(r.bytes())
		c.Removed = append(c.Removed, dataset.RemovedFile{Key: k, Since: r.uvarint()})
	}
	r.done()
	if r.err != nil {
		return nil, objErr(key, ErrCorruptObject, r.err.Error())
	}
	return c, nil
}

// diffManifests derives the change record of next relative to prev: every
// object next references that prev did not is added; every object prev
// referenced that next does not is removed, with the version it was first
// referenced. Paths are never reused, so the diff is exact.
func diffManifests(prev, next *Manifest) *dataset.ChangeRecord {
	c := &dataset.ChangeRecord{Version: next.Version, CommitTime: next.CommitTime, Op: next.Op.Kind}
	// Compare by file and deletion-vector ids; only differences are formatted.
	type refs struct {
		frag Fragment
		del  uint64
		has  bool
	}
	index := func(m *Manifest) map[FileID]refs {
		out := make(map[FileID]refs, len(m.Fragments))
		for _, f := range m.Fragments {
			r := refs{frag: f}
			if f.Deletion != nil {
				r.del, r.has = f.Deletion.ID, true
			}
			out[f.File] = r
		}
		return out
	}
	old := map[FileID]refs{}
	if prev != nil {
		old = index(prev)
	}
	cur := index(next)
	for _, f := range next.Fragments {
		o, existed := old[f.File]
		if !existed {
			c.Added = append(c.Added, f.File.DataKey())
		}
		if f.Deletion != nil && (!existed || !o.has || o.del != f.Deletion.ID) {
			c.Added = append(c.Added, DeletionKey(f.File, f.Deletion.ID))
		}
	}
	if prev != nil {
		for _, f := range prev.Fragments {
			n, kept := cur[f.File]
			if !kept {
				c.Removed = append(c.Removed, dataset.RemovedFile{Key: f.File.DataKey(), Since: f.CreatedVersion})
			}
			if f.Deletion != nil && (!kept || !n.has || n.del != f.Deletion.ID) {
				c.Removed = append(c.Removed, dataset.RemovedFile{Key: DeletionKey(f.File, f.Deletion.ID), Since: f.Deletion.CreatedVersion})
			}
		}
	}
	return c
}

// fragmentKeys lists the objects a fragment references, relative to the root.
func fragmentKeys(f Fragment) []string {
	if f.Deletion == nil {
		return []string{f.File.DataKey()}
	}
	return []string{f.File.DataKey(), DeletionKey(f.File, f.Deletion.ID)}
}
