package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/tablekeep/tablekeep/shared/objstore"
)

// Inline run records (InlineRunKey; the AWS fan-out, docs/aws.md): one per
// scheduled run, written by the run before it maintains tables inline and
// deleted by it when it is done with them. Found by a later run, a record
// names the tables a run was working on when it died (or is still working
// on, until its deadline).

// InlineRun is the body of an inline run record.
type InlineRun struct {
	At     time.Time `json:"at"`    // on the compactor's clock
	Until  time.Time `json:"until"` // the run's deadline
	Tables []string  `json:"tables"`

	// Key is the record's key (not stored).
	Key string `json:"-"`
}

// ReadInlineRuns reads every record (one LIST, one GET per record). A
// record that is not JSON is reported to bad and read as a run naming no
// table.
func ReadInlineRuns(ctx context.Context, store objstore.Store, root string, bad func(key string, err error)) ([]InlineRun, error) {
	prefix := InlineRunsPrefix(root)
	var out []InlineRun
	err := objstore.ListAll(ctx, store, prefix, "", func(o objstore.ObjectInfo) error {
		rest := strings.TrimPrefix(o.Key, prefix)
		if rest != ".json" && !strings.HasPrefix(rest, "/") {
			return nil // another name sharing the prefix: not a record
		}
		b, err := store.Get(ctx, o.Key)
		if errors.Is(err, objstore.ErrNotExist) {
			return nil // its run finished since the list
		}
		if err != nil {
			return err
		}
		var r InlineRun
		if err := json.Unmarshal(b, &r); err != nil {
			bad(o.Key, err)
			r = InlineRun{}
		}
		r.Key = o.Key
		out = append(out, r)
		return nil
	})
	return out, err
}

// PutInlineRun writes a run's record, keyed by its start and invocation
// id (characters other than letters, digits and '-' become '_'), and
// returns the key.
func PutInlineRun(ctx context.Context, store objstore.Store, root, id string, r InlineRun) (string, error) {
	id = strings.Map(func(c rune) rune {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' {
			return c
		}
		return '_'
	}, id)
	key := InlineRunKey(root, r.At.UnixNano(), id)
	b, err := json.Marshal(r)
	if err != nil {
		return "", err
	}
	if err := store.Put(ctx, key, b); err != nil {
		return "", err
	}
	return key, nil
}

// DeleteInlineRuns deletes records by key.
func DeleteInlineRuns(ctx context.Context, store objstore.Store, keys []string) error {
	_, err := objstore.DeleteAll(ctx, store, keys, objstore.MaxDeleteKeys)
	return err
}
