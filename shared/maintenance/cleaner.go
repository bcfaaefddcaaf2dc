package maintenance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tablekeep/tablekeep/shared/clock"
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
	// Format is "" for a tablekeep table, else the format of the dataset
	// ("lance"): the SourceOpener (formats.Open) opens its Source.
	Format string
}

// Resolver looks a table up by name (the _registry in production).
type Resolver interface {
	Resolve(ctx context.Context, name string) (TableRef, error)
}

// CleanResult reports one cleaner invocation.
type CleanResult struct {
	Table         string
	From, To      uint64
	ChangeRecords int // change records read
	DataKeys      int // data and deletion files deleted
	ManifestKeys  int // manifests and change records deleted
	KeptForTags   int // files kept because a tagged version references them
	// KeptYoung: files a change record named that were not older than the
	// writers' window (Source.Grace: R >= W + SafetyMargin) when the
	// cleaner read its clock, kept (left to the orphan sweep).
	KeptYoung      int
	DeleteRequests int
	Continuation   *RangeMessage // the rest, if the invocation hit its key budget or StopBy
	// Deferred: the message arrived after StopBy and was sent back
	// unchanged, with nothing read or deleted.
	Deferred        bool
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
	// Limits bound the requests in flight and their rates (zero: defaults).
	Limits CleanerLimits
	// GetLimit and DeleteLimit pace change-record GETs (per second) and
	// deleted keys (per second); nil: built from Limits on first use and
	// kept for the Cleaner's life, so that a SlowDown seen by one message
	// slows the next. Share one Cleaner (or limiter) per worker.
	GetLimit, DeleteLimit *objstore.AIMDLimiter
	// StopBy, if set, is when this cleaner stops starting work (read on
	// OpenOpts.Clock): a message found after it is sent back unchanged
	// (CleanResult.Deferred) and acknowledged; a range being read stops
	// at the next change record and its rest goes back as a continuation.
	// The caller leaves time after StopBy for the deletes in flight, the
	// range's manifests and the continuation's send.
	StopBy time.Time
	// Sources opens every registered dataset as a Source (formats.Open);
	// nil: OpenTableSource (tablekeep's own format only: a message for
	// another fails permanently with ErrUnknownFormat, nothing deleted).
	// formats.NewCleaner wires formats.Open.
	Sources SourceOpener
	// SkipSizes leaves the deleted bytes unmeasured (CleanResult.Bytes 0):
	// no listing of data/, _versions/ and _changes/ for their sizes, 3
	// LISTs a message fewer. The prune plan still logs the manifest bytes
	// it makes prunable. The Lambda cleaner sets it; the CLI, which
	// reports bytes, does not.
	SkipSizes bool

	once sync.Once
}

func (c *Cleaner) limiters() (get, del *objstore.AIMDLimiter) {
	c.once.Do(func() {
		l := c.Limits.withDefaults()
		if c.GetLimit == nil {
			c.GetLimit = objstore.NewGetLimiter(c.Store, l.GetRate, l.Reads)
		}
		if c.DeleteLimit == nil {
			c.DeleteLimit = objstore.NewDeleteLimiter(c.Store, l.DeleteRate)
		}
	})
	return c.GetLimit, c.DeleteLimit
}

func (c *Cleaner) now() time.Time {
	return clock.Or(c.OpenOpts.Clock).Now()
}

