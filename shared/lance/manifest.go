package lance

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/tablekeep/tablekeep/shared/lance/internal/pbwire"
)

// Sentinel errors.
var (
	// ErrUnsupported: the dataset uses a feature or field this reader does
	// not understand and that could reference files; nothing is deleted.
	ErrUnsupported = errors.New("lance: unsupported dataset feature")
	// ErrCorrupt: a manifest or tag that does not decode.
	ErrCorrupt = errors.New("lance: corrupt object")
	// ErrNotADataset: no manifest under _versions/.
	ErrNotADataset = errors.New("lance: not a dataset")
)

// Directories of a dataset, relative to its root.
const (
	VersionsDir     = "_versions/"
	DataDir         = "data/"
	DeletionsDir    = "_deletions/"
	IndicesDir      = "_indices/"
	TransactionsDir = "_transactions/"
	TagsDir         = "_refs/tags/"
	BranchesDir     = "_refs/branches/"
)

// magic ends every manifest file.
const magic = "LANC"

// Feature flags (Manifest.reader_feature_flags / writer_feature_flags), as
// rust/lance-table/src/feature_flags.rs numbers them. LanceDB 0.39 (Lance
// 12.0.0) reads 1 to 256 and refuses 512 and above as unknown.
const (
	FlagDeletionFiles         = 1
	FlagStableRowIDs          = 2
	FlagUseV2FormatDeprecated = 4
	FlagTableConfig           = 8
	FlagBasePaths             = 16
	FlagDisableTransaction    = 32
	FlagDataOverlayFiles      = 64
	FlagMemWALIndexCatchup    = 128
	// FlagMixedFileVersions (Lance 12): the data files of one dataset may
	// have different Lance file versions, each read by its own DataFile
	// major/minor version; without it every data file has the manifest's
	// default version (data_format). Set on both words or neither (Lance
	// refuses one alone as corrupt), and sticky.
	FlagMixedFileVersions = 256
)

// understoodFlags are the flags whose files this reader knows: deletion
// files, inline or absent row-id sequences (external ones are refused field
// by field), table config, a transaction file that may be absent, and data
// files of several file versions (each file's version is in its DataFile;
// compaction keeps it: a group's files share one version, docs/lance.md).
// Base paths (files outside the dataset), data overlays, the MemWAL's
// index catch-up and any flag a later Lance allocates are not.
const understoodFlags = FlagDeletionFiles | FlagStableRowIDs | FlagUseV2FormatDeprecated | FlagTableConfig | FlagDisableTransaction | FlagMixedFileVersions

// DeletionFile is a fragment's deletion file.
type DeletionFile struct {
	Type        uint64 // 0: Arrow array (.arrow), 1: bitmap (.bin)
	ReadVersion uint64
	ID          uint64
	NumDeleted  uint64
}

// Fragment is one data fragment of a version.
type Fragment struct {
	ID           uint64
	Files        []string // data file paths relative to data/
	Deletion     *DeletionFile
	PhysicalRows uint64
}

// DeletionKey is the deletion file's key relative to the dataset root:
// _deletions/{fragment id}-{read version}-{id}.{arrow|bin}.
func (f Fragment) DeletionKey() string {
	d := f.Deletion
	ext := "arrow"
	if d.Type == 1 {
		ext = "bin"
	}
	return fmt.Sprintf("%s%d-%d-%d.%s", DeletionsDir, f.ID, d.ReadVersion, d.ID, ext)
}

// Index is one entry of a manifest's index section.
type Index struct {
	UUID    string // 8-4-4-4-12 hex
	Name    string
	TypeURL string // of its index_details
}

// Manifest is what maintenance needs of one version.
type Manifest struct {
	Version         uint64
	Timestamp       time.Time
	ReaderFlags     uint64
	WriterFlags     uint64
	TransactionFile string // relative to _transactions/, empty if none
	Fragments       []Fragment
	Indices         []Index
	MaxFragmentID   uint64
	HasMaxFragment  bool
	// FileMajor and FileMinor are the footer's format version.
	FileMajor, FileMinor uint16
	// Operation is the field number of the operation of the transaction
	// that wrote this version (OpAppend, OpRestore, ...), read from the
	// transaction inlined in the manifest file; 0 if it is not inlined.
	Operation int
}

