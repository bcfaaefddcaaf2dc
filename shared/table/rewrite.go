package table

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/semaphore"

	"github.com/tablekeep/tablekeep/shared/dataset"
	"github.com/tablekeep/tablekeep/shared/objstore"
)

// RewriteInput is one input fragment of a rewrite group as it was read.
type RewriteInput struct {
	Fragment Fragment // as in the read version
	Deleted  []uint32 // the deletion vector applied when it was read
}

// RewriteGroup replaces adjacent input fragments by one output fragment
// holding their live rows, in input order.
type RewriteGroup struct {
	Inputs []RewriteInput
	Output Fragment // written by WriteRewriteOutput, not yet committed
	// Fold (format 3) are inline rows the output holds after the inputs'
	// live rows, in order (ReadFoldGroup): the commit moves them from the
	// manifest's inline rows into the output, as a flush does, so one
	// commit flushes and compacts (docs/format.md 4.7).
	Fold []InlineRow
}

// Rewrite is a compaction commit: groups whose inputs are replaced by
// outputs. Groups whose inputs changed beyond repair are dropped at commit.
type Rewrite struct {
	Groups []RewriteGroup
	// ReadVersion is the version the groups were read at. With it, an input
	// that a delete removed entirely since then (an upsert replacing a
	// one-row fragment) is remapped as deleted rows rather than dropping the
	// group; without it (0), any removed input drops its group.
	ReadVersion uint64
	// Discarded counts the files a failed commit deleted (CommitRewrite).
	Discarded int

	nextID uint64
	// Dropped counts groups the last apply dropped because an input was gone.
	Dropped int
	// Remapped counts rows deleted concurrently that the last apply re-applied
	// to outputs.
	Remapped uint64
	written  map[rewriteWrittenKey]*Deletion
	removal  map[string]dataset.OpKind // data key -> op that removed it, versions (ReadVersion, scanned]
	scanned  uint64
	// firstUpload is when the first remapped deletion vector was uploaded.
	firstUpload time.Time
	// folded are the inline rows the last apply moved into outputs.
	folded map[inlineID]bool
}

type rewriteWrittenKey struct {
	group int
	sig   string // the inputs' deletion vector ids at the base
}

// DefaultReadConcurrency is how many of a group's fragments ReadGroup
// reads at once when GroupReadOptions.Concurrency is 0. At 20 ms per GET,
// 32 at once read 1,000 one-row fragments in ~1.2 s (serial: ~24 s), about
// 1,600 GET/s, under S3's 5,500 per prefix; bytes are bounded by the budget.
const DefaultReadConcurrency = 32

// DefaultReadBudget is the default bound on the bytes of fragments being
// fetched and decoded at once (GroupReadOptions.Budget unset): 48 MiB.
const DefaultReadBudget int64 = 48 << 20

// GroupReadOptions bound ReadGroupWith's parallel reads.
type GroupReadOptions struct {
	// Concurrency is the number of fragments read at once (0:
	// DefaultReadConcurrency; 1: serial).
	Concurrency int
	// Budget, if set, bounds the bytes of fragments (their stored sizes)
	// being fetched and decoded at once; it may be shared by several
	// readers (a pipeline). A fragment larger than BudgetBytes takes the
	// whole budget. nil: a budget of BudgetBytes for this call alone.
	Budget *semaphore.Weighted
	// BudgetBytes is Budget's size (0: DefaultReadBudget).
	BudgetBytes int64
}

func (o GroupReadOptions) withDefaults() GroupReadOptions {
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultReadConcurrency
	}
	if o.BudgetBytes <= 0 {
		o.BudgetBytes = DefaultReadBudget
	}
	if o.Budget == nil {
		o.Budget = semaphore.NewWeighted(o.BudgetBytes)
	}
	return o
}

// ReadGroup reads the live rows of input fragments (as of snapshot m) into
// one batch and returns the group's inputs with the vectors applied. It
// reads with the default GroupReadOptions.
func (t *Table) ReadGroup(ctx context.Context, m *Manifest, frags []Fragment) (arrow.RecordBatch, []RewriteInput, error) {
	return t.ReadGroupWith(ctx, m, frags, GroupReadOptions{})
}

// ReadGroupWith is ReadGroup with its parallelism bounded by o: fragments
// and their deletion vectors are read concurrently (the same requests as a
// serial read), at most o.Concurrency at once and at most o.BudgetBytes of
// stored fragment bytes being fetched and decoded at once. The result is in
// input order, whatever order the reads finish in.
func (t *Table) ReadGroupWith(ctx context.Context, m *Manifest, frags []Fragment, o GroupReadOptions) (arrow.RecordBatch, []RewriteInput, error) {
	return t.readGroup(ctx, m, frags, nil, o)
}