func (c *Cleaner) pastStop() bool { return !c.StopBy.IsZero() && !c.now().Before(c.StopBy) }

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
	clk := clock.Or(c.OpenOpts.Clock)
	st := objstore.NewCounting(c.Store)
	start := clk.Now()
	res, err := c.clean(ctx, st, body)
	res.Requests, res.Duration = st.Counts(), clk.Now().Sub(start)
	m := c.Metrics
	m.Count(telemetry.VersionsPruned, res.VersionsDeleted)
	m.Count(telemetry.ObjectsDeleted, res.DataKeys+res.ManifestKeys)
	if !c.SkipSizes {
		m.Add(telemetry.BytesDeleted, telemetry.Bytes, float64(res.Bytes))
	}
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
	if c.pastStop() {
		// Not started: sent back as it came (a continuation at its start)
		// and acknowledged, so that running out of time never counts a
		// receive towards the dead-letter queue.
		if err := c.Requeue.Send(ctx, [][]byte{msg.Encode()}); err != nil {
			return res, fmt.Errorf("defer message: %w", err)
		}
		res.Continuation, res.Deferred = &msg, true
		return res, nil
	}
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
	src, err := openWith(ctx, c.Sources, store, ref)
	if errors.Is(err, ErrUnknownFormat) {
		return res, fmt.Errorf("%w: %w", queue.ErrPermanent, err)
	}
	if err != nil {
		return res, err
	}
	// The cleanup state (Runner stats' LastCleanup) goes under the
	// Source's StateRoot.
	return c.cleanRange(ctx, store, sourceJob(src, ref, msg, src.StateRoot(), !c.SkipSizes))
}

// floorOfThisHistory is the planner's trust rule (trustFloor) at the
// cleaner, just before deleting: the floor the range was checked against
// is the highest stamped marker's (sourceJob), and it is trusted only when
// its version's manifest still has the marker's stamp (docs/format.md 2.4).
// A manifest with another stamp is another history's version, written
// when the table was removed and created again at the root: ErrStaleFloor.
// A manifest no longer stored proves nothing: ErrStaleFloor too (retried:
// the next delivery reads the floor again). Nothing is deleted either way.
// One HEAD, run beside the guard's read (no added round trip).
func floorOfThisHistory(ctx context.Context, store objstore.Store, root string, fr table.FloorRead) error {
	sf, _, ok := fr.StampedFloor()
	if !ok {
		return fmt.Errorf("%w: %s: no stamped floor marker; nothing deleted", ErrFloorUnproven, root)
	}
	info, err := table.ManifestInfoAt(ctx, store, root, sf)
	if errors.Is(err, objstore.ErrNotExist) {
		return fmt.Errorf("%w: %s: the manifest of the floor's version %d is not stored (another history's floor, or the floor rose and that version was pruned since it was read); nothing deleted",
			ErrStaleFloor, root, sf)
	}
	if err != nil {
		return err
	}
	proof := fr.Prove(func(v uint64) (int64, time.Time, bool) { return info.Size, info.LastModified, v == sf })
	if proof.Other != "" || proof.Floor != sf {
		return fmt.Errorf("%w (%s)", staleFloor(root, sf, 0), proof.Other)
	}
	return nil
}

// rangeJob is one range for cleanRange: how its records are read, what is
// checked before any is consumed, and where its cleanup state goes.
type rangeJob struct {
	ref    TableRef
	msg    RangeMessage
	reader rangeReader
	// ready checks the floor and returns the tagged versions (scanRange).
	ready func(context.Context) (map[uint64]bool, error)
	// sizes, if set (a SizeLister's), are the data prefixes listed for
	// the bytes deleted, with the range's manifests and records
	// (tablekeep's layout).
	sizes []string
	// stateRoot is where markCleaned records a finished range ("": not
	// recorded).
	stateRoot string
	// root is the prefix the reader's keys start with; latest reads the
	// latest version for the guard (guard.go); floor is the floor ready
	// read; check, if set, is the Source's CleanChecker.
	root   string
	latest latestFunc
	floor  *uint64
	check  func(ctx context.Context, keys []string) error
	// listed, if set, is a Source whose readers list versions below the
	// floor (Lance): manifests go first (manifestsFirst).
	listed ListedBelowFloor
	// fileGrace is how old a file must be before the cleaner deletes it
	// (cleanage.go), given the policy's grace: read after the guard's
	// load (a tablekeep table's W is its latest manifest's).
	fileGrace func(policyGrace time.Duration) time.Duration
}

