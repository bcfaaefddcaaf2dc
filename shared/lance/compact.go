package lance

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"golang.org/x/sync/errgroup"

	"github.com/tablekeep/tablekeep/shared/clock"
	"github.com/tablekeep/tablekeep/shared/lance/lancefile"
	"github.com/tablekeep/tablekeep/shared/objstore"
)

// OutcomeUnchanged is the Outcome of a group whose output would equal its
// input: one fragment in, one out, the same rows, its deletions kept (its
// deleted rows cannot be dropped). Nothing is written or committed, so a
// dataset whose only candidates are such fragments converges: the next
// pass commits nothing either until their deletions change.
const OutcomeUnchanged = "unchanged: not committed (its output would equal its input)"

// ErrConflict: a concurrent commit conflicts with a rewrite group; the
// group was not committed (the next pass plans it again).
var ErrConflict = errors.New("lance: concurrent commit conflicts with the rewrite")

// DefaultMaxGroupFragments is CompactOptions.MaxGroupFragments' default.
const DefaultMaxGroupFragments = 16384

// CompactOptions bound a Lance compaction run.
type CompactOptions struct {
	// TargetRows: fragments with fewer physical rows are folded (Lance's
	// target_rows_per_fragment), up to this many rows written per new
	// fragment (see planGroups).
	TargetRows uint64
	// MinGroupFragments: a group folds at least this many fragments (>= 2).
	MinGroupFragments int
	// MaxGroupFragments: ... and at most this many (default 16,384: a
	// group's GETs, about 5 s of reads at S3 latency with 64 in flight; a
	// 10,000-write dataset folds to one fragment). Pages are merged
	// (lanceenc), so a group of one-row fragments makes a file of a few
	// large pages a column; before they were, a bound of 64 kept LanceDB's
	// reads of one-row pages parallel across files (docs/lance.md
	// "Figures").
	MaxGroupFragments int
	// MaxGroups bounds the groups of a run; MaxGroupBytes a group's input
	// (data and deletion files, all held in memory while it is spliced);
	// MaxInputBytes a run's.
	MaxGroups     int
	MaxGroupBytes uint64
	MaxInputBytes uint64
	// Fence, if set, is checked before each group and right before the
	// conditional put of the manifest: a holder whose lease ended commits
	// nothing.
	Fence func(context.Context) error
	// DryRun plans the groups and writes nothing.
	DryRun bool
	// CommitAttempts bounds the conditional puts lost to concurrent writers.
	CommitAttempts int
	// Clock is the manifest timestamp's clock (the real clock if nil), and
	// the clock of MaxRunDuration.
	Clock clock.Clock
	// MaxRunDuration bounds a run from its first upload to its manifest
	// PUT (default DefaultMaxRunDuration): no group is started once half
	// of it has passed, and nothing is committed after it, so a file the
	// run uploaded is committed within MaxRunDuration or never, far below
	// the orphan sweep's 7 days (docs/reliability.md), however often the
	// lease was renewed meanwhile.
	MaxRunDuration time.Duration
	// ReadConcurrency bounds a group's parallel GETs (default
	// DefaultReadConcurrency). It adds no memory: a group's files are all
	// held while it is spliced, and MaxGroupBytes bounds them.
	ReadConcurrency int
	// DropDeletedAt is Lance's materialize_deletions_threshold: a fragment
	// whose deleted rows are more than this share of its physical rows is
	// a candidate however many rows it has (rewritten alone if no
	// neighbour is a candidate), and, when it is > 0, every group is
	// written without its deleted rows (every column's pages filtered by
	// lanceenc.Filter; Lance's rewrite likewise writes only live rows), its
	// new fragment without a deletion file. 0 never drops (the deletion
	// vectors are carried, and only fragments below TargetRows are
	// candidates); 1 and above drop but make no fragment a candidate for
	// its deletions. A group with a page that cannot be filtered keeps its
	// rows and carries the deletion vector (CompactGroup.DropRefused says
	// why).
	DropDeletedAt float64
	// validate checks each spliced file before it is uploaded (nil:
	// lancefile.Validate; tests put a failing one in its place).
	validate func(name string, data []byte, want lancefile.Expect) error
}

// DefaultReadConcurrency is CompactOptions.ReadConcurrency's default:
// Lance's own for object stores (DEFAULT_CLOUD_IO_PARALLELISM, 64, in
// lance-io's object_store.rs). A group of one-row fragments is a GET per
// file: at S3's 20 ms a GET, 1,006 of them take ~0.3 s at 64 in flight,
// ~1.3 s at 16.
const DefaultReadConcurrency = 64

// DefaultMaxRunDuration is CompactOptions.MaxRunDuration's default.
const DefaultMaxRunDuration = time.Hour

// ErrRunTooLong: a compaction run passed MaxRunDuration before its
// manifest PUT; nothing was committed (its files are the sweep's).
var ErrRunTooLong = errors.New("compaction run passed its MaxRunDuration")

