package table

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tablekeep/tablekeep/shared/dataset"
	"github.com/tablekeep/tablekeep/shared/objstore"
)

// CommitResult describes a successful commit.
type CommitResult struct {
	Committed   bool // false when there was nothing to commit (Version is then the version read)
	Version     uint64
	RowsAdded   uint64
	RowsDeleted uint64
	Attempts    int // 1 if the first manifest write won
}

// writeOp is one logical write, prepared once (data files written) and
// applied to whichever version turns out to be the latest at commit time.
//
// Rebase rules follow from apply being re-run on the new base: appended
// fragments are simply added (appends commute); the delete part is
// evaluated per fragment of the new base, reusing work where the fragment's
// deletion vector is unchanged (deletes on other fragments commute), merging
// with the new vector where it changed (deletes on one fragment merge), and
// searching fragments that are new since the read version (so an upsert
// that races another write of the same key deletes that row too: the last
// committer wins and no key is ever duplicated).
type writeOp struct {
	kind   dataset.OpKind
	txn    uint64
	readAt time.Time // when the read version was loaded

	added []Fragment // new fragments; ID and versions are set per apply
	pred  keyPredicate

	// replaceAll drops every fragment of the base (restore).
	replaceAll   bool
	restoredFrom uint64

	// rewrite, if set, replaces input fragments by output fragments (compaction).
	rewrite *Rewrite

	// addFields, if set, are appended to the base's schema (AddColumns).
	addFields []arrow.Field

	// inline: the op keeps its rows (inlineRows) and deletion positions in
	// the manifest (format 3). If the result would exceed the inline
	// bound, toFile writes its rows as a data file (op.added) and the op
	// is re-applied with inline false.
	inline     bool
	inlineRows [][]byte
	toFile     func(ctx context.Context, base *Manifest) error
	release    func() // after the commit
	// fold (a flush) are the inline rows moved to op.added[0], which holds
	// them first, in order.
	fold []InlineRow
	// restoreInline are the restored version's inline rows.
	restoreInline []InlineRow

	// caches that make re-applying on a new base cheap
	matches map[FileID][]uint32      // rows of a data file matching pred
	vectors map[string][]uint32      // deletion vector contents by key
	written map[writtenKey]*Deletion // deletion vectors this op wrote
	applied struct{ deleted uint64 } // rows deleted by the last apply

	// firstUpload is when the op started uploading its first deletion
	// vector (data files carry their own Fragment.uploadedAt).
	firstUpload time.Time
	// ambiguous: a manifest of this op landed or may have (an unknown
	// outcome, resolved or not): a failed commit's uploads are then left
	// to the sweep, never deleted by the writer.
	ambiguous bool
}

type writtenKey struct {
	file    FileID
	hasBase bool
	baseID  uint64
	inline  string // the fragment's inline deletions, folded into the vector
}

func (t *Table) newOp(kind dataset.OpKind) *writeOp {
	return &writeOp{
		kind: kind, txn: rand.Uint64(),
		matches: map[FileID][]uint32{}, vectors: map[string][]uint32{}, written: map[writtenKey]*Deletion{},
	}
}

// base returns the version a write starts from: the cached latest, reloaded
// if it was loaded more than half a grace window ago.
func (t *Table) base(ctx context.Context) (*Manifest, time.Time, error) {
	m, at, _, err := t.baseSince(ctx, time.Time{})
	return m, at, err
}

// baseSince is base for a write that began at start, and whether that
// version was listed as the latest after start: then it holds every commit
// that completed before the write began (a cache loaded at loadedAt was
// the latest at some moment at or after loadedAt: Refresh and
// RefreshListed take it before their LIST, a commit before its PUT).
func (t *Table) baseSince(ctx context.Context, start time.Time) (*Manifest, time.Time, bool, error) {
	m, at := t.cached()
	if m != nil && t.opts.Clock.Now().Sub(at) <= t.writerBound(m)/2 {
		return m, at, at.After(start), nil
	}
	m, err := t.Refresh(ctx)
	if err != nil {
		return nil, time.Time{}, false, err
	}
	_, at = t.cached()
	return m, at, true, nil
}

// sinceCached is the latest version for a write that found nothing to do
// on known, its cached base, not listed since the write began (issue 29
// item 1: a write observes every commit that completed before it began):
// one LIST, and if the latest is not known, one GET of it. Unchanged,
// known is the latest as of the LIST, so the cache's load time advances to
// the time taken before it (as RefreshListed argues). at is the read time
// of the version returned.
func (t *Table) sinceCached(ctx context.Context, known *Manifest) (m *Manifest, at time.Time, changed bool, err error) {
	now := t.opts.Clock.Now()
	v, err := t.listLatest(ctx)
	if err != nil {
		return nil, time.Time{}, false, err
	}
	if v == known.Version {
		t.setLatest(known, now)
		return known, now, false, nil
	}
	if m, err = t.RefreshListed(ctx, v, now); err != nil {
		return nil, time.Time{}, false, err
	}
	return m, now, true, nil
}