// cleanRange cleans one range, whatever the format: the records read (and
// checked) through j.reader, Limits.Reads at a time, paced by GetLimit and
// stopped at StopBy or MaxKeysPerRun; the data keys deleted in batches,
// paced by DeleteLimit, SlowDown answers retried; a continuation for the
// rest; else the records, then the manifests.
func (c *Cleaner) cleanRange(ctx context.Context, store objstore.Store, j rangeJob) (CleanResult, error) {
	ref, msg := j.ref, j.msg
	res := CleanResult{Table: msg.Table, From: msg.From, To: msg.To}
	p := ref.Policy.WithDefaults()
	lim := c.Limits.withDefaults()
	getLimit, delLimit := c.limiters()
	// Every change record of the slice is read (and checked) before
	// anything is deleted: a forged record deletes nothing, not even the
	// keys listed before it (TestForgedChangeRecord). The size listings
	// run meanwhile.
	var onKey func(string)
	var sz *sizer
	if j.sizes != nil {
		sz = newSizer(ctx, store, ref.Root, j.sizes, sizeListPages)
		onKey = sz.see
	}
	rp, err := scanRange(ctx, j.reader, msg, scanOpts{
		maxKeys: p.MaxKeysPerRun, reads: lim.Reads, stop: c.pastStop, onKey: onKey,
		limit: getLimit, retries: lim.Retries,
	}, j.ready)
	if sz != nil {
		rp.DataBytes, _ = sz.dataBytes(rp.DataKeys)
	}
	if err != nil {
		return res, err
	}
	res.ChangeRecords, res.KeptForTags = rp.ChangeRecords, rp.KeptForTags
	// Just before anything is deleted: the latest version, read from the
	// store, must not be among the keys (and a format's own check), else
	// the whole message deletes nothing; every delete below goes through
	// the guarded store, which checks each batch again.
	var early []string
	if j.listed != nil {
		if early, err = j.manifestsFirst(ctx, rp); err != nil {
			return res, err
		}
	}
	all := append(slices.Clip(early), rp.DataKeys...)
	if rp.Continuation == nil {
		all = append(all, rp.MetaKeys...)
	}
	guard := newLatestGuard(j.root, j.latest)
	// The age rule (cleanage.go): the clock read before the guard reads
	// the latest version; the data keys' ages read beside it; a key not
	// older than the file grace is kept (left to the sweep).
	now := c.now()
	var ages *keyAges
	if err := inParallel(ctx,
		func(ctx context.Context) error { return j.beforeDelete(ctx, guard, all) },
		func(ctx context.Context) (err error) {
			ages, err = readAges(ctx, store, rp.DataKeys, getLimit, lim.Reads, lim.Retries)
			return err
		}); err != nil {
		return res, err
	}
	var young []string
	rp.DataKeys, young = ages.old(now, j.fileGrace(p.Grace))
	if res.KeptYoung = len(young); res.KeptYoung > 0 {
		if sz != nil {
			rp.DataBytes, _ = sz.dataBytes(rp.DataKeys)
		}
		if c.Logger != nil {
			c.Logger.WarnContext(ctx, "files named by change records kept: younger than the file grace (a corrupt change record?)",
				"table", msg.Table, "from", msg.From, "to", msg.To, "kept", len(young), "first", young[0], "grace", j.fileGrace(p.Grace))
		}
	}
	store = guardedStore{store, guard}
	// The range's manifests and change records are listed for their sizes
	// while the data keys are deleted (only when the range finishes here).
	var metaBytes int64
	var metaDone chan struct{}
	if rp.Continuation == nil && j.sizes != nil {
		metaDone = make(chan struct{})
		go func() {
			defer close(metaDone)
			metaBytes = rp.metaSizes(ctx, store, ref.Root)
		}()
	}
	// Where readers list versions below the floor (Lance), the manifests
	// of every version whose files go now are deleted first, and a crash
	// leaves orphan files (the redelivery, the next pass's HalfCleaned
	// range or the sweep delete them), never a listed version without its
	// files.
	if len(early) > 0 {
		edel := objstore.NewDeleter(ctx, store, objstore.DeleterOptions{Batch: p.DeleteBatch, InFlight: lim.Deletes, Limit: delLimit, Retries: lim.Retries})
		edel.Add(early...)
		n, reqs, err := edel.Wait()
		res.ManifestKeys, res.DeleteRequests = n, reqs
		if err != nil {
			return res, err
		}
	}
	// Data keys in batches of DeleteBatch, Limits.Deletes requests in
	// flight, in any order: each is unreferenced by every retained version.
	del := objstore.NewDeleter(ctx, store, objstore.DeleterOptions{Batch: p.DeleteBatch, InFlight: lim.Deletes, Limit: delLimit, Retries: lim.Retries})
	del.Add(rp.DataKeys...)
	n, reqs, err := del.Wait()
	res.DataKeys, res.DeleteRequests = n, res.DeleteRequests+reqs
	res.Bytes = rp.DataBytes
	if metaDone != nil {
		<-metaDone
	}
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
	// Data first, then the range's change records, then its manifests: a
	// crash part-way leaves manifests whose files may be gone only below
	// the floor, where nobody may read them, and which the planner sees and
	// re-plans; never change records alone (the prune planner relies on
	// it). The meta keys are cut into batches in that order, as a serial
	// sender would send them; the batches holding only change records go
	// out together first, then the rest together (a range of 1,000
	// versions: 3 requests in two round trips; a small range: 1 request).
	res.VersionsDeleted = rp.VersionsDeleted
	res.Bytes += metaBytes
	phases := rp.metaPhases(p.DeleteBatch)
	if j.listed != nil {
		// The manifests went first: the records are left, in one phase.
		phases = [][][]string{slices.Collect(slices.Chunk(rp.MetaKeys[:rp.recordKeys], max(1, min(p.DeleteBatch, objstore.MaxDeleteKeys))))}
	}
	for _, phase := range phases {
		mdel := objstore.NewDeleter(ctx, store, objstore.DeleterOptions{Batch: p.DeleteBatch, InFlight: lim.Deletes, Limit: delLimit, Retries: lim.Retries})
		for _, batch := range phase {
			mdel.Add(batch...)
			mdel.Flush()
		}
		n, reqs, err = mdel.Wait()
		res.ManifestKeys, res.DeleteRequests = res.ManifestKeys+n, res.DeleteRequests+reqs
		if err != nil {
			return res, err
		}
	}
	if j.stateRoot != "" {
		c.markCleaned(ctx, store, j.stateRoot, msg, c.now())
	}
	return res, nil
}