func (o CompactOptions) withDefaults() CompactOptions {
	if o.TargetRows == 0 {
		o.TargetRows = 1 << 20
	}
	if o.MinGroupFragments < 2 {
		o.MinGroupFragments = 2
	}
	if o.MaxGroupFragments <= 0 {
		o.MaxGroupFragments = DefaultMaxGroupFragments
	}
	o.MaxGroupFragments = max(o.MaxGroupFragments, o.MinGroupFragments)
	if o.MaxGroups <= 0 {
		o.MaxGroups = 64
	}
	if o.MaxGroupBytes == 0 {
		o.MaxGroupBytes = 256 << 20
	}
	if o.MaxInputBytes == 0 {
		o.MaxInputBytes = 1 << 30
	}
	if o.CommitAttempts <= 0 {
		o.CommitAttempts = 8
	}
	o.Clock = clock.Or(o.Clock)
	if o.MaxRunDuration <= 0 {
		o.MaxRunDuration = DefaultMaxRunDuration
	}
	if o.ReadConcurrency <= 0 {
		o.ReadConcurrency = DefaultReadConcurrency
	}
	if o.validate == nil {
		o.validate = lancefile.Validate
	}
	return o
}

// CompactGroup is one planned rewrite group.
type CompactGroup struct {
	Fragments []uint64 // consecutive fragment ids folded
	Rows      uint64   // physical rows
	Deleted   uint64   // of which deleted
	Bytes     uint64   // data file bytes
	NewID     uint64   // the new fragment's id (0 if none: every row deleted)
	// Remapped: deletions committed since the read version (a Delete or
	// Update of the group's fragments) were remapped onto the new fragment.
	Remapped bool
	// Outcome: "committed", "conflict: ...", "refused: ..." or "" (dry run,
	// or not reached).
	Outcome string
	// Refusal is the error that refused the group (Outcome "refused: ..."):
	// it wraps lancefile.ErrUnsupported, ErrMismatch, ErrCorrupt,
	// ErrUnreadable or ErrCorrupt of this package (errors.Is).
	Refusal error
	// PagesIn and Pages are the pages of the source files and of the new
	// file (pages merged by lanceenc); Unmerged names the columns whose
	// pages were copied as they are, and why.
	PagesIn, Pages int
	Unmerged       []string
	// DroppedRows: deleted rows not written to the new file (the group
	// passed DropDeletedAt); DropRefused: why they were kept although it
	// passed it (a column lanceenc cannot filter).
	DroppedRows uint64
	DropRefused string
}

// CompactReport is one compaction run's outcome.
type CompactReport struct {
	ReadVersion uint64 // the version planned on
	Version     uint64 // the version committed (0 if none)
	Groups      []CompactGroup
	// Skipped counts candidate fragments not folded and why (indexed,
	// several data files, stable row ids, ...).
	Skipped map[string]int
	// LeftFragments are candidate fragments in groups beyond the run's
	// MaxGroups or MaxInputBytes (not planned).
	LeftFragments int
	Committed     int // groups committed
	// Unchanged counts the groups not committed because their output
	// would equal their input (Outcome OutcomeUnchanged): one fragment
	// whose deleted rows cannot be dropped (DropRefused says why).
	Unchanged int
	Conflicts int // groups dropped for a concurrent commit
	Refused   int // groups refused (unsupported file contents)
	// FragmentsBefore/After are the latest version's fragments before the
	// run and in the version it committed.
	FragmentsBefore, FragmentsAfter int
	Attempts                        int // conditional puts tried
	BytesRead, BytesWritten         uint64
	Stopped                         string // why the run stopped early
	// Discarded counts the files the run wrote and deleted again (one
	// DeleteObjects a run, up to 1,000 keys): the data, deletion and
	// transaction files of groups lost to a conflict, a fence, MaxRunDuration
	// or an error, never one a manifest that landed or may have landed
	// references (docs/lance.md "Compaction"). DiscardFailed: why that delete
	// failed (the files are the orphan sweep's, as after a crash).
	Discarded     int
	DiscardFailed string
}

