package maintenance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tablekeep/tablekeep/shared/clock"
	"github.com/tablekeep/tablekeep/shared/dataset"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/progress"
	"github.com/tablekeep/tablekeep/shared/table"
	"github.com/tablekeep/tablekeep/shared/telemetry"
)

// SweepResult reports one orphan sweep.
type SweepResult struct {
	Listed     int // data and deletion files listed
	Referenced int // of those, referenced by a retained version
	Young      int // unreferenced but not older than the grace window plus the margin
	Foreign    int // names this format does not write: left alone
	Deleted    int
	Planned    []string // with DryRun: what would be deleted
	Requests   int
	// DanglingTags are tags naming a version whose manifest is gone: the
	// sweep reports them and goes on (they protect nothing).
	DanglingTags []string
	// Bytes is the size of the files deleted (with DryRun: that would be).
	Bytes int64
	// Manifests is how many stored manifests a dataset of another format's
	// sweep read (SweepSourceFiles: every stored version's).
	Manifests int `json:",omitempty"`
	// Skipped says why nothing was swept: a dataset whose format
	// SweepOptions.Sources does not know, or whose Source is neither
	// TableBacked nor a SweepSource (docs/lance.md).
	Skipped string `json:",omitempty"`
}

// Sweep deletes files under data/ and _deletions/ that no retained version
// references and that are older than RetentionGrace (the longer of the
// policy's and the writers' grace windows, plus table.SafetyMargin):
// leftovers of failed commits, crashed compactions, and files kept for tags
// since removed.
//
// now must be read before Sweep is called: files are listed first and
// references read after. A writer commits a file only while it is at most
// WriterGrace old by the writer's clock, and its manifest lands at most
// MaxCommitDuration after that check; so a file a writer may still commit
// has now - mod <= WriterGrace + MaxCommitDuration + skew, which the
// threshold's margin covers, and a file committed after the references
// were read is kept.
//
// The references are those of the versions at or above the trusted floor
// (the planner's rule, docs/format.md 2.4), not the readers' floor.
func Sweep(ctx context.Context, t *table.Table, p Policy, now time.Time, maxDeletes int, dryRun bool) (SweepResult, error) {
	res, _, err := sweep(ctx, t, p, now, maxDeletes, dryRun)
	return res, err
}

// sweep is Sweep; it also returns the floor the references were counted
// from (0 until they were read).
func sweep(ctx context.Context, t *table.Table, p Policy, now time.Time, maxDeletes int, dryRun bool) (SweepResult, uint64, error) {
	p = p.WithDefaults()
	grace := RetentionGrace(t, p)
	var res SweepResult
	type cand struct {
		key  string
		mod  time.Time
		size int64
	}
	// data/ and _deletions/ are listed at once; candidates keep the serial
	// order (data files first).
	prefixes := []string{table.DataPrefix, table.DeletionsPrefix}
	listed := make([][]cand, len(prefixes))
	fns := make([]func(context.Context) error, len(prefixes))
	for i, prefix := range prefixes {
		fns[i] = func(ctx context.Context) error {
			return objstore.ListAll(ctx, t.Store(), t.Root()+prefix, "", func(o objstore.ObjectInfo) error {
				listed[i] = append(listed[i], cand{o.Key, o.LastModified, o.Size})
				return nil
			})
		}
	}
	err := inParallel(ctx, fns...)
	var cands []cand
	for _, l := range listed {
		cands = append(cands, l...)
	}
	res.Listed = len(cands)
	if err != nil {
		return res, 0, err
	}
	refs, floor, dangling, err := retainedReferences(ctx, t)
	res.DanglingTags = dangling
	if err != nil {
		return res, floor, err
	}
	var del []string
	size := map[string]int64{}
	for _, c := range cands {
		rel := strings.TrimPrefix(c.key, t.Root())
		switch {
		case refs[rel]:
			res.Referenced++
		case !table.IsDataKey(rel):
			res.Foreign++
		case now.Sub(c.mod) <= grace:
			res.Young++
		case maxDeletes > 0 && len(del) >= maxDeletes:
		default:
			del = append(del, c.key)
			size[c.key] = c.size
		}
	}
	if dryRun {
		res.Planned = del
		for _, k := range del {
			res.Bytes += size[k]
		}
		return res, floor, nil
	}
	// The latest version, read again from the store, is never deleted
	// (guard.go): the whole sweep deletes nothing if it would.
	guard := newLatestGuard(t.Root(), tableLatest(t.Store(), t.Root(), t.Options()))
	if err := guard.check(ctx, del); err != nil {
		return res, floor, err
	}
	n, reqs, err := deleteSwept(ctx, guardedStore{t.Store(), guard}, del, p.DeleteBatch)
	res.Deleted = n
	var failed map[string]bool
	var de *objstore.DeleteError
	if errors.As(err, &de) {
		failed = map[string]bool{}
		for _, f := range de.Failed {
			failed[f.Key] = true
		}
	}
	if err == nil || de != nil {
		for _, k := range del {
			if !failed[k] {
				res.Bytes += size[k]
			}
		}
	}
	res.Requests = reqs
	return res, floor, err
}