// commit applies op to the latest version and writes the next manifest by
// put-if-absent, rebasing and retrying with jittered backoff on conflict.
func (t *Table) commit(ctx context.Context, op *writeOp, base *Manifest) (*CommitResult, error) {
	if op.release != nil {
		defer op.release()
	}
	var lastErr error
	started := t.opts.Clock.Now()
	unsure := map[uint64]bool{} // versions whose manifest write had an unknown outcome
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		next, err := op.apply(ctx, t, base)
		if errors.Is(err, errInlineFull) {
			// Too big to keep in the manifest: rows to a data file,
			// deletions to vectors (which fold the inline positions of
			// the fragments they touch).
			op.inline = false
			if op.toFile != nil {
				if err := op.toFile(ctx, base); err != nil {
					return nil, err
				}
			}
			next, err = op.apply(ctx, t, base)
		}
		if err != nil {
			return nil, err
		}
		if op.kind == dataset.OpDelete && next.Op.RowsDeleted == 0 {
			// A concurrent commit already deleted these rows: nothing to commit.
			return &CommitResult{Version: base.Version, Attempts: attempt}, nil
		}
		if t.opts.Fence != nil {
			if err := t.opts.Fence(ctx); err != nil {
				return nil, fmt.Errorf("commit version %d refused: %w", base.Version+1, err)
			}
		}
		// The writer's bound (docs/format.md 8.3 step 5): its read version
		// and every file it uploaded are at most grace old when it checks,
		// and the manifest PUT below lands within MaxCommitDuration.
		grace := t.writerBound(base)
		now := t.opts.Clock.Now()
		if now.Sub(op.readAt) > grace {
			return nil, fmt.Errorf("%w: read at %s, grace %s", ErrStaleRead, op.readAt.Format(time.RFC3339), grace)
		}
		if up := op.oldestUpload(); !up.IsZero() && now.Sub(up) > grace {
			return nil, fmt.Errorf("%w: a file of this write was uploaded at %s, grace %s", ErrStaleRead, up.Format(time.RFC3339), grace)
		}
		next.Version, next.Parent, next.CommitTime = base.Version+1, base.Version, now
		change := diffManifests(base, next)
		indexRecord(base, next, len(change.Added) > 0 || len(change.Removed) > 0)
		k := t.key(manifestKey(next.Version))
		err = t.putManifest(ctx, k, encodeManifest(next))
		retryable := errors.Is(err, objstore.ErrExists)
		if err != nil && (!retryable || unsure[next.Version]) {
			// Ambiguous (now, or on an earlier attempt at this version): the
			// write may have landed. Look before retrying so an append is
			// never committed twice.
			landed, lookErr := t.ownManifest(ctx, next.Version, op.txn)
			switch {
			case lookErr != nil:
				op.ambiguous = true
				return nil, fmt.Errorf("%w: version %d: %v (then %v)", ErrCommitUnknown, next.Version, err, lookErr)
			case landed != nil:
				next, err = landed, nil
			case !retryable:
				// Not there: nothing landed (the SDK resends nothing after
				// returning). Retry a few times, remembering the version in
				// case a delayed request lands after all.
				unsure[next.Version] = true
				op.ambiguous = true
				if len(unsure) > maxUnsure {
					return nil, fmt.Errorf("commit version %d: %w", next.Version, err)
				}
				retryable = true
			}
		}
		if err == nil && t.opts.Clock.Now().Sub(op.readAt) > grace/2 {
			// A slow commit (stalled between its stale-read check and its
			// put) may have written a version number that maintenance had
			// already pruned: such a manifest is below the floor and never
			// becomes the latest, so the write must not be reported. If the
			// floor cannot be read, neither outcome may be reported.
			floor, ferr := t.Floor(ctx)
			op.ambiguous = true // the manifest landed: what follows keeps its files
			if ferr != nil {
				return nil, fmt.Errorf("%w: version %d written, then the retention floor could not be read: %v", ErrCommitUnknown, next.Version, ferr)
			}
			if next.Version < floor {
				_ = t.store.Delete(ctx, []string{k})
				return nil, fmt.Errorf("%w: version %d committed below the retention floor %d (read at %s, grace %s)",
					ErrStaleRead, next.Version, floor, op.readAt.Format(time.RFC3339), grace)
			}
		}
		if err == nil {
			t.setLatest(next, now)
			t.writeChange(ctx, next, change) // next may be the landed copy: the same manifest
			return &CommitResult{Committed: true, Version: next.Version, RowsAdded: next.Op.RowsAdded, RowsDeleted: next.Op.RowsDeleted, Attempts: attempt}, nil
		}
		if !retryable {
			return nil, fmt.Errorf("commit version %d: %w", next.Version, err)
		}
		lastErr = err
		if attempt > t.opts.MaxRetries || t.opts.Clock.Now().Sub(started) > t.opts.CommitTimeout {
			return nil, fmt.Errorf("%w after %d attempts: %v", ErrConflict, attempt, lastErr)
		}
		backoff := min(SatShift(t.opts.BackoffBase, min(attempt-1, 16)), t.opts.BackoffMax)
		if err := t.opts.Clock.Sleep(ctx, time.Duration(rand.Int64N(int64(backoff))+1)); err != nil {
			return nil, err
		}
		if base, err = t.Refresh(ctx); err != nil {
			return nil, err
		}
		// A write with unknown outcome may have landed since: if so, it is
		// the commit (rebasing onto it would apply the op twice).
		for v := range unsure {
			if v > base.Version {
				continue
			}
			landed, err := t.ownManifest(ctx, v, op.txn)
			if err != nil {
				return nil, fmt.Errorf("%w: version %d: %v", ErrCommitUnknown, v, err)
			}
			if landed != nil {
				if _, err := t.RepairChangeRecord(ctx, v); err != nil { // best effort: maintenance repairs it too
					t.opts.Logger.WarnContext(ctx, "change record not written", "table", t.root, "version", v, "err", err)
				}
				return &CommitResult{Committed: true, Version: v, RowsAdded: landed.Op.RowsAdded, RowsDeleted: landed.Op.RowsDeleted, Attempts: attempt}, nil
			}
			delete(unsure, v) // superseded by someone else's version v: ours can no longer land
		}
	}
}