// Compact folds runs of consecutive small fragments of the dataset's
// latest version into one fragment each, by splicing their data files'
// pages (lancefile.SpliceWith, pages merged by lanceenc), and commits them as one Lance Rewrite: a
// transaction file and the next manifest by conditional put, rebased on
// every version committed since the read version (docs/lance.md
// "Compaction"). Fragments an index covers are left alone.
func (d *Dataset) Compact(ctx context.Context, opts CompactOptions) (*CompactReport, error) {
	o := opts.withDefaults()
	rep := &CompactReport{Skipped: map[string]int{}}
	if err := d.CheckRefs(ctx); err != nil {
		return rep, err
	}
	last, err := d.latestFile(ctx)
	if err != nil {
		return rep, err
	}
	scheme := last.Scheme
	rm, err := d.readRaw(ctx, last.Key)
	if err != nil {
		return rep, err
	}
	if rm.m.Version != last.Version {
		return rep, corrupt(last.Key, "names version %d, holds version %d", last.Version, rm.m.Version)
	}
	if err := compactable(rm); err != nil {
		return rep, err
	}
	rep.ReadVersion = rm.m.Version
	rep.FragmentsBefore = len(rm.fragments)
	plan, left := planGroups(rm, o, rep.Skipped)
	rep.LeftFragments = left
	for _, g := range plan {
		rep.Groups = append(rep.Groups, g.report())
	}
	if o.DryRun || len(plan) == 0 {
		return rep, nil
	}
	// Write each group's spliced file (the commit assigns ids).
	var done []*groupOut
	up := &uploads{kept: map[string]bool{}}
	defer up.discard(ctx, d.store, rep)
	start := o.Clock.Now()
	for i, g := range plan {
		if err := ctx.Err(); err != nil {
			rep.Stopped = "context: " + err.Error()
			break
		}
		if o.Clock.Now().Sub(start) >= o.MaxRunDuration/2 {
			rep.Stopped = fmt.Sprintf("run duration: %d of %d groups written in %s (half of MaxRunDuration)", i, len(plan), o.MaxRunDuration/2)
			break
		}
		if o.Fence != nil {
			if err := o.Fence(ctx); err != nil {
				rep.Stopped = fmt.Sprintf("lease: %d of %d groups written: %v", i, len(plan), err)
				break
			}
		}
		out, err := d.writeGroup(ctx, rm, g, o)
		// A file the splicer cannot copy, a corrupt data or deletion file,
		// or a spliced file that fails its version's reader rules
		// (lancefile.Validate) refuses its own group; the others go on.
		if errors.Is(err, lancefile.ErrUnsupported) || errors.Is(err, lancefile.ErrMismatch) ||
			errors.Is(err, lancefile.ErrCorrupt) || errors.Is(err, ErrCorrupt) || errors.Is(err, lancefile.ErrUnreadable) {
			rep.Groups[i].Outcome = "refused: " + err.Error()
			rep.Groups[i].Refusal = err
			rep.Refused++
			continue
		}
		if err != nil {
			return rep, fmt.Errorf("compact group %d: %w", i, err)
		}
		if out.unchanged {
			rep.Groups[i].Outcome = OutcomeUnchanged
			rep.Groups[i].DropRefused = out.dropRefused
			rep.Unchanged++
			rep.BytesRead += out.bytesRead
			continue
		}
		out.idx = i
		if out.path != "" {
			up.add(d.root + DataDir + out.path)
		}
		rep.Groups[i].PagesIn, rep.Groups[i].Pages, rep.Groups[i].Unmerged = out.pagesIn, out.pages, out.unmerged
		rep.Groups[i].DroppedRows, rep.Groups[i].DropRefused = out.droppedRows(), out.dropRefused
		rep.BytesRead += out.bytesRead
		rep.BytesWritten += uint64(out.size)
		done = append(done, out)
	}
	if len(done) == 0 {
		return rep, nil
	}
	return rep, d.commitRewrite(ctx, rm, scheme, done, o, rep, start, up)
}

// uploads are the files a compaction run wrote, and those of them that a
// manifest which landed, or may have landed, references (kept). When the
// run ends, every other one is deleted at once: no manifest references it
// and none ever will (its name is random, and a manifest naming it was
// either refused by its conditional put or is another writer's, checked by
// its transaction file). A crash before the delete leaves them to the
// orphan sweep.
type uploads struct {
	keys []string
	kept map[string]bool
}

func (u *uploads) add(keys ...string) { u.keys = append(u.keys, keys...) }

func (u *uploads) keep(keys []string) {
	for _, k := range keys {
		u.kept[k] = true
	}
}

// discard deletes the files not kept: one DeleteObjects (a request per
// 1,000 keys). A failure is reported, not returned: the files are orphans.
func (u *uploads) discard(ctx context.Context, store objstore.Store, rep *CompactReport) {
	var gone []string
	for _, k := range u.keys {
		if !u.kept[k] {
			gone = append(gone, k)
		}
	}
	if len(gone) == 0 {
		return
	}
	n, err := objstore.DeleteAll(ctx, store, gone, objstore.MaxDeleteKeys)
	rep.Discarded += n
	if err != nil {
		rep.DiscardFailed = err.Error()
	}
}

// latestFile finds the latest manifest: inverted names sort newest first,
// so one LIST with max-keys 1 (a writer's temporary file sorting first, or
// plain names, cost the whole listing, which also refuses a dataset named
// in both schemes).
func (d *Dataset) latestFile(ctx context.Context) (VersionFile, error) {
	prefix := d.root + VersionsDir
	p, err := d.store.List(ctx, objstore.ListOptions{Prefix: prefix, MaxKeys: 1})
	if err != nil {
		return VersionFile{}, err
	}
	if len(p.Objects) > 0 {
		o := p.Objects[0]
		if v, s, ok := ParseManifestName(strings.TrimPrefix(o.Key, prefix)); ok && s == SchemeV2 {
			return VersionFile{Version: v, Key: o.Key, Size: o.Size, LastModified: o.LastModified, Scheme: s}, nil
		}
	}
	vs, err := d.ListVersions(ctx)
	if err != nil {
		return VersionFile{}, err
	}
	if len(vs) == 0 {
		return VersionFile{}, fmt.Errorf("%s: %w", d.root, ErrNotADataset)
	}
	for _, vf := range vs {
		if vf.Scheme != vs[0].Scheme {
			return VersionFile{}, unsupported(d.root, "manifests in both naming schemes")
		}
	}
	return vs[len(vs)-1], nil
}

