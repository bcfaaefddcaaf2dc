package maintenance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/queue"
	"github.com/tablekeep/tablekeep/shared/table"
	"github.com/tablekeep/tablekeep/shared/telemetry"
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
	Bytes           int64           // bytes of the keys deleted, where a bounded listing found them
	Requests        objstore.Counts // object-store requests of this invocation
	Duration        time.Duration
}

// Cleaner drains prune ranges. It holds no lock: it deletes only objects no
// retained version references (below the floor, not tagged), so concurrent
// readers and writers are unaffected, and every step is idempotent.
type Cleaner struct {
	Store    objstore.Store
	Tables   Resolver
	Requeue  Enqueuer // where continuations go
	Logger   *slog.Logger
	OpenOpts table.Options // its Clock times the step and stamps the cleanup state
	// Metrics, if set, records VersionsPruned, ObjectsDeleted, BytesDeleted
	// and MessagesFailed.
	Metrics *telemetry.Metrics
}

// Handle processes one message body. Errors that retrying cannot fix wrap
// queue.ErrPermanent (and ErrInvalidMessage, ErrUnknownTable, ErrForeignKey
// or ErrAboveFloor); nothing is deleted for them.
func (c *Cleaner) Handle(ctx context.Context, body []byte) error {
	_, err := c.Clean(ctx, body)
	return err
}

// Clean processes one message body and reports what it did, in one log
// line (step "cleanup") and in the metrics.
func (c *Cleaner) Clean(ctx context.Context, body []byte) (CleanResult, error) {
	clock := c.OpenOpts.Clock
	if clock == nil {
		clock = time.Now
	}
	st := objstore.NewCounting(c.Store)
	start := clock()
	res, err := c.clean(ctx, st, body)
	res.Requests, res.Duration = st.Counts(), clock().Sub(start)
	m := c.Metrics
	m.Count(telemetry.VersionsPruned, res.VersionsDeleted)
	m.Count(telemetry.ObjectsDeleted, res.DataKeys+res.ManifestKeys)
	m.Add(telemetry.BytesDeleted, telemetry.Bytes, float64(res.Bytes))
	if err != nil {
		m.Count(telemetry.MessagesFailed, 1)
	}
	c.log(ctx, res, err)
	return res, err
}

func (c *Cleaner) clean(ctx context.Context, store objstore.Store, body []byte) (CleanResult, error) {
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
	// Exactly the table's root, as the compactor writes it: a root that only
	// normalizes to it ("/wh/t/", "wh/t") is forged (TestHandlersRejectForgedInput).
	if msg.Root != ref.Root {
		return res, fmt.Errorf("%w: %w: message root %q, table %q is at %q", queue.ErrPermanent, ErrForeignKey, msg.Root, msg.Table, ref.Root)
	}
	p := ref.Policy.WithDefaults()
	opts := c.OpenOpts
	opts.Grace = p.Grace
	t, err := table.Open(ctx, store, ref.Root, opts)
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
	rp, err := PlanRange(ctx, t, ref, msg, p.MaxKeysPerRun)
	if err != nil {
		return res, err
	}
	res.ChangeRecords, res.KeptForTags = rp.ChangeRecords, rp.KeptForTags
	res.Bytes = rp.Sizes(ctx, t.Store(), ref.Root, sizeListPages)
	n, reqs, err := deleteKeys(ctx, store, rp.DataKeys, p.DeleteBatch)
	res.DataKeys, res.DeleteRequests = n, reqs
	if err != nil {
		return res, err
	}
	if rp.Continuation != nil {
		res.Continuation = rp.Continuation
		if err := c.Requeue.Send(ctx, [][]byte{rp.Continuation.Encode()}); err != nil {
			return res, fmt.Errorf("enqueue continuation: %w", err)
		}
		return res, nil
	}
	// Data first, then the range's manifests and change records last, so a
	// crash part-way leaves manifests whose files may be gone only below the
	// floor, where nobody may read them.
	res.VersionsDeleted = rp.VersionsDeleted
	n, reqs, err = deleteKeys(ctx, store, rp.MetaKeys, p.DeleteBatch)
	res.ManifestKeys, res.DeleteRequests = n, res.DeleteRequests+reqs
	if err != nil {
		return res, err
	}
	now := time.Now()
	if c.OpenOpts.Clock != nil {
		now = c.OpenOpts.Clock()
	}
	c.markCleaned(ctx, t, msg, now)
	return res, nil
}