// putManifest writes a manifest by PutIfAbsent, bounded by
// ManifestPutTimeout (every attempt of the store's SDK included): a put
// still unanswered then is abandoned, and its outcome is unknown (the
// caller looks, as for any ambiguous write). With the store's
// StoreApplyAllowance, the write lands within MaxCommitDuration of the
// writer's check, or never.
func (t *Table) putManifest(ctx context.Context, key string, body []byte) error {
	pctx, cancel := context.WithTimeout(ctx, ManifestPutTimeout)
	defer cancel()
	err := t.store.PutIfAbsent(pctx, key, body)
	if err != nil && ctx.Err() == nil && pctx.Err() != nil {
		return fmt.Errorf("manifest write abandoned after %s: %w", ManifestPutTimeout, err)
	}
	return err
}

// oldestUpload is when the op started its first upload still part of it
// (data files, rewrite outputs, deletion vectors); zero if none is known.
func (op *writeOp) oldestUpload() time.Time {
	oldest := op.firstUpload
	older := func(t time.Time) {
		if !t.IsZero() && (oldest.IsZero() || t.Before(oldest)) {
			oldest = t
		}
	}
	for _, f := range op.added {
		older(f.uploadedAt)
	}
	if op.rewrite != nil {
		older(op.rewrite.firstUpload)
		for _, g := range op.rewrite.Groups {
			older(g.Output.uploadedAt)
		}
	}
	return oldest
}