// compactable refuses datasets whose manifest a rewrite cannot carry.
func compactable(rm *rawManifest) error {
	if (rm.m.ReaderFlags|rm.m.WriterFlags)&FlagStableRowIDs != 0 {
		return unsupported(rm.key, "stable row ids (row-id sequences are not rechunked)")
	}
	return nil
}

func (d *Dataset) readRaw(ctx context.Context, key string) (*rawManifest, error) {
	b, err := d.store.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	return parseRawManifest(key, b)
}

// plannedGroup is a group with its fragments.
type plannedGroup struct {
	frags []rawFragment
	rows  uint64
	del   uint64
	bytes uint64
	// itself: a fragment of the group is past DropDeletedAt (the group is
	// rewritten even if it is that fragment alone).
	itself bool
}

func (g plannedGroup) ids() []uint64 {
	out := make([]uint64, len(g.frags))
	for i, f := range g.frags {
		out[i] = f.id
	}
	return out
}

func (g plannedGroup) report() CompactGroup {
	return CompactGroup{Fragments: g.ids(), Rows: g.rows, Deleted: g.del, Bytes: g.bytes}
}

// planGroups groups runs of consecutive candidate fragments, as Lance's
// plan_compaction does (optimize.rs): a fragment with one data file, not
// covered by any index, no row-id sequences, every data file of the
// dataset's file version, is a candidate when its physical rows are below
// TargetRows (it folds with candidate neighbours) or when DropDeletedAt > 0
// and its deleted share is strictly above it (Lance's
// materialize_deletions_threshold, compared with >: it is rewritten even
// alone). A group holds at most TargetRows rows written (its live rows
// when DropDeletedAt > 0, whose groups drop their deleted rows; else its
// physical rows), MaxGroupBytes and MaxGroupFragments fragments, and at
// least MinGroupFragments unless it holds a fragment past DropDeletedAt.
func planGroups(rm *rawManifest, o CompactOptions, skipped map[string]int) (plan []plannedGroup, left int) {
	var cur plannedGroup
	var total uint64
	flush := func() {
		if len(cur.frags) >= o.MinGroupFragments || (len(cur.frags) > 0 && cur.itself) {
			if len(plan) < o.MaxGroups && total+cur.bytes <= o.MaxInputBytes {
				plan = append(plan, cur)
				total += cur.bytes
			} else {
				left += len(cur.frags)
			}
		}
		cur = plannedGroup{}
	}
	// written is the rows a group (or fragment) writes.
	written := func(rows, del uint64) uint64 {
		if o.DropDeletedAt > 0 {
			return rows - del
		}
		return rows
	}
	for _, f := range rm.fragments {
		del := uint64(0)
		if f.deletion != nil {
			del = min(f.deletion.NumDeleted, f.physicalRows)
		}
		reason := ""
		switch {
		case len(f.files) != 1:
			reason = "several data files"
		case f.rowIDs:
			reason = "row-id sequences"
		case f.fileSize == 0:
			reason = "data file size not recorded (the group's memory bound needs it)"
		case rm.indexed.Contains(uint32(f.id)) || !fitsU32(f.id):
			reason = "covered by an index"
		case f.fileSize > o.MaxGroupBytes:
			reason = "data file larger than MaxGroupBytes"
		}
		itself := reason == "" && pastDeleted(del, f.physicalRows, o.DropDeletedAt)
		candidate := reason == "" && (itself || f.physicalRows < o.TargetRows)
		if reason != "" {
			skipped[reason]++
		}
		if !candidate {
			flush()
			continue
		}
		if len(cur.frags) > 0 && (written(cur.rows, cur.del)+written(f.physicalRows, del) > o.TargetRows || cur.bytes+f.fileSize > o.MaxGroupBytes || len(cur.frags) >= o.MaxGroupFragments ||
			f.fileTmpl != cur.frags[0].fileTmpl) {
			flush()
		}
		cur.frags = append(cur.frags, f)
		cur.rows += f.physicalRows
		cur.del += del
		cur.bytes += f.fileSize
		cur.itself = cur.itself || itself
	}
	flush()
	return plan, left
}

// pastDeleted: a fragment's deleted share is strictly above the threshold
// (Lance's deletion_percentage() > materialize_deletions_threshold); never
// with a threshold of 0 (dropping off) or of 1 and more (Lance's
// CompactionOptions.validate turns materialize_deletions off there).
func pastDeleted(del, rows uint64, at float64) bool {
	return at > 0 && at < 1 && rows > 0 && float64(del)/float64(rows) > at
}

