package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tablekeep/tablekeep/shared/objstore"
)

// Retry markers (RetryKey; the AWS fan-out, docs/aws.md): a table whose
// work is in the compaction queue (a retry after a failure, or a
// continuation) has a marker, written when the job is sent and deleted when
// a job finishes the table. A marker is a hint only: a missing one means
// the table may be maintained inline once more, a stale one a duplicate
// job; both are safe.

// Marker is the body of a retry marker.
type Marker struct {
	Table   string    `json:"table"`
	Attempt int       `json:"attempt"`
	Reason  string    `json:"reason"`
	Error   string    `json:"error,omitempty"`
	At      time.Time `json:"at"` // on the compactor's clock
	// NotBefore is the retry job's not-before (retries only).
	NotBefore time.Time `json:"not_before,omitzero"`
}

// PutMarker writes m's table's marker (one PUT).
func PutMarker(ctx context.Context, store objstore.Store, root string, m Marker) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return store.Put(ctx, RetryKey(root, m.Table), b)
}

// ReadMarker reads one table's marker (one GET); ok false if it has none.
// A body that is not JSON is a stale marker (zero At).
func ReadMarker(ctx context.Context, store objstore.Store, root, name string) (Marker, bool, error) {
	b, err := store.Get(ctx, RetryKey(root, name))
	if errors.Is(err, objstore.ErrNotExist) {
		return Marker{}, false, nil
	}
	if err != nil {
		return Marker{}, false, err
	}
	var m Marker
	if json.Unmarshal(b, &m) != nil {
		return Marker{Table: name}, true, nil
	}
	m.Table = name
	return m, true, nil
}

// DeleteMarker deletes a table's marker (one DELETE).
func DeleteMarker(ctx context.Context, store objstore.Store, root, name string) error {
	return store.Delete(ctx, []string{RetryKey(root, name)})
}

// ErrMarkerUnreadable and ErrNotMarker are what ReadMarkers reports to its
// bad callback: a marker whose GET failed for a reason other than "not
// found" (a permission error on that one object), and one whose body is
// not JSON.
var (
	ErrMarkerUnreadable = errors.New("retry marker unreadable")
	ErrNotMarker        = errors.New("retry marker is not a marker")
)

// ReadMarkers reads every marker (LIST pages of RetryPrefix, one GET per
// marker: only tables in retry have one). Each marker that is not read as
// written is reported to bad: one whose GET fails (not "not found") is
// dated by its store time, the LIST's LastModified (ErrMarkerUnreadable: a
// marker is rewritten at every write, so that is its At to within the
// clock skew; taking it for written now made it fresh for ever, its table
// "in retry" with no job), and one whose body is not JSON is stale (zero
// At, ErrNotMarker).
func ReadMarkers(ctx context.Context, store objstore.Store, root string, bad func(key string, err error)) (map[string]Marker, error) {
	out := map[string]Marker{}
	prefix := RetryPrefix(root)
	after := ""
	for {
		page, err := store.List(ctx, objstore.ListOptions{Prefix: prefix, StartAfter: after})
		if err != nil {
			return nil, fmt.Errorf("list retry markers: %w", err)
		}
		for _, o := range page.Objects {
			name := strings.TrimPrefix(o.Key, prefix)
			after = o.Key
			m := Marker{Table: name}
			b, err := store.Get(ctx, o.Key)
			switch {
			case errors.Is(err, objstore.ErrNotExist):
				continue // deleted since the list: its job finished
			case err != nil:
				bad(o.Key, fmt.Errorf("%w: %w", ErrMarkerUnreadable, err))
				m.At = o.LastModified
			default:
				if jerr := json.Unmarshal(b, &m); jerr != nil {
					bad(o.Key, fmt.Errorf("%w: %w", ErrNotMarker, jerr))
					m = Marker{} // stale
				}
				m.Table = name
			}
			out[name] = m
		}
		if !page.Truncated || len(page.Objects) == 0 {
			return out, nil
		}
	}
}