// manifestsFirst returns the manifests a ListedBelowFloor's range deletes
// before its data keys: every untagged manifest of the range once it is
// finished, else those of [max(From, Cursor), consumed-1] (a file removed
// at record r was referenced by versions [Since, r-1] only), and, when a
// file planned for deletion was referenced since a version below From
// (its run crosses into the range below), the stored untagged manifests
// of [firstSince, From-1] too (StoredIn: one LIST on inverted
// names), so that no listed version keeps a reference to a file deleted
// here, whatever order the ranges are cleaned in. Those versions are
// below the floor and untagged: pruned anyway; their own range still
// finds their files through its change records, which go last.
func (j rangeJob) manifestsFirst(ctx context.Context, rp RangePlan) ([]string, error) {
	msg := rp.Range
	var out []string
	add := func(vs ...uint64) error {
		for _, v := range vs {
			if rp.tagged[v] {
				continue
			}
			keys, err := j.reader.manifestKeys(ctx, v)
			if err != nil {
				return err
			}
			out = append(out, keys...)
		}
		return nil
	}
	if rp.Continuation == nil {
		out = slices.Clone(rp.MetaKeys[rp.recordKeys:])
	} else {
		for v := max(msg.From, msg.Cursor); v+1 <= rp.consumed && v <= msg.To; v++ {
			if err := add(v); err != nil {
				return nil, err
			}
		}
	}
	if len(rp.DataKeys) == 0 || rp.firstSince == 0 || rp.firstSince >= msg.From {
		return out, nil
	}
	below, err := j.listed.StoredIn(ctx, rp.firstSince, msg.From-1)
	if err != nil {
		return nil, fmt.Errorf("list the versions below %d of %s: %w", msg.From, j.root, err)
	}
	return out, add(below...)
}

