// Package objstore is the small object-store interface tablekeep is built on,
// with a local-directory implementation, an S3 implementation, and wrappers
// that count requests by kind, inject faults, add a remote store's latency
// by request kind (Latency, with named profiles) and measure critical paths;
// and the machinery callers send requests through: the AIMD rate limiter,
// the paced batch deleter (Deleter) and the dry-run overlay (Overlay).
// Pacing is a property of the store: S3, and the wrappers standing for it,
// say the per-prefix rates they take (Paced, RatesOf); a local disk is not
// paced.
//
// Keys are slash-separated and relative to the store's root (a directory on
// disk, a bucket on S3). Every method is exactly one request to the backing
// service, so the counting wrapper's numbers are the service's numbers.
package objstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Sentinel errors; implementations wrap them with the key.
var (
	// ErrNotExist: the key does not exist.
	ErrNotExist = errors.New("object does not exist")
	// ErrExists: PutIfAbsent found the key already present (HTTP 412/409 on S3).
	ErrExists = errors.New("object already exists")
	// ErrTooManyKeys: Delete was given more than MaxDeleteKeys keys.
	ErrTooManyKeys = errors.New("too many keys in one delete request")
	// ErrInvalidKey: a key that is empty, absolute, or contains "." or ".." segments.
	ErrInvalidKey = errors.New("invalid object key")
)

// MaxDeleteKeys is the most keys one Delete request may carry (S3 DeleteObjects limit).
const MaxDeleteKeys = 1000

// MaxListKeys is the most keys one List request returns (S3 ListObjectsV2 limit).
const MaxListKeys = 1000

// ObjectInfo describes one object.
type ObjectInfo struct {
	Key          string
	Size         int64
	LastModified time.Time
}

// ListOptions selects one page of keys in lexical order.
type ListOptions struct {
	Prefix     string
	StartAfter string // return keys strictly greater than this
	MaxKeys    int    // 0 or > MaxListKeys means MaxListKeys
}

// ListPage is one List response.
type ListPage struct {
	Objects   []ObjectInfo
	Truncated bool // more keys follow the last one returned
}

// Store is the object-store interface. Each call is one request.
type Store interface {
	// Get returns the whole object, or an error wrapping ErrNotExist.
	Get(ctx context.Context, key string) ([]byte, error)
	// Head returns the object's metadata, or an error wrapping ErrNotExist.
	Head(ctx context.Context, key string) (ObjectInfo, error)
	// Put writes the object atomically: readers see the old object or the new
	// one, never a part.
	Put(ctx context.Context, key string, data []byte) error
	// PutIfAbsent writes the object only if the key does not exist, atomically
	// with respect to other PutIfAbsent calls; otherwise it returns an error
	// wrapping ErrExists.
	PutIfAbsent(ctx context.Context, key string, data []byte) error
	// List returns one page of keys under a prefix, in lexical order.
	List(ctx context.Context, opts ListOptions) (ListPage, error)
	// Delete removes up to MaxDeleteKeys keys in one request. A key that is
	// already gone counts as deleted. Per-key failures come back as a
	// *DeleteError listing them; other keys were deleted.
	Delete(ctx context.Context, keys []string) error
}

// KeyError is one key that a Delete request failed to remove.
type KeyError struct {
	Key     string
	Code    string
	Message string
}

// DeleteError reports the keys a Delete request did not remove.
type DeleteError struct {
	Failed []KeyError
}

func (e *DeleteError) Error() string {
	if len(e.Failed) == 0 {
		return "delete: no keys failed"
	}
	f := e.Failed[0]
	return fmt.Sprintf("delete: %d keys failed, first %q: %s %s", len(e.Failed), f.Key, f.Code, f.Message)
}

// ValidateKey rejects keys that could escape a root or alias another key.
func ValidateKey(key string) error {
	if key == "" || strings.HasPrefix(key, "/") || strings.Contains(key, "\\") || strings.ContainsRune(key, 0) {
		return fmt.Errorf("%w: %q", ErrInvalidKey, key)
	}
	for _, seg := range strings.Split(key, "/") {
		if seg == "." || seg == ".." {
			return fmt.Errorf("%w: %q", ErrInvalidKey, key)
		}
	}
	return nil
}

// ListAll calls fn for every object under prefix, page by page (one List
// request per page), stopping early if fn returns an error.
func ListAll(ctx context.Context, s Store, prefix, startAfter string, fn func(ObjectInfo) error) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		page, err := s.List(ctx, ListOptions{Prefix: prefix, StartAfter: startAfter})
		if err != nil {
			return err
		}
		for _, o := range page.Objects {
			if err := fn(o); err != nil {
				return err
			}
		}
		if !page.Truncated || len(page.Objects) == 0 {
			return nil
		}
		startAfter = page.Objects[len(page.Objects)-1].Key
	}
}

// DeleteAll deletes keys in requests of at most batch keys (1..MaxDeleteKeys),
// checking ctx between requests. It returns the number of keys deleted; on a
// per-key failure it continues with the next batch and returns a *DeleteError
// collecting every failed key.
func DeleteAll(ctx context.Context, s Store, keys []string, batch int) (int, error) {
	if batch <= 0 || batch > MaxDeleteKeys {
		batch = MaxDeleteKeys
	}
	deleted := 0
	var failed []KeyError
	for start := 0; start < len(keys); start += batch {
		if err := ctx.Err(); err != nil {
			return deleted, err
		}
		end := min(start+batch, len(keys))
		err := s.Delete(ctx, keys[start:end])
		var de *DeleteError
		switch {
		case err == nil:
			deleted += end - start
		case errors.As(err, &de):
			deleted += end - start - len(de.Failed)
			failed = append(failed, de.Failed...)
		default:
			return deleted, err
		}
	}
	if len(failed) > 0 {
		return deleted, &DeleteError{Failed: failed}
	}
	return deleted, nil
}