// retainedReferences returns every data and deletion file (relative to the
// root) that a retained version references: the latest manifest, files
// removed by versions (lo, latest] (so referenced by a version at or above
// lo), and the manifests of tagged versions; and lo. lo is the trusted
// floor (trustedFloor: the planner's rule, docs/format.md 2.4), not the
// readers' floor: a floor the planner does not trust (the legacy object, an
// unstamped marker, another history's stamped marker) keeps the versions
// below it, so their files count too. A missing change record is computed
// from the manifests, never written (a cleaner may just have deleted it).
// Tags naming a version whose manifest is gone are returned as dangling,
// not as an error.
func retainedReferences(ctx context.Context, t *table.Table) (map[string]bool, uint64, []string, error) {
	// The floor and the version listing are read at once, before the
	// tags: a tag made after the tags are read names a version at or
	// above the readers' floor then, so at or above lo, and its files are
	// in the change records read below. The latest manifest (the
	// listing's newest) and the tags are then read at once.
	listedAt := t.Options().Clock.Now()
	var fr table.FloorRead
	var vs []dataset.VersionInfo
	err := inParallel(ctx,
		func(ctx context.Context) (err error) { fr, err = t.ReadFloor(ctx); return err },
		func(ctx context.Context) (err error) { vs, err = t.Versions(ctx); return err },
	)
	if err != nil {
		return nil, 0, nil, err
	}
	if len(vs) == 0 {
		return nil, 0, nil, fmt.Errorf("sweep %s: %w", t.Root(), table.ErrNotATable)
	}
	floor := trustedFloor(fr, vs)
	var m *table.Manifest
	var tags map[string]uint64
	err = inParallel(ctx,
		func(ctx context.Context) (err error) {
			m, err = t.RefreshListed(ctx, vs[len(vs)-1].Version, listedAt)
			return err
		},
		func(ctx context.Context) (err error) { tags, err = t.Tags(ctx); return err },
	)
	if err != nil {
		return nil, 0, nil, err
	}
	var mu sync.Mutex
	refs := map[string]bool{}
	addManifest := func(m *table.Manifest) {
		mu.Lock()
		defer mu.Unlock()
		for _, f := range m.Fragments {
			refs[f.File.DataKey()] = true
			if f.Deletion != nil {
				refs[table.DeletionKey(f.File, f.Deletion.ID)] = true
			}
		}
	}
	addManifest(m)
	// The change records of (floor, latest] and the tagged manifests are
	// read concurrently (bounded); refs is a set, so the order they land in
	// does not matter.
	first := max(floor, 1) + 1
	var records int
	if m.Version >= first {
		records = int(m.Version - first + 1)
	}
	// On format 3 most versions have no record (docs/format.md 4.7): where
	// the latest manifest's record index does not cover (floor, latest],
	// one listing of the records says which have one, so that a version
	// without one costs one GET (below), not a GET that fails and then two.
	// (A range the index covers costs no listing: it names every record.)
	var listed map[uint64]bool
	if _, known := m.HasRecord(first); m.Format >= 3 && records > 0 && !known {
		_, present, err := missingChangeRecords(ctx, t, first, m.Version)
		if err != nil {
			return nil, 0, nil, err
		}
		listed = make(map[uint64]bool, len(present))
		for _, v := range present {
			listed[v] = true
		}
	}
	names := slices.Sorted(maps.Keys(tags))
	dangling := make([]string, len(names))
	err = forEachTick(ctx, "reading manifests", records+len(names), func(ctx context.Context, i int) error {
		if i < records {
			r := first + uint64(i)
			if has, known := m.HasRecord(r); known && !has {
				return nil // format 3: removed no file, has no record (docs/format.md 4.7)
			}
			var cr *dataset.ChangeRecord
			err := objstore.ErrNotExist
			if listed == nil || listed[r] {
				cr, err = t.ChangeRecord(ctx, r)
			}
			if errors.Is(err, objstore.ErrNotExist) {
				// No record (empty, or lost in a crash after the commit):
				// version r removed at most the files of version r-1, a
				// retained version (r-1 >= floor), so all of them are kept.
				prev, err := t.ReadManifest(ctx, r-1)
				if err != nil {
					return fmt.Errorf("sweep: change record %d missing and version %d unreadable: %w", r, r-1, err)
				}
				addManifest(prev)
				return nil
			}
			if err != nil {
				return err
			}
			mu.Lock()
			for _, rf := range cr.Removed {
				refs[rf.Key] = true
			}
			mu.Unlock()
			return nil
		}
		name := names[i-records]
		v := tags[name]
		snap, err := t.Checkout(ctx, v)
		if errors.Is(err, table.ErrVersionNotFound) || errors.Is(err, table.ErrVersionPruned) || errors.Is(err, objstore.ErrNotExist) {
			dangling[i-records] = fmt.Sprintf("%s@%d", name, v)
			return nil
		}
		if err != nil {
			return fmt.Errorf("sweep: tagged version %d: %w", v, err)
		}
		addManifest(snap.Manifest())
		return nil
	})
	if err != nil {
		return nil, 0, nil, err
	}
	var out []string
	for _, d := range dangling {
		if d != "" {
			out = append(out, d)
		}
	}
	return refs, floor, out, nil
}