// beforeDelete is the check just before a range's keys are deleted: the
// latest version read (guard) at once with the format's CleanChecker; a
// floor above the latest version (ErrStaleFloor) or a key of the latest
// version (ErrLatestReferenced) refuses the message, retryably.
func (j rangeJob) beforeDelete(ctx context.Context, guard *latestGuard, keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	fns := []func(context.Context) error{guard.ensure}
	if j.check != nil {
		fns = append(fns, func(ctx context.Context) error {
			if err := j.check(ctx, keys); err != nil {
				return fmt.Errorf("check %s before deleting: %w", j.root, err)
			}
			return nil
		})
	}
	if err := inParallel(ctx, fns...); err != nil {
		return err
	}
	if j.floor != nil && *j.floor > guard.Latest() {
		return fmt.Errorf("%w: %s: floor %d, latest version %d; nothing deleted (reset: see docs/reliability.md)", ErrStaleFloor, j.root, *j.floor, guard.Latest())
	}
	return guard.check(ctx, keys)
}

// versionSet is the set of versions tags name.
func versionSet(tags map[string]uint64) map[uint64]bool {
	tagged := map[uint64]bool{}
	for _, v := range tags {
		tagged[v] = true
	}
	return tagged
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
	recordKeys      int // MetaKeys[:recordKeys] are change records
	// tagged are the tagged versions ready read; consumed is the last
	// change record consumed; firstSince is the lowest Since of a file
	// planned for deletion (0: none).
	tagged     map[uint64]bool
	consumed   uint64
	firstSince uint64
	// Continuation is set when the key budget (or the cleaner's StopBy)
	// stopped the plan early: the rest of the range (MetaKeys is then
	// empty).
	Continuation *RangeMessage
	// DataBytes and MetaBytes are filled by Sizes: bytes of the keys found
	// by a bounded listing (SizesComplete reports whether all were found).
	DataBytes, MetaBytes int64
	SizesComplete        bool
}

// Keys is the number of keys the plan deletes.
func (p RangePlan) Keys() int { return len(p.DataKeys) + len(p.MetaKeys) }

// PlanRange reads the change records of msg's range from src and returns
// what the cleaner deletes for it (no deletes), with the cleaner's rules
// (scanRange), stopping once maxKeys data keys are collected (0: no bound)
// and returning the rest as a continuation. Files removed at version r
// were referenced by versions [Since, r-1], and are kept if a tagged
// version is among them; the range [From, To] owns the records
// [From+1, To+1] and the untagged manifests [From, To]. A directory key
// (ending in "/") is expanded by listing it. A dry run's
// TableReport.Source plans from the change records it derived; on a
// format-3 table, from those its record index names.
func PlanRange(ctx context.Context, src Source, msg RangeMessage, maxKeys int) (RangePlan, error) {
	if tb, ok := src.(TableBacked); ok && msg.Records == nil {
		msg.Records = indexedRecords(tb.Table().Cached(), msg) // a dry run's range, as ApplyPrune would send it
	}
	return scanRange(ctx, sourceReader{src}, msg, scanOpts{maxKeys: maxKeys, reads: DefaultCleanerReads},
		func(ctx context.Context) (map[uint64]bool, error) {
			tags, err := src.Tags(ctx)
			return versionSet(tags), err
		})
}