// RangePlan is what cleaning one range deletes, read from its change
// records (no deletes): the cleaner executes it; a dry run prints it.
type RangePlan struct {
	Range         RangeMessage
	ChangeRecords int      // change records read
	Missing       int      // change records not found (already processed, or left to the sweep)
	KeptForTags   int      // files kept because a tagged version references them
	DataKeys      []string // data and deletion files (full keys)
	MetaKeys      []string // manifests and change records (full keys), deleted last
	// VersionsDeleted is the number of manifests among MetaKeys.
	VersionsDeleted int
	// Continuation is set when the key budget stopped the plan early: the
	// rest of the range (MetaKeys is then empty).
	Continuation *RangeMessage
	// DataBytes and MetaBytes are filled by Sizes: bytes of the keys found
	// by a bounded listing (SizesComplete reports whether all were found).
	DataBytes, MetaBytes int64
	SizesComplete        bool
}

// Keys is the number of keys the plan deletes.
func (p RangePlan) Keys() int { return len(p.DataKeys) + len(p.MetaKeys) }

// PlanRange reads the change records of msg's range and returns what the
// cleaner deletes for it, stopping once maxKeys data keys are collected
// (0: no bound). Files removed at version r were referenced by versions
// [Since, r-1]; the range [From, To] owns r in [From+1, To+1].
func PlanRange(ctx context.Context, t *table.Table, ref TableRef, msg RangeMessage, maxKeys int) (RangePlan, error) {
	rp := RangePlan{Range: msg}
	// Tags are read after the floor: a tag written before the floor was
	// raised is seen here, and Tag withdraws itself if it lost that race.
	tags, err := t.Tags(ctx)
	if err != nil {
		return rp, err
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
	first := max(msg.From+1, msg.Cursor+1)
	last := first - 1
	for r := first; r <= msg.To+1; r++ {
		if err := ctx.Err(); err != nil {
			return rp, err
		}
		if maxKeys > 0 && len(rp.DataKeys) >= maxKeys {
			break
		}
		cr, err := t.ChangeRecord(ctx, r)
		if errors.Is(err, objstore.ErrNotExist) {
			// Processed and deleted by an earlier delivery, or never written
			// and not repairable now: the orphan sweep covers what remains.
			rp.Missing++
			last = r
			continue
		}
		if err != nil {
			return rp, err
		}
		rp.ChangeRecords++
		for _, rf := range cr.Removed {
			if err := checkDataKey(ref, rf.Key); err != nil {
				return rp, fmt.Errorf("%w: change record %d: %w", queue.ErrPermanent, r, err)
			}
			if taggedIn(rf.Since, r-1) {
				rp.KeptForTags++
				continue
			}
			rp.DataKeys = append(rp.DataKeys, ref.Root+rf.Key)
		}
		last = r
	}
	if last < msg.To+1 {
		cont := msg
		cont.Cursor = last
		rp.Continuation = &cont
		return rp, nil
	}
	// The change records deleted are the ones this range read, [From+1,
	// To+1] (and version 1's, which has nothing to remove): deleting
	// [From, To] removed record From, which the range below still needs,
	// so a reordered delivery left that range's files behind. Records go
	// before the manifests: a crash between the delete batches leaves
	// manifests, which the planner sees and re-plans, never records alone.
	if msg.From == 1 {
		rp.MetaKeys = append(rp.MetaKeys, ref.Root+table.ChangeKey(1))
	}
	for v := msg.From + 1; v <= msg.To+1; v++ {
		rp.MetaKeys = append(rp.MetaKeys, ref.Root+table.ChangeKey(v))
	}
	for v := msg.From; v <= msg.To; v++ {
		if tagged[v] {
			continue
		}
		rp.MetaKeys = append(rp.MetaKeys, ref.Root+table.ManifestKey(v))
		rp.VersionsDeleted++
	}
	return rp, nil
}

// sizeListPages bounds the listing a cleaner does to size what it deletes.
const sizeListPages = 10

// Sizes fills DataBytes and MetaBytes from listings (List requests only:
// the range's manifests and change records, and at most maxPages pages of
// each of data/ and _deletions/) and returns their sum. Keys not found are
// not counted (already deleted, or beyond the bound).
func (rp *RangePlan) Sizes(ctx context.Context, st objstore.Store, root string, maxPages int) int64 {
	want := map[string]bool{}
	for _, k := range rp.DataKeys {
		want[k] = true
	}
	found := 0
	var dataPrefixes []string
	for _, k := range rp.DataKeys {
		rel := strings.TrimPrefix(k, root)
		for _, p := range []string{table.DataPrefix, table.DeletionsPrefix} {
			if strings.HasPrefix(rel, p) && !slices.Contains(dataPrefixes, p) {
				dataPrefixes = append(dataPrefixes, p)
			}
		}
	}
	for _, p := range dataPrefixes {
		seen := 0
		_ = objstore.ListAll(ctx, st, root+p, "", func(o objstore.ObjectInfo) error {
			if want[o.Key] {
				rp.DataBytes += o.Size
				found++
			}
			if seen++; maxPages > 0 && seen >= maxPages*objstore.MaxListKeys {
				return errStopList
			}
			return nil
		})
	}
	meta := map[string]bool{}
	for _, k := range rp.MetaKeys {
		meta[k] = true
	}
	if len(rp.MetaKeys) > 0 {
		r := rp.Range
		// Manifests sort newest first: [To, From] follow ManifestKey(To+1).
		_ = objstore.ListAll(ctx, st, root+table.VersionsPrefix, root+table.ManifestKey(r.To+1), func(o objstore.ObjectInfo) error {
			v, ok := table.ParseManifestKey(strings.TrimPrefix(o.Key, root))
			if ok && v < r.From {
				return errStopList
			}
			if meta[o.Key] {
				rp.MetaBytes += o.Size
				found++
			}
			return nil
		})
		startAfter := root + table.ChangeKey(r.From)
		if r.From == 1 {
			startAfter = ""
		}
		_ = objstore.ListAll(ctx, st, root+table.ChangesPrefix, startAfter, func(o objstore.ObjectInfo) error {
			v, ok := table.ParseChangeKey(strings.TrimPrefix(o.Key, root))
			if ok && v > r.To+1 {
				return errStopList
			}
			if meta[o.Key] {
				rp.MetaBytes += o.Size
				found++
			}
			return nil
		})
	}
	rp.SizesComplete = found == rp.Keys()
	return rp.DataBytes + rp.MetaBytes
}

func (c *Cleaner) log(ctx context.Context, res CleanResult, err error) {
	if c.Logger == nil {
		return
	}
	level, attrs := slog.LevelInfo, []slog.Attr{
		slog.String("step", "cleanup"), slog.String("table", res.Table),
		slog.Group("versions", slog.Uint64("from", res.From), slog.Uint64("to", res.To)),
		slog.Int("change_records", res.ChangeRecords), slog.Int("data_keys", res.DataKeys),
		slog.Int("manifest_keys", res.ManifestKeys), slog.Int("versions_deleted", res.VersionsDeleted),
		slog.Int("kept_for_tags", res.KeptForTags), slog.Bool("continued", res.Continuation != nil),
		telemetry.Requests(res.Requests), slog.Int64("bytes", res.Bytes), slog.Int64("duration_ms", res.Duration.Milliseconds()),
	}
	if err != nil {
		level = slog.LevelError
		attrs = append(attrs, slog.String("err", err.Error()))
	}
	c.Logger.LogAttrs(ctx, level, "maintenance step", attrs...)
}

// cleanupState records the last range a cleaner finished, for status.
type cleanupState struct {
	At      time.Time `json:"at"`
	Through uint64    `json:"through"`
}

const cleanupStateKey = "_maintenance/cleanup-state.json"

// markCleaned records that msg's range was cleaned. Best effort: the
// state only feeds status, and the deletes it reports are done.
func (c *Cleaner) markCleaned(ctx context.Context, t *table.Table, msg RangeMessage, now time.Time) {
	b, _ := json.Marshal(cleanupState{At: now.UTC(), Through: msg.To})
	if err := t.Store().Put(ctx, t.Root()+cleanupStateKey, b); err != nil && c.Logger != nil {
		c.Logger.WarnContext(ctx, "cleanup state not recorded", "table", msg.Table, "err", err)
	}
}

// LastCleanup is when a cleaner last finished a range of t (zero if never).
func LastCleanup(ctx context.Context, t *table.Table) (time.Time, error) {
	b, err := t.Store().Get(ctx, t.Root()+cleanupStateKey)
	if errors.Is(err, objstore.ErrNotExist) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, err
	}
	var s cleanupState
	if err := json.Unmarshal(b, &s); err != nil {
		return time.Time{}, fmt.Errorf("%s%s: %w: %v", t.Root(), cleanupStateKey, table.ErrCorruptObject, err)
	}
	return s.At, nil
}

func deleteKeys(ctx context.Context, store objstore.Store, keys []string, batch int) (deleted, requests int, err error) {
	if len(keys) == 0 {
		return 0, 0, nil
	}
	requests = (len(keys) + batch - 1) / batch
	deleted, err = objstore.DeleteAll(ctx, store, keys, batch)
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