// ownManifest returns version v's manifest if it exists and carries txn.
func (t *Table) ownManifest(ctx context.Context, v uint64, txn uint64) (*Manifest, error) {
	m, err := t.readManifest(ctx, v)
	if errors.Is(err, objstore.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if m.Op.TxnID != txn {
		return nil, nil
	}
	return m, nil
}

// maxUnsure bounds the manifest writes with unknown outcome one commit
// retries before it gives up with the store's error.
const maxUnsure = 3

// apply builds the manifest that results from op on base. It may write
// deletion vectors (cached across re-applies).
func (op *writeOp) apply(ctx context.Context, t *Table, base *Manifest) (*Manifest, error) {
	version := base.Version + 1
	next := &Manifest{
		Schema: base.Schema, KeyColumn: base.KeyColumn, NextFragmentID: base.NextFragmentID,
		Op:          Operation{Kind: op.kind, TxnID: op.txn, RestoredFrom: op.restoredFrom},
		WriterGrace: base.WriterGrace, Format: base.Format, InlineMaxBytes: base.InlineMaxBytes,
	}
	if base.Format < 3 {
		op.inline = false
	}
	if op.addFields != nil {
		var err error
		if next.Schema, err = addColumns(base, op.addFields); err != nil {
			return nil, err
		}
	}
	var frags []Fragment
	added := op.added
	if op.rewrite != nil {
		var err error
		if frags, err = op.rewrite.apply(ctx, t, base, version); err != nil {
			return nil, err
		}
	} else if !op.replaceAll {
		frags = make([]Fragment, 0, len(base.Fragments)+len(op.added))
		var deleted uint64
		for _, f := range base.Fragments {
			if op.pred != nil && op.pred.mayMatch(f.MinKey, f.MaxKey) {
				nf, n, err := op.deleteFrom(ctx, t, base.Schema, base.KeyColumn, f, version)
				if err != nil {
					return nil, err
				}
				deleted += n
				if nf == nil {
					continue // every row deleted: the fragment is dropped
				}
				f = *nf
			}
			frags = append(frags, f)
		}
		// Inline rows the predicate matches are dropped from the manifest.
		for _, r := range base.Inline {
			if op.pred != nil && op.pred.match(r.Key) {
				deleted++
				continue
			}
			next.Inline = append(next.Inline, r)
		}
		next.Op.RowsDeleted = deleted
	} else {
		next.Op.RowsDeleted = base.Rows()
	}
	if op.rewrite != nil {
		// A compaction leaves the inline rows alone, but for those a group
		// folded into its output (RewriteGroup.Fold), which move there.
		next.Inline = base.Inline
		if len(op.rewrite.folded) > 0 {
			next.Inline = slices.DeleteFunc(slices.Clone(base.Inline), func(r InlineRow) bool { return op.rewrite.folded[r.id()] })
		}
	}
	if op.fold != nil {
		// A flush: the folded rows still inline move to the data file;
		// those gone since (replaced or deleted, or moved by another
		// flush) are deleted in it, so each row stays live in one place.
		present := make(map[inlineID]bool, len(next.Inline))
		for _, r := range next.Inline {
			present[r.id()] = true
		}
		folded := make(map[inlineID]bool, len(op.fold))
		var gone []uint32
		for i, r := range op.fold {
			if present[r.id()] {
				folded[r.id()] = true
			} else {
				gone = append(gone, uint32(i))
			}
		}
		next.Inline = slices.DeleteFunc(slices.Clone(next.Inline), func(r InlineRow) bool { return folded[r.id()] })
		a := op.added[0]
		a.Inline = gone
		added = []Fragment{a}
		if uint64(len(gone)) == a.Rows {
			added = nil // every row gone: no fragment
		}
	}
	if op.replaceAll {
		// A restore keeps the restored version's inline rows, renamed as
		// this version's.
		for i, r := range op.restoreInline {
			r.Version, r.Seq = version, uint64(i)
			next.Inline = append(next.Inline, r)
			next.Op.RowsAdded++
		}
	}
	for _, a := range added {
		a.ID = next.NextFragmentID
		next.NextFragmentID++
		a.CreatedVersion = version
		a.uploadedAt = time.Time{}
		if a.Deletion != nil {
			d := *a.Deletion
			d.CreatedVersion = version
			a.Deletion = &d
		}
		next.Op.RowsAdded += a.LiveRows()
		frags = append(frags, a)
	}
	if op.fold != nil {
		// Rows moved are neither added nor removed.
		moved := uint64(0)
		for _, a := range added {
			moved = uint64(len(op.fold) - len(a.Inline))
		}
		next.Op.RowsAdded -= moved
		if op.kind == dataset.OpFlush {
			next.Op.RowsDeleted = 0
		}
	}
	if op.inline {
		for i, data := range op.inlineRows {
			r := InlineRow{Version: version, Seq: uint64(i), Data: data}
			vals, err := decodeRowValues(next.Schema, data)
			if err == nil {
				r.Key, err = inlineKey(next.Schema, next.KeyColumn, vals)
			}
			if err != nil {
				return nil, err
			}
			next.Inline = append(next.Inline, r)
			next.Op.RowsAdded++
		}
	}
	if op.rewrite != nil {
		next.NextFragmentID = max(next.NextFragmentID, op.rewrite.nextID)
	}
	next.Fragments = frags
	if op.inline && inlineBytes(next) > next.InlineMaxBytes {
		return nil, errInlineFull
	}
	op.applied.deleted = next.Op.RowsDeleted
	return next, nil
}

// deleteFrom applies the op's predicate to one fragment of the base.
// It returns the updated fragment (nil if no rows remain) and the number of
// rows newly deleted.
func (op *writeOp) deleteFrom(ctx context.Context, t *Table, schema *arrow.Schema, keyCol string, f Fragment, version uint64) (*Fragment, uint64, error) {
	match, ok := op.matches[f.File]
	if !ok {
		keys, err := t.cachedKeys(ctx, schema, keyCol, f)
		if err != nil {
			return nil, 0, err
		}
		for i, k := range keys {
			if op.pred.match(k) {
				match = append(match, uint32(i))
			}
		}
		op.matches[f.File] = match
	}
	if len(match) == 0 {
		return &f, 0, nil
	}
	var dv []uint32
	wk := writtenKey{file: f.File, inline: fmt.Sprint(f.Inline)}
	if f.Deletion != nil {
		wk.hasBase, wk.baseID = true, f.Deletion.ID
		var err error
		if dv, err = op.vector(ctx, t, f); err != nil {
			return nil, 0, err
		}
	}
	cur := unionPositions(dv, f.Inline)
	merged := unionPositions(cur, match)
	newly := uint64(len(merged) - len(cur))
	if newly == 0 {
		return &f, 0, nil
	}
	if uint64(len(merged)) >= f.Rows {
		return nil, newly, nil
	}
	if op.inline {
		// Kept in the manifest: the positions beyond the vector's.
		nf := f
		nf.Inline = subtractPositions(merged, dv)
		return &nf, newly, nil
	}
	d, ok := op.written[wk]
	if !ok {
		id, err := t.putDeletion(ctx, f.File, merged, &op.firstUpload)
		if err != nil {
			return nil, 0, err
		}
		d = &Deletion{ID: id, Rows: uint64(len(merged))}
		op.written[wk] = d
	}
	nf := f
	nf.Deletion = &Deletion{ID: d.ID, Rows: d.Rows, CreatedVersion: version}
	nf.Inline = nil // folded into the vector
	return &nf, newly, nil
}

func (op *writeOp) vector(ctx context.Context, t *Table, f Fragment) ([]uint32, error) {
	k := DeletionKey(f.File, f.Deletion.ID)
	if v, ok := op.vectors[k]; ok {
		return v, nil
	}
	v, err := t.cachedDeletion(ctx, f)
	if err != nil {
		return nil, err
	}
	op.vectors[k] = v
	return v, nil
}

// subtractPositions returns the sorted positions of a not in b.
func subtractPositions(a, b []uint32) []uint32 {
	var out []uint32
	for _, p := range a {
		if _, found := slices.BinarySearch(b, p); !found {
			out = append(out, p)
		}
	}
	return out
}

// putDeletion writes a deletion vector under a fresh random name, and
// records in *first when it started if *first is zero.
func (t *Table) putDeletion(ctx context.Context, file FileID, positions []uint32, first *time.Time) (uint64, error) {
	body := encodeDeletion(positions)
	if first != nil && first.IsZero() {
		*first = t.opts.Clock.Now()
	}
	for range 5 {
		id := newDeletionID()
		err := t.store.PutIfAbsent(ctx, t.key(DeletionKey(file, id)), body)
		if err == nil {
			return id, nil
		}
		if !errors.Is(err, objstore.ErrExists) {
			return 0, err
		}
	}
	return 0, fmt.Errorf("deletion vector for %s: no free name after 5 tries", file.DataKey())
}

// putData writes a record batch as a new data fragment (not yet committed).
func (t *Table) putData(ctx context.Context, m *Manifest, rec arrow.RecordBatch) (Fragment, error) {
	f := Fragment{Rows: uint64(rec.NumRows())}
	if m.KeyColumn != "" {
		keys, err := keyColumnBytes(rec.Column(rec.Schema().FieldIndices(m.KeyColumn)[0]))
		if err != nil {
			return f, err
		}
		f.MinKey, f.MaxKey = keyBounds(keys)
	}
	// Written with the table's schema, so every fragment of a table has the
	// same Parquet schema (a batch may differ in metadata or time zone label).
	rec, err := conformTo(ctx, m.Schema, rec)
	if err != nil {
		return f, err
	}
	defer rec.Release()
	body, err := encodeParquet(rec)
	if err != nil {
		return f, fmt.Errorf("encode fragment: %w", err)
	}
	f.Bytes = uint64(len(body))
	f.uploadedAt = t.opts.Clock.Now()
	for range 5 {
		f.File = FileID(rand.Uint64())
		err = t.store.PutIfAbsent(ctx, t.key(f.File.DataKey()), body)
		if !errors.Is(err, objstore.ErrExists) {
			break
		}
	}
	return f, err
}

// checkBatch validates a batch against the table schema and, for upserts,
// that its keys are distinct and not null.
func checkBatch(m *Manifest, rec arrow.RecordBatch, distinctKeys bool) ([][]byte, error) {
	if !schemasEqual(m.Schema, rec.Schema()) {
		return nil, fmt.Errorf("%w: batch has %s; table has %s", ErrSchemaMismatch, rec.Schema(), m.Schema)
	}
	for i, f := range m.Schema.Fields() {
		if !f.Nullable && rec.Column(i).NullN() > 0 {
			return nil, fmt.Errorf("%w: column %q is not nullable but has %d nulls", ErrSchemaMismatch, f.Name, rec.Column(i).NullN())
		}
	}
	if m.KeyColumn == "" {
		return nil, nil
	}
	keys, err := keyColumnBytes(rec.Column(m.Schema.FieldIndices(m.KeyColumn)[0]))
	if err != nil {
		return nil, err
	}
	if distinctKeys {
		seen := make(map[string]struct{}, len(keys))
		for _, k := range keys {
			if _, dup := seen[string(k)]; dup {
				return nil, fmt.Errorf("%w: %q", ErrDuplicateKey, k)
			}
			seen[string(k)] = struct{}{}
		}
	}
	return keys, nil
}

// batchBase is the read version of a write of rec, with rec checked
// against it (checkBatch; distinct: an upsert, which needs a key column).
// A batch that does not fit a cached base is checked once more against the
// latest version: the cache may predate an AddColumns.
func (t *Table) batchBase(ctx context.Context, rec arrow.RecordBatch, distinct bool) (*Manifest, time.Time, [][]byte, error) {
	base, at, err := t.base(ctx)
	if err != nil {
		return nil, time.Time{}, nil, err
	}
	for refreshed := false; ; refreshed = true {
		if distinct && base.KeyColumn == "" {
			return nil, time.Time{}, nil, ErrNoKeyColumn
		}
		keys, err := checkBatch(base, rec, distinct)
		if err == nil {
			return base, at, keys, nil
		}
		if refreshed || !errors.Is(err, ErrSchemaMismatch) || schemasEqual(base.Schema, rec.Schema()) {
			return nil, time.Time{}, nil, err
		}
		latest, rerr := t.Refresh(ctx)
		if rerr != nil {
			return nil, time.Time{}, nil, rerr
		}
		if latest.Version == base.Version {
			return nil, time.Time{}, nil, err
		}
		base, at = t.cached()
	}
}

// Append adds the rows of rec in one commit. It does not check keys against
// existing rows: use Upsert to replace rows by key.
func (t *Table) Append(ctx context.Context, rec arrow.RecordBatch) (*CommitResult, error) {
	base, at, _, err := t.batchBase(ctx, rec, false)
	if err != nil {
		return nil, err
	}
	if rec.NumRows() == 0 {
		return &CommitResult{Version: base.Version}, nil
	}
	op := t.newOp(dataset.OpAppend)
	op.readAt = at
	if err := t.prepareRows(ctx, op, base, rec); err != nil {
		return nil, err
	}
	return t.commit(ctx, op, base)
}

// Upsert replaces the rows whose keys appear in rec and adds the rest, in
// one commit. Keys in rec must be distinct.
func (t *Table) Upsert(ctx context.Context, rec arrow.RecordBatch) (*CommitResult, error) {
	base, at, keys, err := t.batchBase(ctx, rec, true)
	if err != nil {
		return nil, err
	}
	if rec.NumRows() == 0 {
		return &CommitResult{Version: base.Version}, nil
	}
	op := t.newOp(dataset.OpUpsert)
	op.readAt = at
	op.pred = newKeySet(keys)
	if err := t.prepareRows(ctx, op, base, rec); err != nil {
		return nil, err
	}
	return t.commit(ctx, op, base)
}

// prepareRows readies rec as op's new rows: kept inline on a format-3 table
// if they fit its bound (a data file is written only if the commit's
// result does not fit after all), else written as a data file now. A data
// file on a format-3 table with inline rows takes them in too, first (a
// flush with the write: docs/format.md 4.7, "The bound"), so the manifest
// is left with none.
func (t *Table) prepareRows(ctx context.Context, op *writeOp, base *Manifest, rec arrow.RecordBatch) error {
	toFile := func(ctx context.Context, cur *Manifest) error {
		if len(cur.Inline) == 0 || cur.Format < 3 {
			f, err := t.putData(ctx, cur, rec)
			if err != nil {
				return err
			}
			op.added = []Fragment{f}
			return nil
		}
		// The inline rows are full: flush them with this write's rows.
		rows := make([]InlineRow, len(op.inlineRows))
		for i, d := range op.inlineRows {
			rows[i] = InlineRow{Data: d}
		}
		own, err := inlineBatch(cur.Schema, rows, nil)
		if err != nil {
			return err
		}
		defer own.Release()
		return t.foldInline(ctx, op, cur, own)
	}
	if base.Format < 3 {
		return toFile(ctx, &Manifest{Schema: base.Schema, KeyColumn: base.KeyColumn})
	}
	conformed, err := conformTo(ctx, base.Schema, rec)
	if err != nil {
		return err
	}
	defer conformed.Release()
	rows, n, err := encodeInlineRows(conformed)
	if err != nil {
		return err
	}
	if n <= base.InlineMaxBytes {
		rec.Retain() // held until the commit returns (toFile may need it)
		op.inline, op.inlineRows = true, rows
		op.toFile = toFile
		op.release = rec.Release
		return nil
	}
	if len(base.Inline) > 0 {
		// Above the bound: the batch goes to a data file, and the inline
		// rows with it.
		return t.foldInline(ctx, op, base, conformed)
	}
	return toFile(ctx, &Manifest{Schema: base.Schema, KeyColumn: base.KeyColumn})
}

// foldInline writes cur's inline rows, in order, then rec (a batch of
// cur's schema), as one data file: op's new rows, and a flush of the
// inline rows it read (op.fold; apply moves those still inline to the
// file and makes the others inline deletions of it).
func (t *Table) foldInline(ctx context.Context, op *writeOp, cur *Manifest, rec arrow.RecordBatch) error {
	fold := slices.Clone(cur.Inline)
	in, err := inlineBatch(cur.Schema, fold, nil)
	if err != nil {
		return err
	}
	defer in.Release()
	cols := make([]arrow.Array, cur.Schema.NumFields())
	for i := range cols {
		c, err := array.Concatenate([]arrow.Array{in.Column(i), rec.Column(i)}, memory.DefaultAllocator)
		if err != nil {
			for _, done := range cols[:i] {
				done.Release()
			}
			return fmt.Errorf("fold inline rows: column %q: %w", cur.Schema.Field(i).Name, err)
		}
		cols[i] = c
	}
	all := array.NewRecordBatch(cur.Schema, cols, in.NumRows()+rec.NumRows())
	for _, c := range cols {
		c.Release()
	}
	defer all.Release()
	f, err := t.putData(ctx, cur, all)
	if err != nil {
		return err
	}
	op.fold, op.added = fold, []Fragment{f}
	return nil
}

// Delete removes the rows with the given keys (string or int64 values for
// the key column). Deleting nothing commits nothing. Like every write it
// observes every commit that completed before it began (DeleteWhere).
func (t *Table) Delete(ctx context.Context, keys ...any) (*CommitResult, error) {
	start := t.opts.Clock.Now()
	base, at, listed, err := t.baseSince(ctx, start)
	if err != nil {
		return nil, err
	}
	if base.KeyColumn == "" {
		return nil, ErrNoKeyColumn
	}
	// The key column and its type never change: a cached version's are the latest's.
	kt := base.Schema.Field(base.Schema.FieldIndices(base.KeyColumn)[0]).Type
	enc := make([][]byte, len(keys))
	for i, k := range keys {
		if enc[i], err = KeyOf(kt, k); err != nil {
			return nil, err
		}
	}
	return t.deleteWhere(ctx, newKeySet(enc), base, at, listed)
}

// DeleteWhere removes the rows whose key matches pred (see KeyRange,
// KeyPrefix). Deleting nothing commits nothing.
//
// A delete observes every commit that completed before it began, whatever
// this handle has cached: one that matches nothing in a cached version
// lists the latest (one LIST) before it reports that nothing matched, and
// if the latest is newer, evaluates on it (one GET, and the keys of its new
// fragments) and commits if it matches there.
func (t *Table) DeleteWhere(ctx context.Context, pred Predicate) (*CommitResult, error) {
	base, at, listed, err := t.baseSince(ctx, t.opts.Clock.Now())
	if err != nil {
		return nil, err
	}
	return t.deleteWhere(ctx, pred, base, at, listed)
}

// deleteWhere is DeleteWhere on base, read at at; listed: base was listed
// as the latest after the delete began (baseSince).
func (t *Table) deleteWhere(ctx context.Context, pred Predicate, base *Manifest, at time.Time, listed bool) (*CommitResult, error) {
	if base.KeyColumn == "" {
		return nil, ErrNoKeyColumn
	}
	op := t.newOp(dataset.OpDelete)
	op.readAt = at
	op.pred = pred.(keyPredicate)
	// Evaluate on the read version first: nothing to delete, nothing to
	// commit, once the latest is known to be that version.
	next, err := op.evaluate(ctx, t, base)
	if err != nil {
		return nil, err
	}
	if next.Op.RowsDeleted == 0 && !listed {
		latest, latestAt, changed, err := t.sinceCached(ctx, base)
		if err != nil {
			return nil, err
		}
		if changed {
			base, op.readAt = latest, latestAt
			if next, err = op.evaluate(ctx, t, base); err != nil {
				return nil, err
			}
		}
	}
	if next.Op.RowsDeleted == 0 {
		return &CommitResult{Version: base.Version}, nil
	}
	return t.commit(ctx, op, base)
}

// evaluate applies a delete op to base without committing: inline
// deletion positions on a format-3 base while they fit (else vectors).
func (op *writeOp) evaluate(ctx context.Context, t *Table, base *Manifest) (*Manifest, error) {
	op.inline = base.Format >= 3
	next, err := op.apply(ctx, t, base)
	if errors.Is(err, errInlineFull) {
		op.inline = false
		next, err = op.apply(ctx, t, base)
	}
	return next, err
}

// Restore commits a new version with the rows of version v. The files of v
// are copied under new names, so every object is referenced by one
// contiguous run of versions: the invariant cleanup relies on.
func (t *Table) Restore(ctx context.Context, v uint64) (*CommitResult, error) {
	snap, err := t.Checkout(ctx, v)
	if err != nil {
		return nil, err
	}
	res, err := t.restore(ctx, snap)
	if err != nil {
		// The version may have fallen below the floor while it was copied.
		return nil, snap.prunedErr(ctx, err)
	}
	return res, nil
}

func (t *Table) restore(ctx context.Context, snap *Snapshot) (*CommitResult, error) {
	v := snap.Version()
	base, at, err := t.base(ctx)
	if err != nil {
		return nil, err
	}
	op := t.newOp(dataset.OpRestore)
	op.readAt = at
	op.replaceAll = true
	op.restoredFrom = v
	for _, f := range snap.m.Fragments {
		nf, err := t.copyFragment(ctx, f)
		if err != nil {
			return nil, fmt.Errorf("restore %d: %w", v, err)
		}
		op.added = append(op.added, nf)
	}
	op.restoreInline = snap.m.Inline
	return t.commit(ctx, op, base)
}

func (t *Table) copyFragment(ctx context.Context, f Fragment) (Fragment, error) {
	nf := f
	nf.uploadedAt = t.opts.Clock.Now()
	data, err := t.store.Get(ctx, t.key(f.File.DataKey()))
	if err != nil {
		return f, err
	}
	nf.Deletion = nil
	for range 5 {
		nf.File = FileID(rand.Uint64())
		err = t.store.PutIfAbsent(ctx, t.key(nf.File.DataKey()), data)
		if !errors.Is(err, objstore.ErrExists) {
			break
		}
	}
	if err != nil {
		return f, err
	}
	if f.Deletion != nil {
		vec, err := t.readDeletion(ctx, f)
		if err != nil {
			return f, err
		}
		id, err := t.putDeletion(ctx, nf.File, vec, nil)
		if err != nil {
			return f, err
		}
		nf.Deletion = &Deletion{ID: id, Rows: f.Deletion.Rows}
	}
	return nf, nil
}

// conformTo returns rec with schema s, casting columns whose types differ
// only in labels (e.g. a timestamp's time zone). Columns must already match
// by name, kind and order (checkBatch).
func conformTo(ctx context.Context, s *arrow.Schema, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	cols := make([]arrow.Array, rec.NumCols())
	for i := range cols {
		c := rec.Column(i)
		if arrow.TypeEqual(c.DataType(), s.Field(i).Type) {
			c.Retain()
		} else {
			var err error
			if c, err = compute.CastArray(ctx, c, compute.SafeCastOptions(s.Field(i).Type)); err != nil {
				for _, done := range cols[:i] {
					done.Release()
				}
				return nil, fmt.Errorf("%w: column %q: %v", ErrSchemaMismatch, s.Field(i).Name, err)
			}
		}
		cols[i] = c
	}
	out := array.NewRecordBatch(s, cols, rec.NumRows())
	for _, c := range cols {
		c.Release()
	}
	return out, nil
}

// FlushInline moves the latest version's inline rows (format 3) into one
// data file, in one commit (OpFlush); compaction calls it first, so the
// rows then fold into fragments like any others. Rows replaced or deleted
// while the file was written are deleted in it at commit (apply), so every
// row stays live in exactly one place. No inline rows: nothing committed,
// once the latest is known to have none (a cached version without any not
// listed since the call began is checked by one LIST, as a delete is).
func (t *Table) FlushInline(ctx context.Context) (*CommitResult, error) {
	base, at, listed, err := t.baseSince(ctx, t.opts.Clock.Now())
	if err != nil {
		return nil, err
	}
	if len(base.Inline) == 0 && !listed {
		if base, at, _, err = t.sinceCached(ctx, base); err != nil {
			return nil, err
		}
	}
	if len(base.Inline) == 0 {
		return &CommitResult{Version: base.Version}, nil
	}
	op := t.newOp(dataset.OpFlush)
	op.readAt = at
	op.fold = slices.Clone(base.Inline)
	rec, err := inlineBatch(base.Schema, op.fold, nil)
	if err != nil {
		return nil, err
	}
	defer rec.Release()
	f, err := t.putData(ctx, base, rec)
	if err != nil {
		return nil, err
	}
	op.added = []Fragment{f}
	return t.commit(ctx, op, base)
}