// trustedFloor is the floor the sweep counts references from: the
// planner's trust rule (trustFloor: FloorRead.Prove against the version
// listing vs), so the highest stamped marker's floor when its version's
// manifest is listed with the marker's stamp. Otherwise (the legacy
// object, unstamped markers, another history's stamped marker, no
// marker) every stored version's references count: the floor is the
// oldest version of the run of stored versions that ends at the latest.
// A stored version below a gap in the listing is below the floor
// (docs/format.md 8.6: its successor was pruned, and only the cleaner
// deletes manifests, below the floor): it is tagged (the tags' manifests
// are read) or being cleaned, and its change records may be gone.
func trustedFloor(fr table.FloorRead, vs []dataset.VersionInfo) uint64 {
	if f := fr.Prove(listedIn(vs)).Floor; f > 0 {
		return f
	}
	i := len(vs) - 1
	for i > 0 && vs[i-1].Version+1 == vs[i].Version {
		i--
	}
	return vs[i].Version
}

// SweepOptions configure SweepTable.
type SweepOptions struct {
	Now        time.Time
	MaxDeletes int  // 0: no bound
	DryRun     bool // list what would be deleted; delete nothing
	Logger     *slog.Logger
	Clock      clock.Clock        // times the step (default the real clock)
	Metrics    *telemetry.Metrics // ObjectsDeleted, BytesDeleted
	Table      table.Options      // for opening the table (Grace is the policy's)
	// Sources opens the dataset (e.g. formats.Open; nil: OpenTableSource,
	// which knows tablekeep's own format only: another is
	// ErrUnknownFormat, nothing listed or deleted).
	Sources SourceOpener
}

// SweepTable opens ref's Source (o.Sources; without it OpenTableSource)
// on a request-counting view of store, sweeps it, and reports the step in
// one log line ("sweep") and in the metrics. A TableBacked source is swept
// by Sweep over its table (the files its stored manifests reference are
// retained); a SweepSource by SweepSourceFiles; any other is skipped
// (SweepResult.Skipped), nothing listed or deleted.
func SweepTable(ctx context.Context, store objstore.Store, ref TableRef, o SweepOptions) (SweepResult, error) {
	ctx = progress.Named(progress.Named(ctx, ref.Name), "sweep")
	clock := clock.Or(o.Clock)
	start := clock.Now()
	st := objstore.NewCounting(store)
	var res SweepResult
	var floor, latest uint64
	src, err := openWith(ctx, o.Sources, st, ref)
	if errors.Is(err, ErrUnknownFormat) {
		res.Skipped, err = fmt.Sprintf("format %q: no opener for it: nothing swept", ref.Format), nil
	} else if err == nil {
		if tb, ok := src.(TableBacked); ok {
			opts := o.Table
			opts.Grace = ref.Policy.WithDefaults().Grace
			var t *table.Table
			if t, err = tb.OpenTable(ctx, opts); err == nil {
				latest = t.Cached().Version
				res, floor, err = sweep(ctx, t, ref.Policy, o.Now, o.MaxDeletes, o.DryRun)
			}
		} else if ss, ok := src.(SweepSource); ok {
			res, err = SweepSourceFiles(ctx, src, ss, ref.Policy, o.Now, o.MaxDeletes, o.DryRun)
		} else {
			res.Skipped = fmt.Sprintf("format %q: its reader has no orphan sweep: nothing swept", ref.Format)
		}
	}
	o.Metrics.Count(telemetry.ObjectsDeleted, res.Deleted)
	if !o.DryRun {
		o.Metrics.Add(telemetry.BytesDeleted, telemetry.Bytes, float64(res.Bytes))
	}
	if o.Logger != nil {
		level, attrs := slog.LevelInfo, []slog.Attr{
			slog.String("step", "sweep"), slog.String("table", ref.Name), formatAttr(ref),
			slog.Bool("dry_run", o.DryRun),
		}
		if res.Skipped != "" {
			attrs = append(attrs, slog.String("skipped", res.Skipped))
		} else {
			if latest != 0 {
				attrs = append(attrs, slog.Group("versions", slog.Uint64("latest", latest), slog.Uint64("floor", floor)))
			} else {
				attrs = append(attrs, slog.Int("manifests", res.Manifests))
			}
			attrs = append(attrs, slog.Int("listed", res.Listed), slog.Int("referenced", res.Referenced),
				slog.Int("young", res.Young), slog.Int("foreign", res.Foreign), slog.Int("deleted", res.Deleted),
				slog.Int("planned", len(res.Planned)), slog.Any("dangling_tags", res.DanglingTags),
				telemetry.Requests(st.Counts()), slog.Int64("bytes", res.Bytes), slog.Int64("duration_ms", clock.Now().Sub(start).Milliseconds()))
		}
		if err != nil {
			level = slog.LevelError
			attrs = append(attrs, slog.String("err", err.Error()))
		}
		o.Logger.LogAttrs(ctx, level, "maintenance step", attrs...)
	}
	return res, err
}
