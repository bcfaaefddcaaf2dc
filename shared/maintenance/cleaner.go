package maintenance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/queue"
	"github.com/tablekeep/tablekeep/shared/table"
)

// TableRef is what a cleaner needs to know about a table.
type TableRef struct {
	Name   string
	Root   string // key prefix in the store, ending in "/"
	Policy Policy
}

// Resolver looks a table up by name (the _registry in production).
type Resolver interface {
	Resolve(ctx context.Context, name string) (TableRef, error)
}

// CleanResult reports one cleaner invocation.
type CleanResult struct {
	Table           string
	From, To        uint64
	ChangeRecords   int // change records read
	DataKeys        int // data and deletion files deleted
	ManifestKeys    int // manifests and change records deleted
	KeptForTags     int // files kept because a tagged version references them
	DeleteRequests  int
	Continuation    *RangeMessage // the rest, if the invocation hit its key budget
	VersionsDeleted int
}

// Cleaner drains prune ranges. It holds no lock: it deletes only objects no
// retained version references (below the floor, not tagged), so concurrent
// readers and writers are unaffected, and every step is idempotent.
type Cleaner struct {
	Store    objstore.Store
	Tables   Resolver
	Requeue  Enqueuer // where continuations go
	Logger   *slog.Logger
	OpenOpts table.Options
}

// Handle processes one message body. Errors that retrying cannot fix wrap
// queue.ErrPermanent (and ErrInvalidMessage, ErrUnknownTable, ErrForeignKey
// or ErrAboveFloor); nothing is deleted for them.
func (c *Cleaner) Handle(ctx context.Context, body []byte) error {
	_, err := c.Clean(ctx, body)
	return err
}

// Clean processes one message body and reports what it did.
func (c *Cleaner) Clean(ctx context.Context, body []byte) (CleanResult, error) {
	var res CleanResult
	msg, err := DecodeRangeMessage(body)
	if err != nil {
		return res, fmt.Errorf("%w: %w", queue.ErrPermanent, err)
	}
	res.Table, res.From, res.To = msg.Table, msg.From, msg.To
	ref, err := c.Tables.Resolve(ctx, msg.Table)
	if err != nil {
		if errors.Is(err, ErrUnknownTable) {
			return res, fmt.Errorf("%w: %w", queue.ErrPermanent, err)
		}
		return res, err
	}
	if table.NormalizeRoot(msg.Root) != ref.Root {
		return res, fmt.Errorf("%w: %w: message root %q, table %q is at %q", queue.ErrPermanent, ErrForeignKey, msg.Root, msg.Table, ref.Root)
	}
	p := ref.Policy.WithDefaults()
	opts := c.OpenOpts
	opts.Grace = p.Grace
	t, err := table.Open(ctx, c.Store, ref.Root, opts)
	if err != nil {
		return res, err
	}
	floor, err := t.Floor(ctx)
	if err != nil {
		return res, err
	}
	if msg.To >= floor {
		return res, fmt.Errorf("%w: %w: [%d, %d] with floor %d", queue.ErrPermanent, ErrAboveFloor, msg.From, msg.To, floor)
	}
	// Tags are read after the floor: a tag written before the floor was
	// raised is seen here, and Tag withdraws itself if it lost that race.
	tags, err := t.Tags(ctx)
	if err != nil {
		return res, err
	}
	tagged := map[uint64]bool{}
	for _, v := range tags {
		tagged[v] = true
	}
	taggedIn := func(lo, hi uint64) bool {
		for v := range tagged {
			if v >= lo && v <= hi {
				return true
			}
		}
		return false
	}

	// Files removed at version r were referenced by versions [Since, r-1];
	// this range owns r in [From+1, To+1].
	first := max(msg.From+1, msg.Cursor+1)
	var keys []string
	last := first - 1
	for r := first; r <= msg.To+1; r++ {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		if len(keys) >= p.MaxKeysPerRun {
			break
		}
		cr, err := t.ChangeRecord(ctx, r)
		if errors.Is(err, objstore.ErrNotExist) {
			// Processed and deleted by an earlier delivery, or never written
			// and not repairable now: the orphan sweep covers what remains.
			last = r
			continue
		}
		if err != nil {
			return res, err
		}
		res.ChangeRecords++
		for _, rf := range cr.Removed {
			if err := checkDataKey(ref, rf.Key); err != nil {
				return res, fmt.Errorf("%w: change record %d: %w", queue.ErrPermanent, r, err)
			}
			if taggedIn(rf.Since, r-1) {
				res.KeptForTags++
				continue
			}
			keys = append(keys, ref.Root+rf.Key)
		}
		last = r
	}
	n, reqs, err := c.deleteKeys(ctx, keys, p.DeleteBatch)
	res.DataKeys, res.DeleteRequests = n, reqs
	if err != nil {
		return res, err
	}
	if last < msg.To+1 {
		cont := msg
		cont.Cursor = last
		res.Continuation = &cont
		if err := c.Requeue.Send(ctx, [][]byte{cont.Encode()}); err != nil {
			return res, fmt.Errorf("enqueue continuation: %w", err)
		}
		c.log(ctx, res)
		return res, nil
	}
	// Data first, then the range's manifests and change records last, so a
	// crash part-way leaves manifests whose files may be gone only below the
	// floor, where nobody may read them.
	var meta []string
	for v := msg.From; v <= msg.To; v++ {
		if tagged[v] {
			continue
		}
		meta = append(meta, ref.Root+table.ManifestKey(v))
		res.VersionsDeleted++
	}
	// The change records deleted are the ones this range read, [From+1,
	// To+1] (and version 1's, which has nothing to remove): deleting
	// [From, To] removed record From, which the range below still needs,
	// so a reordered delivery left that range's files behind.
	if msg.From == 1 {
		meta = append(meta, ref.Root+table.ChangeKey(1))
	}
	for v := msg.From + 1; v <= msg.To+1; v++ {
		meta = append(meta, ref.Root+table.ChangeKey(v))
	}
	n, reqs, err = c.deleteKeys(ctx, meta, p.DeleteBatch)
	res.ManifestKeys, res.DeleteRequests = n, res.DeleteRequests+reqs
	if err != nil {
		return res, err
	}
	c.log(ctx, res)
	return res, nil
}

func (c *Cleaner) log(ctx context.Context, res CleanResult) {
	if c.Logger == nil {
		return
	}
	c.Logger.InfoContext(ctx, "cleanup", "table", res.Table, "from", res.From, "to", res.To,
		"change_records", res.ChangeRecords, "data_keys", res.DataKeys, "manifest_keys", res.ManifestKeys,
		"kept_for_tags", res.KeptForTags, "delete_requests", res.DeleteRequests, "continued", res.Continuation != nil)
}

func (c *Cleaner) deleteKeys(ctx context.Context, keys []string, batch int) (deleted, requests int, err error) {
	if len(keys) == 0 {
		return 0, 0, nil
	}
	requests = (len(keys) + batch - 1) / batch
	deleted, err = objstore.DeleteAll(ctx, c.Store, keys, batch)
	return deleted, requests, err
}

// checkDataKey accepts only data and deletion files of this format, relative
// to the table root: a forged or corrupt record cannot point elsewhere.
func checkDataKey(ref TableRef, rel string) error {
	if strings.Contains(rel, "..") || strings.HasPrefix(rel, "/") || !table.IsDataKey(rel) {
		return fmt.Errorf("%w: %q under %q", ErrForeignKey, rel, ref.Root)
	}
	return objstore.ValidateKey(ref.Root + rel)
}