// groupOut is a group's spliced file, written under data/.
type groupOut struct {
	idx       int
	g         plannedGroup
	path      string // relative to data/
	size      int
	rows      uint64
	deleted   *roaring.Bitmap // offsets in the new file
	bases     []uint64        // each fragment's first row in the new file
	bytesRead uint64
	current   []rawFragment // the group's fragments in the version committed on
	// pagesIn, pages, unmerged: lancefile.SpliceResult's.
	pagesIn, pages int
	unmerged       []string
	// dropped: the rows of the concatenated source files that were not
	// written (nil if none were dropped); a source row at concatenated
	// offset p not in dropped is at p - |dropped below p| in the new file.
	dropped     *roaring.Bitmap
	dropRefused string
	// unchanged: the output would equal the input (one fragment whose
	// deleted rows cannot be dropped); nothing was written.
	unchanged bool
}

func (g *groupOut) droppedRows() uint64 {
	if g.dropped == nil {
		return 0
	}
	return g.dropped.GetCardinality()
}

// newOffset is where row off of the group's k-th source fragment is in the
// new file; ok is false if that row was dropped (it was deleted already:
// it cannot be deleted again).
func (g *groupOut) newOffset(k int, off uint64) (uint64, bool) {
	p := g.bases[k] + off
	if g.dropped == nil {
		return p, true
	}
	if g.dropped.Contains(uint32(p)) {
		return 0, false
	}
	return p - g.droppedBelow(p), true
}

// droppedBelow counts the dropped rows at concatenated offsets < p.
func (g *groupOut) droppedBelow(p uint64) uint64 {
	if g.dropped == nil || p == 0 {
		return 0
	}
	return g.dropped.Rank(uint32(p - 1))
}

// deleteSourceRange marks deleted the new rows of source fragment k's
// offsets [0, n) (a fragment a Delete removed whole): the kept rows of a
// contiguous source range are contiguous in the new file.
func (g *groupOut) deleteSourceRange(k int, n uint64) {
	lo, hi := g.bases[k], g.bases[k]+n
	nlo, nhi := lo-g.droppedBelow(lo), hi-g.droppedBelow(hi)
	if nhi > nlo {
		g.deleted.AddRange(nlo, nhi)
	}
}

