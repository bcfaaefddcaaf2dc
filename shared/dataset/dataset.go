package dataset

import (
	"strconv"
	"time"
)

// VersionInfo is one version as listed.
type VersionInfo struct {
	Version uint64
	// Time is when its manifest was written (store time, or the format's
	// own timestamp).
	Time          time.Time
	ManifestBytes int64
	// GraceFrom is when the version's grace window starts: a version is
	// retained while now - GraceFrom is at most the retention grace
	// (tablekeep: when its successor was written; Lance: its own Time, as
	// cleanup_old_versions(older_than)). Zero: not started (the latest).
	GraceFrom time.Time
}

// OpKind is what a commit did.
type OpKind byte

const (
	OpCreate  OpKind = 1
	OpAppend  OpKind = 2
	OpDelete  OpKind = 3
	OpUpsert  OpKind = 4
	OpRewrite OpKind = 5
	OpRestore OpKind = 6
	// OpAddColumns appends nullable columns to the schema (AddColumns);
	// fragments are unchanged.
	OpAddColumns OpKind = 7
	// OpFlush moves a format-3 manifest's inline rows into a data file.
	OpFlush OpKind = 8
)

func (k OpKind) String() string {
	switch k {
	case OpCreate:
		return "create"
	case OpAppend:
		return "append"
	case OpDelete:
		return "delete"
	case OpUpsert:
		return "upsert"
	case OpRewrite:
		return "rewrite"
	case OpRestore:
		return "restore"
	case OpAddColumns:
		return "add-columns"
	case OpFlush:
		return "flush"
	}
	return "op(" + strconv.Itoa(int(k)) + ")"
}

// RemovedFile is an object a commit stopped referencing, with the first
// version that referenced it: the object was referenced by exactly the
// versions [Since, removing version - 1].
type RemovedFile struct {
	Key   string // relative to the dataset's root
	Since uint64
}

// ChangeRecord is the small per-version record of what a commit added and
// removed, so that cleanup never reads old full manifests.
type ChangeRecord struct {
	Version    uint64
	CommitTime time.Time
	Op         OpKind
	Added      []string // keys relative to the dataset's root
	Removed    []RemovedFile
}

// Stats summarises a dataset's latest version and its stored history.
type Stats struct {
	Version             uint64 `json:"version"`
	FormatVersion       uint64 `json:"format_version,omitempty"` // tablekeep: the format its commits write (3 or 2)
	Versions            int    `json:"versions"`                 // manifests stored
	Fragments           int    `json:"fragments"`
	Rows                uint64 `json:"rows"`
	InlineRows          uint64 `json:"inline_rows"`  // of Rows, those kept in the manifest (format 3), in no data file
	DeletedRows         uint64 `json:"deleted_rows"` // rows masked by deletion vectors (and inline deletions) in the latest version
	DeletionFiles       int    `json:"deletion_files"`
	ManifestBytes       int64  `json:"manifest_bytes"` // all stored manifests
	LatestManifestBytes int64  `json:"latest_manifest_bytes"`
	DataBytes           uint64 `json:"data_bytes"` // data files the latest version references
}
