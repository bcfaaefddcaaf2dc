package table

import (
	"context"
	"errors"
	"time"

	"github.com/tablekeep/tablekeep/shared/objstore"
)

// RefreshListed loads version v as the latest, where v is the version a
// listing of this table's manifests (a LIST of _versions/ with MaxKeys 1,
// as Refresh sends) named newest and listedAt is a time taken before that
// LIST was sent: one GET, no LIST. listedAt becomes the handle's read time
// (CachedAt), the time a commit on this base measures its writer bound
// from: v was the latest when the LIST answered, so v was superseded, if
// at all, after listedAt, and the stale-read rule (docs/format.md 8.3)
// holds as for Refresh, whose read time is also taken before its LIST. A
// commit made since only makes v stale, which a commit on it finds as on
// any base (its manifest PUT conflicts). If v's manifest is gone (pruned
// since: the table moved on), it falls back to Refresh.
func (t *Table) RefreshListed(ctx context.Context, v uint64, listedAt time.Time) (*Manifest, error) {
	if v == 0 || listedAt.After(t.opts.Clock.Now()) {
		return t.Refresh(ctx)
	}
	m, err := t.readManifest(ctx, v)
	if errors.Is(err, objstore.ErrNotExist) {
		return t.Refresh(ctx)
	}
	if err != nil {
		return nil, err
	}
	t.setLatest(m, listedAt)
	return m, nil
}