// Transaction operations (the oneof field numbers of lance.table.Transaction).
const (
	OpAppend           = 100
	OpDelete           = 101
	OpOverwrite        = 102
	OpCreateIndex      = 103
	OpRewrite          = 104
	OpMerge            = 105
	OpRestore          = 106
	OpReserveFragments = 107
	OpUpdate           = 108
	OpClone            = 113
)

// DecodeOperation returns the operation field number of a serialized
// Transaction message (0 if none).
func DecodeOperation(key string, b []byte) (int, error) {
	op := 0
	err := fields(key, "Transaction", b, func(num protowire.Number, _ protowire.Type, _ []byte, _ uint64) error {
		if num >= 100 && num < 200 {
			op = int(num)
		}
		return nil
	})
	return op, err
}

// Keys lists every object the version references, relative to the dataset
// root, sorted as produced: data files, deletion files, the transaction
// file. An index is a directory: it is listed as IndicesDir+uuid+"/".
func (m *Manifest) Keys() []string {
	var out []string
	for _, f := range m.Fragments {
		for _, p := range f.Files {
			out = append(out, DataDir+p)
		}
		if f.Deletion != nil {
			out = append(out, f.DeletionKey())
		}
	}
	if m.TransactionFile != "" {
		out = append(out, TransactionsDir+m.TransactionFile)
	}
	for _, ix := range m.Indices {
		out = append(out, IndicesDir+ix.UUID+"/")
	}
	return out
}

func unsupported(key, format string, a ...any) error {
	return fmt.Errorf("%s: %w: %s", key, ErrUnsupported, fmt.Sprintf(format, a...))
}

func corrupt(key, format string, a ...any) error {
	return fmt.Errorf("%s: %w: %s", key, ErrCorrupt, fmt.Sprintf(format, a...))
}

