package table

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error returned by this package that concerns one
// object wraps one of these and names the object's key.
var (
	ErrNotATable          = errors.New("not a tablekeep table")
	ErrTableExists        = errors.New("table already exists")
	ErrCorruptManifest    = errors.New("corrupt manifest")
	ErrCorruptObject      = errors.New("corrupt object")
	ErrUnsupportedFormat  = errors.New("unsupported format version")
	ErrVersionNotFound    = errors.New("version not found")
	ErrVersionPruned      = errors.New("version pruned")
	ErrSchemaMismatch     = errors.New("schema mismatch")
	ErrInvalidSchema      = errors.New("invalid schema")
	ErrInvalidKey         = errors.New("invalid key")
	ErrNoKeyColumn        = errors.New("table has no key column")
	ErrDuplicateKey       = errors.New("duplicate key in batch")
	ErrNotFound           = errors.New("key not found")
	ErrConflict           = errors.New("commit conflict: retries exhausted")
	ErrStaleRead          = errors.New("read version older than the grace window")
	ErrCommitUnknown      = errors.New("commit outcome unknown")
	ErrTagExists          = errors.New("tag already exists")
	ErrTagNotFound        = errors.New("tag not found")
	ErrInvalidTag         = errors.New("invalid tag name")
	ErrRewriteInvalidated = errors.New("rewrite inputs changed")
	// ErrInvalidGrace: Create with Options.Grace above MaxGrace.
	ErrInvalidGrace = errors.New("grace window out of range")
)

// ObjectError names the object an error is about.
type ObjectError struct {
	Key    string
	Err    error // a sentinel above
	Detail string
}

func (e *ObjectError) Error() string {
	if e.Detail == "" {
		return fmt.Sprintf("%s: %v", e.Key, e.Err)
	}
	return fmt.Sprintf("%s: %v: %s", e.Key, e.Err, e.Detail)
}

func (e *ObjectError) Unwrap() error { return e.Err }

func objErr(key string, err error, detail string) error {
	return &ObjectError{Key: key, Err: err, Detail: detail}
}