// ReadFoldGroup is ReadGroupWith for a group whose output also takes inline
// rows of m (format 3; RewriteGroup.Fold): the batch holds the fragments'
// live rows, then the fold rows in order. Inline rows need no request.
func (t *Table) ReadFoldGroup(ctx context.Context, m *Manifest, frags []Fragment, fold []InlineRow, o GroupReadOptions) (arrow.RecordBatch, []RewriteInput, error) {
	return t.readGroup(ctx, m, frags, fold, o)
}

func (t *Table) readGroup(ctx context.Context, m *Manifest, frags []Fragment, fold []InlineRow, o GroupReadOptions) (arrow.RecordBatch, []RewriteInput, error) {
	o = o.withDefaults()
	recs := make([]arrow.RecordBatch, len(frags), len(frags)+1)
	defer func() {
		for _, r := range recs {
			if r != nil {
				r.Release()
			}
		}
	}()
	inputs := make([]RewriteInput, len(frags))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(o.Concurrency)
	for i, f := range frags {
		if gctx.Err() != nil {
			break // a read failed (or ctx ended): g.Wait reports it
		}
		weight := min(max(int64(f.Bytes), 1), o.BudgetBytes)
		g.Go(func() error {
			if err := o.Budget.Acquire(gctx, weight); err != nil {
				return err
			}
			defer o.Budget.Release(weight)
			rec, deleted, err := t.ReadFragment(gctx, m.Schema, f, nil)
			if err != nil {
				return err
			}
			recs[i] = rec
			inputs[i] = RewriteInput{Fragment: f, Deleted: deleted}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, nil, err
	}
	if slices.Contains(recs, nil) {
		// Fragments were skipped because ctx ended before they started.
		return nil, nil, fmt.Errorf("read group: %w", context.Cause(ctx))
	}
	if len(fold) > 0 {
		rec, err := inlineBatch(m.Schema, fold, nil)
		if err != nil {
			return nil, nil, err
		}
		recs = append(recs, rec)
	}
	// Concatenate into one batch so the output is written as one row group.
	cols := make([]arrow.Array, m.Schema.NumFields())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	var rows int64
	for _, r := range recs {
		rows += r.NumRows()
	}
	for i := range cols {
		parts := make([]arrow.Array, 0, len(recs))
		for _, r := range recs {
			parts = append(parts, r.Column(i))
		}
		if len(parts) == 0 {
			cols = emptyColumns(m.Schema)
			break
		}
		c, err := array.Concatenate(parts, memory.DefaultAllocator)
		if err != nil {
			return nil, nil, err
		}
		cols[i] = c
	}
	return array.NewRecordBatch(m.Schema, cols, rows), inputs, nil
}

func emptyColumns(s *arrow.Schema) []arrow.Array {
	cols := make([]arrow.Array, s.NumFields())
	for i, f := range s.Fields() {
		b := array.NewBuilder(memory.DefaultAllocator, f.Type)
		cols[i] = b.NewArray()
		b.Release()
	}
	return cols
}

// WriteRewriteOutput writes a group's output data file (not yet committed).
func (t *Table) WriteRewriteOutput(ctx context.Context, m *Manifest, rec arrow.RecordBatch) (Fragment, error) {
	return t.putData(ctx, m, rec)
}

// CommitRewrite commits a rewrite on the latest version. Concurrent appends
// rebase over it; a delete that landed on an input after it was read is
// re-applied to the output by remapping row positions; a group whose input
// was removed is dropped (never committed stale). If every group is dropped
// it returns ErrRewriteInvalidated and commits nothing.
//
// A rewrite that fails is spent: when no manifest of it landed or may have
// (every conditional put refused, or none made: a conflict, the fence, a
// stale read, an error), its outputs and the deletion vectors it wrote are
// deleted at once (one Delete request; docs/format.md 8.4), so a lost
// compaction leaves nothing for the sweep. After an unknown outcome
// (ErrCommitUnknown, or a put whose answer was lost) they are kept: the
// sweep's, if nothing references them. A crash leaves them to the sweep.
func (t *Table) CommitRewrite(ctx context.Context, rw *Rewrite, readAt time.Time) (*CommitResult, error) {
	// Start from the latest: a rewrite's inputs are checked against it,
	// and a cached base older than the rewrite's read would drop groups
	// that are still valid. A cache loaded at or after readAt (the read
	// itself, or this handle's own later commit) is used as is: if another
	// writer committed since, the manifest's PutIfAbsent conflicts and the
	// commit rebases on the true latest (8.4).
	base, at := t.cached()
	if base == nil || at.Before(readAt) {
		var err error
		if base, err = t.Refresh(ctx); err != nil {
			return nil, err
		}
	}
	op := t.newOp(dataset.OpRewrite)
	op.readAt = readAt
	rw.written = map[rewriteWrittenKey]*Deletion{}
	op.rewrite = rw
	res, err := t.commit(ctx, op, base)
	if err != nil && !op.ambiguous {
		rw.discard(ctx, t)
	}
	return res, err
}

// discard deletes the files a rewrite that committed nothing uploaded: its
// outputs and the deletion vectors its applies wrote. A failure is logged:
// the files are orphans for the sweep.
func (rw *Rewrite) discard(ctx context.Context, t *Table) {
	var keys []string
	for _, g := range rw.Groups {
		if g.Output.File != 0 {
			keys = append(keys, t.key(g.Output.File.DataKey()))
		}
	}
	for k, d := range rw.written {
		if d != nil && d.ID != 0 && k.group < len(rw.Groups) {
			keys = append(keys, t.key(DeletionKey(rw.Groups[k.group].Output.File, d.ID)))
		}
	}
	if len(keys) == 0 {
		return
	}
	slices.Sort(keys)
	n, err := objstore.DeleteAll(ctx, t.store, keys, objstore.MaxDeleteKeys)
	rw.Discarded += n
	if err != nil {
		t.opts.Logger.WarnContext(ctx, "rewrite files not deleted (left to the sweep)", "table", t.root, "files", len(keys), "err", err)
	}
}

// apply builds the fragment list of base with the rewrite applied.
func (rw *Rewrite) apply(ctx context.Context, t *Table, base *Manifest, version uint64) ([]Fragment, error) {
	byID := make(map[uint64]int, len(base.Fragments))
	for i, f := range base.Fragments {
		byID[f.ID] = i
	}
	replaced := map[int]bool{}     // base index -> replaced
	outputAt := map[int]Fragment{} // base index of a group's first input -> output
	rw.Dropped, rw.Remapped = 0, 0
	rw.folded = nil
	present := make(map[inlineID]bool, len(base.Inline))
	for _, r := range base.Inline {
		present[r.id()] = true
	}
	var atEnd []Fragment // outputs of fold groups whose inputs are all gone
	nextID := base.NextFragmentID
	for gi, g := range rw.Groups {
		out, ok, err := rw.remap(ctx, t, gi, g, base, byID, version)
		if err != nil {
			return nil, err
		}
		if !ok {
			// Dropped: its fold rows stay inline, where they are live.
			rw.Dropped++
			continue
		}
		// The fold rows still inline move to the output; the others
		// (replaced, deleted or moved since) are its inline deletions.
		offset := uint32(out.Rows) - uint32(len(g.Fold))
		var gone []uint32
		for j, r := range g.Fold {
			if present[r.id()] {
				if rw.folded == nil {
					rw.folded = map[inlineID]bool{}
				}
				rw.folded[r.id()] = true
			} else {
				gone = append(gone, offset+uint32(j))
			}
		}
		out.Inline = gone
		out.ID = nextID
		nextID++
		first := -1 // the output takes the place of the first input still present
		for _, in := range g.Inputs {
			if i, present := byID[in.Fragment.ID]; present {
				replaced[i] = true
				if first < 0 {
					first = i
				}
			}
		}
		if out.LiveRows() == 0 {
			continue
		}
		switch {
		case first >= 0:
			outputAt[first] = out
		case len(g.Fold) > 0:
			// Every input was deleted since it was read, but the output
			// holds live fold rows: it goes last, where a flush puts its
			// file.
			atEnd = append(atEnd, out)
		}
	}
	if rw.Dropped == len(rw.Groups) {
		return nil, fmt.Errorf("%w: all %d groups", ErrRewriteInvalidated, len(rw.Groups))
	}
	rw.nextID = nextID
	frags := make([]Fragment, 0, len(base.Fragments)+len(atEnd))
	for i, f := range base.Fragments {
		if out, ok := outputAt[i]; ok {
			frags = append(frags, out)
		}
		if !replaced[i] {
			frags = append(frags, f)
		}
	}
	return append(frags, atEnd...), nil
}

// remap checks a group against base and returns its output fragment with
// any deletions that landed on its inputs since they were read.
func (rw *Rewrite) remap(ctx context.Context, t *Table, gi int, g RewriteGroup, base *Manifest, byID map[uint64]int, version uint64) (Fragment, bool, error) {
	out := g.Output
	out.uploadedAt = time.Time{}
	out.CreatedVersion = version
	out.Deletion = nil
	out.Inline = nil
	live := uint64(len(g.Fold))
	for _, in := range g.Inputs {
		live += in.Fragment.Rows - uint64(len(in.Deleted))
	}
	if live != out.Rows {
		return out, false, fmt.Errorf("rewrite group %d: output has %d rows, inputs had %d live rows and %d inline rows", gi, out.Rows, live-uint64(len(g.Fold)), len(g.Fold))
	}
	var sig []byte
	changed := false
	gone := map[uint64]bool{}
	for _, in := range g.Inputs {
		i, ok := byID[in.Fragment.ID]
		if !ok {
			// Removed since it was read: remappable only if a delete removed
			// it (all its rows deleted), not a rewrite or restore.
			kind, err := rw.removedBy(ctx, t, base.Version, in.Fragment.File.DataKey())
			if err != nil {
				return out, false, err
			}
			if kind != dataset.OpDelete && kind != dataset.OpUpsert {
				return out, false, nil
			}
			gone[in.Fragment.ID], changed = true, true
			sig = fmt.Appendf(sig, "%d:gone,", in.Fragment.ID)
			continue
		}
		cur := base.Fragments[i]
		if cur.Deletion != nil {
			sig = fmt.Appendf(sig, "%d:%d,", in.Fragment.ID, cur.Deletion.ID)
		}
		if len(cur.Inline) > 0 {
			sig = fmt.Appendf(sig, "%d:i%v,", in.Fragment.ID, cur.Inline)
		}
		if !sameDeletion(cur.Deletion, in.Fragment.Deletion) || !slices.Equal(cur.Inline, in.Fragment.Inline) {
			changed = true
		}
	}
	if !changed {
		return out, true, nil
	}
	key := rewriteWrittenKey{group: gi, sig: string(sig)}
	if d, ok := rw.written[key]; ok {
		if d != nil {
			out.Deletion = &Deletion{ID: d.ID, Rows: d.Rows, CreatedVersion: version}
		}
		rw.Remapped += outDeletedRows(d)
		return out, true, nil
	}
	// Map each input's newly deleted positions to output positions: the
	// output holds the inputs' live rows (as read) in order.
	var outDeleted []uint32
	offset := uint32(0)
	for _, in := range g.Inputs {
		live := livePositions(in.Fragment.Rows, in.Deleted)
		if gone[in.Fragment.ID] {
			for j := range live {
				outDeleted = append(outDeleted, offset+uint32(j))
			}
			offset += uint32(len(live))
			continue
		}
		cur := base.Fragments[byID[in.Fragment.ID]]
		var now []uint32
		if cur.Deletion != nil {
			var err error
			if now, err = t.readDeletion(ctx, cur); err != nil {
				return out, false, err
			}
		}
		now = unionPositions(now, cur.Inline) // what is deleted now, vector and inline
		for _, p := range now {
			if _, was := slices.BinarySearch(in.Deleted, p); was {
				continue
			}
			j, found := slices.BinarySearch(live, p)
			if !found {
				return out, false, nil // cannot happen: vectors only grow
			}
			outDeleted = append(outDeleted, offset+uint32(j))
		}
		if len(now) < len(in.Deleted) {
			return out, false, nil // a vector shrank: not ours to reason about
		}
		offset += uint32(len(live))
	}
	var d *Deletion
	if uint64(len(outDeleted)) == out.Rows {
		// Every row deleted: the output is dropped, so no vector is written.
		d = &Deletion{Rows: out.Rows}
		out.Deletion = &Deletion{Rows: out.Rows, CreatedVersion: version}
	} else if len(outDeleted) > 0 {
		id, err := t.putDeletion(ctx, out.File, outDeleted, &rw.firstUpload)
		if err != nil {
			return out, false, err
		}
		d = &Deletion{ID: id, Rows: uint64(len(outDeleted))}
		out.Deletion = &Deletion{ID: id, Rows: d.Rows, CreatedVersion: version}
	}
	rw.written[key] = d
	rw.Remapped += outDeletedRows(d)
	return out, true, nil
}

func outDeletedRows(d *Deletion) uint64 {
	if d == nil {
		return 0
	}
	return d.Rows
}

func sameDeletion(a, b *Deletion) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.ID == b.ID
}

// removedBy returns the kind of the commit that removed the data file key
// between ReadVersion and upTo, reading change records (or, for one not yet
// written, diffing the two manifests in memory). 0 means unknown: not found,
// or no ReadVersion.
func (rw *Rewrite) removedBy(ctx context.Context, t *Table, upTo uint64, key string) (dataset.OpKind, error) {
	if rw.ReadVersion == 0 {
		return 0, nil
	}
	if rw.removal == nil {
		rw.removal, rw.scanned = map[string]dataset.OpKind{}, rw.ReadVersion
	}
	for v := rw.scanned + 1; v <= upTo; v++ {
		c, err := t.ChangeRecord(ctx, v)
		if errors.Is(err, objstore.ErrNotExist) {
			var prev, next *Manifest
			if prev, err = t.readManifest(ctx, v-1); err == nil {
				if next, err = t.readManifest(ctx, v); err == nil {
					c = diffManifests(prev, next)
				}
			}
		}
		if err != nil {
			return 0, err
		}
		for _, r := range c.Removed {
			rw.removal[r.Key] = c.Op
		}
		rw.scanned = v
	}
	return rw.removal[key], nil
}