// writeGroup reads a group's data and deletion files, splices the data
// files and writes the result under data/ (a name no one else writes).
func (d *Dataset) writeGroup(ctx context.Context, rm *rawManifest, g plannedGroup, o CompactOptions) (*groupOut, error) {
	datas := make([][]byte, len(g.frags))
	dels := make([]*roaring.Bitmap, len(g.frags))
	eg, gctx := errgroup.WithContext(ctx)
	eg.SetLimit(o.ReadConcurrency)
	for i, f := range g.frags {
		eg.Go(func() (err error) {
			datas[i], err = d.store.Get(gctx, d.root+DataDir+f.path)
			if err != nil {
				return err
			}
			if f.deletion != nil {
				dels[i], err = d.readDeletion(gctx, f)
			}
			return err
		})
	}
	if err := eg.Wait(); err != nil {
		return nil, err
	}
	names := make([]string, len(g.frags))
	files := make([]*lancefile.File, len(g.frags))
	out := &groupOut{g: g, deleted: roaring.New()}
	var base uint64
	for i, f := range g.frags {
		names[i] = d.root + DataDir + f.path
		out.bytesRead += uint64(len(datas[i]))
		lf, err := lancefile.Parse(names[i], datas[i])
		if err != nil {
			return nil, err
		}
		if lf.Rows != f.physicalRows {
			return nil, fmt.Errorf("%s: %w: %d rows, the manifest says %d", names[i], lancefile.ErrUnsupported, lf.Rows, f.physicalRows)
		}
		if ma, mi := lf.Version(); uint64(ma) != f.major || uint64(mi) != f.minor {
			return nil, fmt.Errorf("%s: %w: file version %d.%d, the manifest says %d.%d", names[i], lancefile.ErrMismatch, ma, mi, f.major, f.minor)
		}
		files[i] = lf
		out.bases = append(out.bases, base)
		if dels[i] != nil {
			it := dels[i].Iterator()
			for it.HasNext() {
				out.deleted.Add(uint32(base + uint64(it.Next())))
			}
		}
		base += f.physicalRows
	}
	if n := out.deleted.GetCardinality(); n >= base {
		out.rows = base
		return out, nil // every row deleted: no new fragment, nothing written
	}
	var res *lancefile.SpliceResult
	var err error
	if n := out.deleted.GetCardinality(); o.DropDeletedAt > 0 && n > 0 {
		res, err = lancefile.SpliceWith(names, files, lancefile.SpliceOptions{MergePages: true, Drop: out.deleted})
		switch {
		case err == nil:
			out.dropped, out.deleted = out.deleted, roaring.New()
		case errors.Is(err, lancefile.ErrUnfilterable):
			out.dropRefused = err.Error() // keep the rows and the deletion vector
			if len(g.frags) == 1 {
				// One fragment in, one out, the same rows and deletions:
				// no rewrite (a new version and file each pass, for ever).
				out.unchanged = true
				return out, nil
			}
			res, err = nil, nil
		default:
			return nil, err
		}
	}
	if res == nil {
		if res, err = lancefile.SpliceWith(names, files, lancefile.SpliceOptions{MergePages: true}); err != nil {
			return nil, err
		}
	}
	out.pagesIn, out.pages, out.unmerged = res.PagesIn, res.Pages, res.Unmerged
	out.rows = res.Rows
	out.size = len(res.Data)
	out.path = newName() + ".lance"
	// No file a reader of its version would refuse is uploaded, let alone
	// committed (docs/reliability.md "No unreadable Lance version").
	if err := o.validate(d.root+DataDir+out.path, res.Data, lancefile.Expect{
		Rows: res.Rows, Major: files[0].Major, Minor: files[0].Minor, Schema: files[0].Schema,
	}); err != nil {
		return nil, err
	}
	if err := d.store.PutIfAbsent(ctx, d.root+DataDir+out.path, res.Data); err != nil {
		return nil, err
	}
	return out, nil
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

// newName is a new data file's name without ".lance": Lance's own
// (dataFileStem: 24 binary digits, 26 hex digits).
func newName() string { return dataFileStem() }

func newUUID() string {
	b := randomBytes(16)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// commitRewrite commits the written groups as one Rewrite on the latest
// version, rebased across every version committed since the read version:
// a group is dropped (conflict) if a later transaction touched one of its
// fragments, an index now covers one, or the fragments are no longer the
// same consecutive run; a transaction that replaced, restored or reshaped
// the dataset drops every group. A lost conditional put re-reads and
// retries, at most CommitAttempts times.
// start is when the run began uploading (MaxRunDuration counts from it).
// The files of a group dropped, and of an attempt whose put was refused,
// are discarded (uploads); those of an attempt whose put had an unknown
// outcome are kept.
func (d *Dataset) commitRewrite(ctx context.Context, planned *rawManifest, scheme NamingScheme, done []*groupOut, o CompactOptions, rep *CompactReport, start time.Time, up *uploads) error {
	base := planned
	checked := planned.m.Version // versions up to this one are rebased on
	live := done
	removed := map[uint64]bool{}     // fragments a Delete or Update removed whole since
	won := map[uint64]*rawManifest{} // versions read after a lost put
	committed := func(v uint64, nfrags int, live []*groupOut, keys []string) {
		up.keep(keys)
		rep.Version = v
		rep.FragmentsAfter = nfrags
		for _, g := range live {
			rep.Groups[g.idx].Outcome = "committed"
			rep.Committed++
		}
	}
	for attempt := 0; attempt < o.CommitAttempts; attempt++ {
		// Rebase on what was committed since.
		latest, err := d.probeLatest(ctx, scheme, checked)
		if err != nil {
			return err
		}
		for v := checked + 1; v <= latest; v++ {
			key := d.root + VersionsDir + ManifestName(v, scheme)
			rm := won[v]
			if rm == nil {
				if rm, err = d.readRaw(ctx, key); err != nil {
					return fmt.Errorf("rebase on version %d: %w", v, err)
				}
			}
			if rm.m.Version != v {
				return corrupt(key, "names version %d, holds version %d", v, rm.m.Version)
			}
			eff, err := d.effectOf(ctx, rm)
			if err != nil {
				return fmt.Errorf("rebase on version %d: %w", v, err)
			}
			var keep []*groupOut
			for _, g := range live {
				why := ""
				switch {
				case eff.all:
					why = fmt.Sprintf("version %d: operation %d", v, eff.op)
				case touches(eff, g) && !eff.deletesOnly:
					why = fmt.Sprintf("version %d (operation %d) changed a fragment of the group", v, eff.op)
				}
				if why != "" {
					rep.Groups[g.idx].Outcome = "conflict: " + why
					rep.Conflicts++
					continue
				}
				keep = append(keep, g)
			}
			for id := range eff.removed {
				removed[id] = true
			}
			live, base, checked = keep, rm, v
		}
		if err := compactable(base); err != nil {
			return err
		}
		// The fragments must still be there with the same rows (a Delete
		// or Update may have deleted some, or removed a fragment whole:
		// those deletions are remapped onto the new fragment), consecutive,
		// unindexed, under the same schema.
		pos := map[uint64]int{}
		for i, f := range base.fragments {
			pos[f.id] = i
		}
		var keep []*groupOut
		for _, g := range live {
			why := ""
			if string(base.schema) != string(planned.schema) {
				why = "the schema changed"
			}
			prev := -1
			var present []rawFragment
			var redo []int
			for k, f := range g.g.frags {
				if why != "" {
					break
				}
				i, ok := pos[f.id]
				if !ok {
					if removed[f.id] {
						redo = append(redo, k)
						continue
					}
					why = fmt.Sprintf("fragment %d is gone", f.id)
					break
				}
				bf := base.fragments[i]
				switch {
				case prev >= 0 && i != prev+1:
					why = "its fragments are no longer consecutive"
				case bf.dataPart != f.dataPart:
					why = fmt.Sprintf("fragment %d holds other data", f.id)
				case base.indexed.Contains(uint32(f.id)):
					why = fmt.Sprintf("fragment %d is indexed now", f.id)
				}
				prev = i
				if string(bf.raw) != string(f.raw) {
					redo = append(redo, k)
				}
				present = append(present, bf)
			}
			if why == "" && len(present) == 0 {
				why = "every fragment was deleted since"
			}
			if why != "" {
				rep.Groups[g.idx].Outcome = fmt.Sprintf("conflict: version %d: %s", base.m.Version, why)
				rep.Conflicts++
				continue
			}
			// Remap what was deleted since (deletions only grow).
			for _, k := range redo {
				f := g.g.frags[k]
				i, ok := pos[f.id]
				switch {
				case !ok:
					g.deleteSourceRange(k, f.physicalRows)
				case base.fragments[i].deletion != nil:
					bm, err := d.readDeletion(ctx, base.fragments[i])
					if err != nil {
						return fmt.Errorf("remap the deletions of fragment %d: %w", f.id, err)
					}
					it := bm.Iterator()
					for it.HasNext() {
						// readDeletion bounds the offsets by the fragment's rows.
						if p, ok := g.newOffset(k, uint64(it.Next())); ok { // a dropped row is deleted already
							g.deleted.Add(uint32(p))
						}
					}
				}
				rep.Groups[g.idx].Remapped = true
			}
			g.current = present
			keep = append(keep, g)
		}
		live = keep
		if len(live) == 0 {
			return nil
		}
		next := base.m.Version + 1
		maxID := base.maxFragmentID()
		replace := map[uint64][]byte{} // first old id -> new fragment ("" none)
		newIDs := map[uint64]uint64{}  // first old id -> the new fragment's id
		drop := map[uint64]bool{}
		var groups []rewriteGroupTxn
		var dels []struct {
			key  string
			data []byte
		}
		for _, g := range live {
			var newFrag []byte
			tg := rewriteGroupTxn{}
			for _, f := range g.current {
				tg.old = append(tg.old, f.raw)
				drop[f.id] = true
			}
			rep.Groups[g.idx].NewID = 0
			if g.path != "" && g.deleted.GetCardinality() < g.rows {
				maxID++
				if !fitsU32(maxID) {
					return unsupported(d.root, "fragment id %d beyond 32 bits", maxID)
				}
				rep.Groups[g.idx].NewID = maxID
				var df *DeletionFile
				if n := g.deleted.GetCardinality(); n > 0 {
					df = &DeletionFile{Type: 1, ReadVersion: base.m.Version, ID: binary.LittleEndian.Uint64(randomBytes(8)) >> 1, NumDeleted: n}
					b, err := encodeDeletionBitmap(g.deleted)
					if err != nil {
						return err
					}
					dels = append(dels, struct {
						key  string
						data []byte
					}{d.root + Fragment{ID: maxID, Deletion: df}.DeletionKey(), b})
				}
				newFrag = newFragment(maxID, newDataFile(base.key, g.g.frags[0].files[0], g.path, uint64(g.size)), df, g.rows)
				tg.new = append(tg.new, newFrag)
			}
			replace[g.current[0].id] = newFrag
			newIDs[g.current[0].id] = maxID
			groups = append(groups, tg)
		}
		// The manifest lists its fragments by id, as Lance's commit sorts
		// them (transaction.rs: "a fragment ... may not belong at the end
		// of the fragments list"): LanceDB's optimize() fails on a list out
		// of order ("integers are ordered up to the 0th element"), which a
		// new fragment in place of a group followed by a fragment left
		// alone would make.
		type listed struct {
			id  uint64
			raw []byte
		}
		var order []listed
		for _, f := range base.fragments {
			if nf, ok := replace[f.id]; ok {
				if nf != nil {
					order = append(order, listed{newIDs[f.id], nf})
				}
				continue
			}
			if !drop[f.id] {
				order = append(order, listed{f.id, f.raw})
			}
		}
		slices.SortStableFunc(order, func(a, b listed) int { return cmp.Compare(a.id, b.id) })
		frags := make([][]byte, len(order))
		for i, l := range order {
			frags[i] = l.raw
		}
		uuid := newUUID()
		txnName := fmt.Sprintf("%d-%s.txn", base.m.Version, uuid)
		ts := o.Clock.Now()
		manifest := base.encode(nextManifest{Version: next, Timestamp: ts, Fragments: frags, MaxFragmentID: maxID, TransactionFile: txnName})
		// keys are the files this attempt's manifest references that the
		// run wrote.
		var keys []string
		for _, g := range live {
			if g.path != "" {
				keys = append(keys, d.root+DataDir+g.path)
			}
		}
		for _, dl := range dels {
			up.add(dl.key)
			keys = append(keys, dl.key)
			if err := d.store.PutIfAbsent(ctx, dl.key, dl.data); err != nil {
				return err
			}
		}
		txnKey := d.root + TransactionsDir + txnName
		up.add(txnKey)
		keys = append(keys, txnKey)
		if err := d.store.PutIfAbsent(ctx, txnKey, encodeRewrite(base.m.Version, uuid, groups)); err != nil {
			return err
		}
		if o.Fence != nil {
			if err := o.Fence(ctx); err != nil {
				rep.Stopped = "lease: nothing committed: " + err.Error()
				return nil
			}
		}
		if el := o.Clock.Now().Sub(start); el > o.MaxRunDuration {
			rep.Stopped = fmt.Sprintf("run duration: nothing committed: %v (%s since the first upload)", ErrRunTooLong, el)
			return nil
		}
		rep.Attempts++
		mkey := d.root + VersionsDir + ManifestName(next, scheme)
		err = d.store.PutIfAbsent(ctx, mkey, manifest)
		if errors.Is(err, objstore.ErrExists) {
			// A writer won version next: rebase on it. The manifest that
			// won is read now (the rebase uses it): if it names this
			// attempt's transaction file, the put landed after all (a
			// retried request whose first response was lost).
			w, err := d.readRaw(ctx, mkey)
			if err != nil {
				up.keep(keys) // unverified: left to the sweep
				return fmt.Errorf("rebase on version %d: %w", next, err)
			}
			if w.m.TransactionFile == txnName {
				committed(next, len(frags), live, keys)
				return nil
			}
			won[next] = w
			continue
		}
		if err != nil {
			up.keep(keys) // unknown outcome: the manifest may have landed
			return err
		}
		committed(next, len(frags), live, keys)
		return nil
	}
	for _, g := range live {
		rep.Groups[g.idx].Outcome = "conflict: conditional put lost every attempt"
		rep.Conflicts++
	}
	return fmt.Errorf("%s: %w: %d conditional puts lost", d.root, ErrConflict, o.CommitAttempts)
}

func touches(e txnEffect, g *groupOut) bool {
	for _, f := range g.g.frags {
		if e.touched[f.id] {
			return true
		}
	}
	return false
}

// effectOf reads the transaction that wrote a version (inline, or its
// transaction file). A version without one conflicts with everything.
func (d *Dataset) effectOf(ctx context.Context, rm *rawManifest) (txnEffect, error) {
	b := rm.txn
	if b == nil && rm.m.TransactionFile != "" {
		var err error
		if b, err = d.store.Get(ctx, d.root+TransactionsDir+rm.m.TransactionFile); err != nil {
			return txnEffect{}, err
		}
	}
	if b == nil {
		return txnEffect{all: true}, nil
	}
	return decodeTxnEffect(rm.key, b)
}

// probeLatest finds the latest version at or after known: one LIST with
// max-keys 1 for inverted names; HEADs of known+1, known+2, ... for plain
// ones (Lance commits n+1 only after n).
func (d *Dataset) probeLatest(ctx context.Context, scheme NamingScheme, known uint64) (uint64, error) {
	prefix := d.root + VersionsDir
	if scheme == SchemeV2 {
		p, err := d.store.List(ctx, objstore.ListOptions{Prefix: prefix, MaxKeys: 1})
		if err != nil {
			return 0, err
		}
		if len(p.Objects) > 0 {
			if v, s, ok := ParseManifestName(strings.TrimPrefix(p.Objects[0].Key, prefix)); ok && s == SchemeV2 && v >= known {
				return v, nil
			}
		}
		// A writer's temporary file sorts first (or vanished since the
		// listing): the whole listing.
		vs, err := d.ListVersions(ctx)
		if err != nil {
			return 0, err
		}
		if len(vs) == 0 || vs[len(vs)-1].Version < known {
			return 0, fmt.Errorf("%s: %w: no version at or after %d", d.root, ErrNotADataset, known)
		}
		return vs[len(vs)-1].Version, nil
	}
	v := known
	for {
		_, err := d.store.Head(ctx, prefix+ManifestName(v+1, scheme))
		if errors.Is(err, objstore.ErrNotExist) {
			return v, nil
		}
		if err != nil {
			return 0, err
		}
		v++
	}
}

// Compact is the Source's compaction capability: Dataset.Compact on its
// dataset (the maintenance runner calls it under the table's lease, with
// Fence checking that lease, before the prune).
func (s *Source) Compact(ctx context.Context, opts CompactOptions) (*CompactReport, error) {
	return s.ds.Compact(ctx, opts)
}

// String is a group in one line (a dry run lists them): the fragments
// folded, their rows and bytes, and the outcome.
func (g CompactGroup) String() string {
	ids := g.Fragments
	span := fmt.Sprintf("%d fragments", len(ids))
	if len(ids) > 0 {
		span = fmt.Sprintf("fragments %d..%d (%d)", ids[0], ids[len(ids)-1], len(ids))
	}
	s := fmt.Sprintf("%s: %d rows (%d deleted), %d bytes", span, g.Rows, g.Deleted, g.Bytes)
	if g.DroppedRows > 0 {
		s += fmt.Sprintf(", %d deleted rows dropped", g.DroppedRows)
	}
	if g.DropRefused != "" {
		s += ", deleted rows kept: " + g.DropRefused
	}
	if g.Outcome != "" {
		s += ": " + g.Outcome
	}
	return s
}