// indexedRecords is RangeMessage.Records for msg from m's record index:
// the versions of [From+1, To+1] with a change record, or nil unless m is
// format 3 and its index covers them all (at most MaxMessageRecords).
func indexedRecords(m *table.Manifest, msg RangeMessage) *[]uint64 {
	if m == nil || m.Format < 3 || msg.To >= m.Version {
		return nil
	}
	recs := []uint64{}
	for v := msg.From + 1; v <= msg.To+1; v++ {
		has, known := m.HasRecord(v)
		if !known {
			return nil
		}
		if has {
			if recs = append(recs, v); len(recs) > MaxMessageRecords {
				return nil
			}
		}
	}
	return &recs
}

// metaPhases cuts MetaKeys (change records first, then manifests) into
// delete batches of at most batch keys, in order, and groups them into two
// phases: the batches holding only change records, then the others.
func (p RangePlan) metaPhases(batch int) [][][]string {
	if batch <= 0 || batch > objstore.MaxDeleteKeys {
		batch = objstore.MaxDeleteKeys
	}
	var records, rest [][]string
	n := 0
	for keys := range slices.Chunk(p.MetaKeys, batch) {
		if n += len(keys); n <= p.recordKeys {
			records = append(records, keys)
		} else {
			rest = append(rest, keys)
		}
	}
	return [][][]string{records, rest}
}

// sizeListPages bounds the listing a cleaner does to size what it deletes:
// the first 2 pages (2,000 keys) of data/ and of _deletions/, listed while
// the change records are read. Exact for tables of up to 2,000 data files;
// a bigger table's bytes are counted where found (its deleted keys spread
// over the whole prefix, so no bounded listing finds them all, and ten
// pages took 10 round trips a message for a third of them at 34,000
// versions).
const sizeListPages = 2

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
	rp.SizesComplete = found == len(rp.DataKeys)
	rp.metaSizes(ctx, st, root)
	return rp.DataBytes + rp.MetaBytes
}

// metaSizes fills MetaBytes from listings of the range's manifests and
// change records, and returns it; SizesComplete stays true only if every
// meta key was found too.
func (rp *RangePlan) metaSizes(ctx context.Context, st objstore.Store, root string) int64 {
	found := 0
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
	rp.SizesComplete = rp.SizesComplete && found == len(rp.MetaKeys)
	return rp.MetaBytes
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
		slog.Int("kept_for_tags", res.KeptForTags), slog.Int("kept_young", res.KeptYoung), slog.Bool("continued", res.Continuation != nil),
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
func (c *Cleaner) markCleaned(ctx context.Context, st objstore.Store, root string, msg RangeMessage, now time.Time) {
	b, _ := json.Marshal(cleanupState{At: now.UTC(), Through: msg.To})
	if err := st.Put(ctx, table.NormalizeRoot(root)+cleanupStateKey, b); err != nil && c.Logger != nil {
		c.Logger.WarnContext(ctx, "cleanup state not recorded", "table", msg.Table, "err", err)
	}
}

// LastCleanup is when a cleaner last finished a range of t (zero if never).
func LastCleanup(ctx context.Context, t *table.Table) (time.Time, error) {
	return lastCleanup(ctx, &TableSource{T: t})
}

// lastCleanup is when a cleaner last finished a range of src (its
// cleanup state, under StateRoot; zero if never).
func lastCleanup(ctx context.Context, src Source) (time.Time, error) {
	key := src.StateRoot() + cleanupStateKey
	b, err := src.Store().Get(ctx, key)
	if errors.Is(err, objstore.ErrNotExist) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, err
	}
	var s cleanupState
	if err := json.Unmarshal(b, &s); err != nil {
		return time.Time{}, fmt.Errorf("%s: %w: %v", key, table.ErrCorruptObject, err)
	}
	return s.At, nil
}