// DecodeManifest parses a whole manifest file (key names it in errors):
// the footer (i64 position of the manifest, u16 major, u16 minor, "LANC"),
// the length-prefixed Manifest message at that position, and the
// length-prefixed IndexSection its index_section points to.
func DecodeManifest(key string, b []byte) (*Manifest, error) {
	if len(b) < 16 || string(b[len(b)-4:]) != magic {
		return nil, corrupt(key, "no %q footer", magic)
	}
	foot := b[len(b)-16:]
	pos := binary.LittleEndian.Uint64(foot[0:8])
	m := &Manifest{
		FileMajor: binary.LittleEndian.Uint16(foot[8:10]),
		FileMinor: binary.LittleEndian.Uint16(foot[10:12]),
	}
	msg, err := message(key, b[:len(b)-16], pos)
	if err != nil {
		return nil, err
	}
	// Positions are uint64 in the protobuf: presence is tracked apart, so
	// no value (2^63 and above included) can read as "absent".
	var indexPos, txnPos uint64
	var hasIndex, hasTxn bool
	if err := fields(key, "Manifest", msg, func(num protowire.Number, typ protowire.Type, v []byte, u uint64) error {
		switch num {
		case 1, 5, 13, 15, 16, 19, 14: // schema, schema metadata, writer version, data format, config, table metadata, next row id
		case 2:
			f, err := decodeFragment(key, v)
			if err != nil {
				return err
			}
			m.Fragments = append(m.Fragments, f)
		case 3:
			m.Version = u
		case 4: // version_aux_data: a position in this file
		case 6:
			indexPos, hasIndex = u, true
		case 7:
			ts, err := decodeTimestamp(key, v)
			if err != nil {
				return err
			}
			m.Timestamp = ts
		case 8: // tag (unused)
		case 9:
			m.ReaderFlags = u
		case 10:
			m.WriterFlags = u
		case 11:
			m.MaxFragmentID, m.HasMaxFragment = u, true
		case 12:
			m.TransactionFile = string(v)
		case 21: // transaction_section: inline in this file
			txnPos, hasTxn = u, true
		case 18:
			return unsupported(key, "base paths (files outside the dataset root)")
		case 20:
			if len(v) > 0 {
				return unsupported(key, "branch %q", v)
			}
		default:
			return unsupported(key, "Manifest field %d", num)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	if f := m.ReaderFlags | m.WriterFlags; f&^understoodFlags != 0 {
		return nil, unsupported(key, "feature flags %#x (understood: %#x)", f, understoodFlags)
	}
	if (m.ReaderFlags^m.WriterFlags)&FlagMixedFileVersions != 0 {
		return nil, corrupt(key, "the mixed file versions flag (%d) on only one of the reader (%#x) and writer (%#x) words", FlagMixedFileVersions, m.ReaderFlags, m.WriterFlags)
	}
	if m.TransactionFile != "" && (strings.ContainsAny(m.TransactionFile, "/\\") || !strings.HasSuffix(m.TransactionFile, ".txn") || m.TransactionFile == ".txn") {
		return nil, unsupported(key, "transaction file %q", m.TransactionFile)
	}
	if hasTxn {
		txn, err := message(key, b[:len(b)-16], txnPos)
		if err != nil {
			return nil, err
		}
		if m.Operation, err = DecodeOperation(key, txn); err != nil {
			return nil, err
		}
	}
	if hasIndex {
		sec, err := message(key, b[:len(b)-16], indexPos)
		if err != nil {
			return nil, err
		}
		if err := fields(key, "IndexSection", sec, func(num protowire.Number, _ protowire.Type, v []byte, _ uint64) error {
			if num != 1 {
				return unsupported(key, "IndexSection field %d", num)
			}
			ix, err := decodeIndex(key, v)
			if err != nil {
				return err
			}
			m.Indices = append(m.Indices, ix)
			return nil
		}); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// message returns the u32-length-prefixed message at pos in b. The bounds
// are checked by subtraction from len(b), never by adding to pos, so no
// position or length near the integer limits can wrap a check around
// (issue 19 item 4): pos <= len(b)-4, then n <= len(b)-4-pos.
func message(key string, b []byte, pos uint64) ([]byte, error) {
	size := uint64(len(b))
	if size < 4 || pos > size-4 {
		return nil, corrupt(key, "message position %d outside %d bytes", pos, len(b))
	}
	n := uint64(binary.LittleEndian.Uint32(b[pos:]))
	if n > size-4-pos {
		return nil, corrupt(key, "message of %d bytes at %d overruns the file", n, pos)
	}
	return b[pos+4 : pos+4+n], nil
}

// fields walks a message, calling fn with each field's number, type, and
// its bytes (length-delimited) or value (varint, fixed).
func fields(key, what string, b []byte, fn func(num protowire.Number, typ protowire.Type, v []byte, u uint64) error) error {
	err := pbwire.Walk(b, fn)
	if pe, ok := err.(*pbwire.Error); ok {
		return corrupt(key, "%s", pe.In(what))
	}
	return err
}

func decodeTimestamp(key string, b []byte) (time.Time, error) {
	var sec, nsec uint64
	err := fields(key, "Timestamp", b, func(num protowire.Number, _ protowire.Type, _ []byte, u uint64) error {
		switch num {
		case 1:
			sec = u
		case 2:
			nsec = u
		}
		return nil
	})
	if err != nil {
		return time.Time{}, err
	}
	// The version's time decides when it may be pruned: one that does not
	// fit int64 nanoseconds (about 1678..2262; seconds near the integer
	// limits once wrapped to a time long past) or a nanos field outside
	// [0, 1e9) is corrupt, never reinterpreted.
	s := int64(sec)
	if nsec >= 1e9 || s >= math.MaxInt64/int64(time.Second) || s <= math.MinInt64/int64(time.Second) {
		return time.Time{}, corrupt(key, "timestamp %d s %d ns out of range", s, nsec)
	}
	return time.Unix(s, int64(nsec)).UTC(), nil
}

func decodeFragment(key string, b []byte) (Fragment, error) {
	var f Fragment
	err := fields(key, "DataFragment", b, func(num protowire.Number, _ protowire.Type, v []byte, u uint64) error {
		switch num {
		case 1:
			f.ID = u
		case 2:
			p, err := decodeDataFile(key, v)
			if err != nil {
				return err
			}
			f.Files = append(f.Files, p)
		case 3:
			d, err := decodeDeletion(key, v)
			if err != nil {
				return err
			}
			f.Deletion = &d
		case 4:
			f.PhysicalRows = u
		case 5, 7, 9: // inline row ids / version sequences
		case 6, 8, 10:
			return unsupported(key, "fragment %d: external row-id or version-sequence file (field %d)", f.ID, num)
		default:
			return unsupported(key, "DataFragment field %d (fragment %d)", num, f.ID)
		}
		return nil
	})
	return f, err
}

func decodeDataFile(key string, b []byte) (string, error) {
	var path string
	err := fields(key, "DataFile", b, func(num protowire.Number, _ protowire.Type, v []byte, u uint64) error {
		switch num {
		case 1:
			path = string(v)
		case 2, 3, 4, 5, 6: // fields, column indices, file version, size
		case 7:
			return unsupported(key, "data file with a base id (outside the dataset root)")
		default:
			return unsupported(key, "DataFile field %d", num)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	if path == "" || strings.HasPrefix(path, "/") || strings.Contains(path, "\\") || strings.Contains(path, "://") {
		return "", unsupported(key, "data file path %q", path)
	}
	for _, seg := range strings.Split(path, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return "", unsupported(key, "data file path %q", path)
		}
	}
	return path, nil
}

func decodeDeletion(key string, b []byte) (DeletionFile, error) {
	var d DeletionFile
	err := fields(key, "DeletionFile", b, func(num protowire.Number, _ protowire.Type, _ []byte, u uint64) error {
		switch num {
		case 1:
			if u > 1 {
				return unsupported(key, "deletion file type %d", u)
			}
			d.Type = u
		case 2:
			d.ReadVersion = u
		case 3:
			d.ID = u
		case 4:
			d.NumDeleted = u
		case 7:
			return unsupported(key, "deletion file with a base id (outside the dataset root)")
		default:
			return unsupported(key, "DeletionFile field %d", num)
		}
		return nil
	})
	return d, err
}

// indexTypesRefused name index details whose content can point at files
// outside _indices/<uuid>/ (an external fragment-reuse file, MemWAL
// generations): refused rather than guessed.
var indexTypesRefused = []string{"fragmentreuse", "memwal"}

func decodeIndex(key string, b []byte) (Index, error) {
	var ix Index
	err := fields(key, "IndexMetadata", b, func(num protowire.Number, _ protowire.Type, v []byte, _ uint64) error {
		switch num {
		case 1:
			var raw []byte
			if err := fields(key, "UUID", v, func(n protowire.Number, _ protowire.Type, v []byte, _ uint64) error {
				if n == 1 {
					raw = v
				}
				return nil
			}); err != nil {
				return err
			}
			if len(raw) != 16 {
				return corrupt(key, "index uuid of %d bytes", len(raw))
			}
			h := fmt.Sprintf("%x", raw)
			ix.UUID = h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
		case 3:
			ix.Name = string(v)
		case 6:
			return fields(key, "Any", v, func(n protowire.Number, _ protowire.Type, v []byte, _ uint64) error {
				if n == 1 {
					ix.TypeURL = string(v)
				}
				return nil
			})
		case 2, 4, 5, 7, 8, 10: // fields, dataset version, fragment bitmap, index version, created at, files (all under its directory)
		case 9:
			return unsupported(key, "index with a base id (outside the dataset root)")
		default:
			return unsupported(key, "IndexMetadata field %d", num)
		}
		return nil
	})
	if err != nil {
		return ix, err
	}
	if ix.UUID == "" {
		return ix, corrupt(key, "index %q without uuid", ix.Name)
	}
	lower := strings.ToLower(ix.TypeURL)
	for _, t := range indexTypesRefused {
		if strings.Contains(lower, t) {
			return ix, unsupported(key, "index %q of type %s", ix.Name, ix.TypeURL)
		}
	}
	return ix, nil
}

// NamingScheme is how a manifest file is named.
type NamingScheme int

const (
	// SchemeV1 is _versions/{version}.manifest.
	SchemeV1 NamingScheme = 1
	// SchemeV2 is _versions/{MaxUint64 - version, 20 digits}.manifest
	// (newest first), which LanceDB 0.31 writes.
	SchemeV2 NamingScheme = 2
)

// ParseManifestName parses a name under _versions/ (without the prefix).
func ParseManifestName(name string) (uint64, NamingScheme, bool) {
	digits, ok := strings.CutSuffix(name, ".manifest")
	if !ok || digits == "" || strings.ContainsAny(digits, "/.") {
		return 0, 0, false
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	if err != nil || digits[0] == '+' {
		return 0, 0, false
	}
	if len(digits) == 20 {
		if n == math.MaxUint64 {
			return 0, 0, false
		}
		return math.MaxUint64 - n, SchemeV2, true
	}
	if n == 0 || (len(digits) > 1 && digits[0] == '0') {
		return 0, 0, false
	}
	return n, SchemeV1, true
}

// ManifestName names version v under scheme s (without the _versions/ prefix).
func ManifestName(v uint64, s NamingScheme) string {
	if s == SchemeV2 {
		return fmt.Sprintf("%020d.manifest", math.MaxUint64-v)
	}
	return fmt.Sprintf("%d.manifest", v)
}
