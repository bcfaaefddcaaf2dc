package maintenance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/table"
)

// FleetIndexDir is the folder of the fleet index under the warehouse root
// (docs/format.md "Fleet index"). The catalog refuses a table there.
const FleetIndexDir = "_fleet/"

// fleetIndexVersion is the format of the fleet index objects.
const fleetIndexVersion = 1

// fleetIndexKeep is how many index objects below the newest are kept (a
// reader that listed one of them may still be reading it).
const fleetIndexKeep = 3

// Mark is one table's maintenance mark: what its last maintenance saw and
// left pending, so that a scan can tell from one LIST whether the table
// needs anything. docs/format.md "Fleet index" describes every field.
type Mark struct {
	Root string `json:"root"`
	// Latest and Floor are the latest version and the retention floor the
	// last maintenance planned on.
	Latest uint64 `json:"latest"`
	Floor  uint64 `json:"floor"`
	// Checked is when the last maintenance computed this mark; Updated is
	// when the mark last changed (a scan records Seen and ChangedAt).
	Checked time.Time `json:"checked"`
	Updated time.Time `json:"updated"`
	// Due: maintain again by then even if nothing changed; DueReason says why.
	Due       time.Time `json:"due"`
	DueReason string    `json:"due_reason,omitempty"`
	// Pending is the number of tracked prune ranges (enqueued, not yet
	// seen cleaned); ReplanAt is when the oldest must be re-planned.
	Pending  int       `json:"pending,omitempty"`
	ReplanAt time.Time `json:"replan_at,omitzero"`
	// PrunableAt is when the next retained version becomes prunable.
	PrunableAt time.Time `json:"prunable_at,omitzero"`
	// CompactFrags is the fragments the compaction planner would still take
	// after the last maintenance; CompactSince is since when.
	CompactFrags int       `json:"compact_frags,omitempty"`
	CompactSince time.Time `json:"compact_since,omitzero"`
	// Seen is the latest version a scan saw above Latest (a change not yet
	// maintained), ChangedAt when a scan first saw it.
	Seen      uint64    `json:"seen,omitempty"`
	ChangedAt time.Time `json:"changed_at,omitzero"`
	// Failures counts consecutive failed (or timed-out) maintenances;
	// RetryAt is the earliest next attempt; Error the last error.
	Failures int       `json:"failures,omitempty"`
	RetryAt  time.Time `json:"retry_at,omitzero"`
	Error    string    `json:"error,omitempty"`
}

// newer reports whether m should replace o when two index writers merge:
// the later maintenance wins, then the later update.
func (m Mark) newer(o Mark) bool {
	if !m.Checked.Equal(o.Checked) {
		return m.Checked.After(o.Checked)
	}
	return m.Updated.After(o.Updated)
}

// FleetIndex is the warehouse's fleet index: one mark per table, read with
// one LIST and one GET per pass for the whole fleet.
type FleetIndex struct {
	V       int             `json:"v"`
	Seq     uint64          `json:"seq"`
	Written time.Time       `json:"written"`
	Tables  map[string]Mark `json:"tables"`
}

func fleetIndexKey(root string, seq uint64) string {
	return fmt.Sprintf("%s%s%020d.json", root, FleetIndexDir, math.MaxUint64-seq)
}

func parseFleetIndexKey(root, key string) (uint64, bool) {
	rel, ok := strings.CutPrefix(key, root+FleetIndexDir)
	if !ok || len(rel) != 25 || !strings.HasSuffix(rel, ".json") {
		return 0, false
	}
	var inv uint64
	if _, err := fmt.Sscanf(rel[:20], "%d", &inv); err != nil || inv == math.MaxUint64 {
		return 0, false
	}
	return math.MaxUint64 - inv, true
}

// ReadFleetIndex reads the newest fleet index under the warehouse root:
// one LIST (max-keys 1: the keys are named by the inverted sequence
// number) and one GET. A warehouse without one has an empty index (Seq 0).
func ReadFleetIndex(ctx context.Context, store objstore.Store, root string) (*FleetIndex, error) {
	for attempt := 0; ; attempt++ {
		page, err := store.List(ctx, objstore.ListOptions{Prefix: root + FleetIndexDir, MaxKeys: 1})
		if err != nil {
			return nil, fmt.Errorf("read fleet index: %w", err)
		}
		if len(page.Objects) == 0 {
			return &FleetIndex{V: fleetIndexVersion, Tables: map[string]Mark{}}, nil
		}
		k := page.Objects[0].Key
		seq, ok := parseFleetIndexKey(root, k)
		if !ok {
			return nil, fmt.Errorf("read fleet index: %w: %s", table.ErrCorruptObject, k)
		}
		b, err := store.Get(ctx, k)
		if errors.Is(err, objstore.ErrNotExist) && attempt < 3 {
			continue // replaced and removed since the list
		}
		if err != nil {
			return nil, fmt.Errorf("read fleet index: %w", err)
		}
		var idx FleetIndex
		if err := json.Unmarshal(b, &idx); err != nil {
			return nil, fmt.Errorf("read fleet index %s: %w: %v", k, table.ErrCorruptObject, err)
		}
		if idx.V != fleetIndexVersion {
			return nil, fmt.Errorf("read fleet index %s: %w: format %d", k, table.ErrCorruptObject, idx.V)
		}
		idx.Seq = seq
		if idx.Tables == nil {
			idx.Tables = map[string]Mark{}
		}
		return &idx, nil
	}
}

// writeFleetIndex merges updates into base and writes the result as the
// next index object (PutIfAbsent: two writers never both win one sequence
// number). A writer that loses re-reads the index and merges again; the
// newer mark of each table wins (Mark.newer). keep, if not nil, drops the
// marks of tables it rejects (unregistered). Older objects beyond
// fleetIndexKeep are deleted, best effort.
func writeFleetIndex(ctx context.Context, store objstore.Store, root string, base *FleetIndex, updates map[string]Mark, keep func(string) bool, now time.Time) (*FleetIndex, error) {
	var err error
	for attempt := 0; attempt < 8; attempt++ {
		if attempt > 0 {
			if base, err = ReadFleetIndex(ctx, store, root); err != nil {
				return nil, err
			}
		}
		next := &FleetIndex{V: fleetIndexVersion, Seq: base.Seq + 1, Written: now, Tables: make(map[string]Mark, len(base.Tables)+len(updates))}
		for n, m := range base.Tables {
			if keep == nil || keep(n) {
				next.Tables[n] = m
			}
		}
		for n, m := range updates {
			// The writer's mark wins unless the index holds a strictly newer one.
			if old, ok := next.Tables[n]; !ok || !old.newer(m) || m.Root != old.Root {
				next.Tables[n] = m
			}
		}
		b, _ := json.Marshal(next)
		err = store.PutIfAbsent(ctx, fleetIndexKey(root, next.Seq), b)
		if errors.Is(err, objstore.ErrExists) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("write fleet index: %w", err)
		}
		if next.Seq > fleetIndexKeep {
			_ = store.Delete(ctx, []string{fleetIndexKey(root, next.Seq-fleetIndexKeep)})
		}
		return next, nil
	}
	return nil, fmt.Errorf("write fleet index: %w (lost %d races)", objstore.ErrExists, 8)
}

// LatestVersion returns a table's latest version with one LIST (max-keys
// 1 on the manifest keys, which sort newest first), or 0 and
// table.ErrNotATable if it has none. A stray object sorting first costs an
// Open instead.
func LatestVersion(ctx context.Context, store objstore.Store, root string) (uint64, error) {
	root = table.NormalizeRoot(root)
	prefix := root + table.VersionsPrefix
	page, err := store.List(ctx, objstore.ListOptions{Prefix: prefix, MaxKeys: 1})
	if err != nil {
		return 0, err
	}
	if len(page.Objects) == 0 {
		return 0, fmt.Errorf("%s: %w", root, table.ErrNotATable)
	}
	if v, ok := table.ParseManifestKey(strings.TrimPrefix(page.Objects[0].Key, root)); ok {
		return v, nil
	}
	t, err := table.Open(ctx, store, root, table.Options{})
	if err != nil {
		return 0, err
	}
	return t.Cached().Version, nil
}

// need is what a scan decided for one table.
func decideNeed(ref TableRef, m Mark, known bool, latest uint64, scanErr error, now time.Time) (reasons []string, upd Mark, changed bool) {
	p := ref.Policy.WithDefaults()
	if !known || m.Root != ref.Root {
		return []string{"no mark"}, m, false
	}
	if scanErr != nil {
		return []string{"scan failed: " + scanErr.Error()}, m, false
	}
	upd = m
	if latest != m.Latest && latest != m.Seen {
		upd.Seen = latest
		if upd.ChangedAt.IsZero() {
			upd.ChangedAt = now
		}
		upd.Updated = now
		changed = true
	}
	if m.Failures > 0 {
		if now.Before(m.RetryAt) {
			return nil, upd, changed // backing off: its failure delays no one
		}
		return []string{fmt.Sprintf("retry after %d failures", m.Failures)}, upd, changed
	}
	if !now.Before(m.Due) {
		reasons = append(reasons, "due: "+m.DueReason)
	}
	if latest != m.Latest {
		est := m.CompactFrags
		if latest > m.Latest {
			est += int(min(latest-m.Latest, math.MaxInt32))
		} else {
			est += p.CompactMinFragments // version went back: a recreated table
		}
		if est >= p.CompactMinFragments {
			reasons = append(reasons, fmt.Sprintf("changed: ~%d fragments to compact", est))
		} else if !upd.ChangedAt.IsZero() && now.Sub(upd.ChangedAt) >= p.CompactMaxWait {
			reasons = append(reasons, fmt.Sprintf("changed %s ago", now.Sub(upd.ChangedAt).Round(time.Second)))
		}
	}
	return reasons, upd, changed
}

// markAfter computes a table's mark after a successful maintenance at now
// from what it saw: the prune plan (versions, floor, tracked ranges) and
// the compaction planner's view of the latest manifest.
func markAfter(ref TableRef, t *table.Table, pl PrunePlan, compactFrags int, now time.Time) Mark {
	p := ref.Policy.WithDefaults()
	// Prune: retained versions in [floor, latest-KeepLast] become prunable,
	// oldest first, when their successor is older than the grace window.
	grace := RetentionGrace(t, p)
	md := newMarkDue(ref, pl, now, func(i int) (time.Time, bool) {
		if i+1 >= len(pl.vs) {
			return time.Time{}, false
		}
		return pl.vs[i+1].Time.Add(grace + time.Second), true
	})
	md.m.CompactFrags = compactFrags
	// Compaction left (stopped at a bound, or below the planner's group
	// size): due at the threshold's wait bound, at once above it.
	if compactFrags > 0 {
		md.m.CompactSince = now
		if compactFrags >= p.CompactMinFragments {
			md.set(now, "compaction left")
		} else {
			md.set(md.m.CompactSince.Add(p.CompactMaxWait), "small fragments waiting")
		}
	}
	return md.done()
}

// markDue is a mark being computed: the rules every format shares (the
// re-plan of tracked ranges, prunable versions, the full check), then the
// format's own (set), then done.
type markDue struct {
	m   Mark
	due time.Time
	why string
}

// newMarkDue starts the mark after a successful maintenance at now.
// prunableAt(i) is when stored version pl.vs[i] becomes prunable (false:
// never, e.g. the latest); only retained versions in [floor,
// latest-KeepLast] count.
func newMarkDue(ref TableRef, pl PrunePlan, now time.Time, prunableAt func(i int) (time.Time, bool)) *markDue {
	p := ref.Policy.WithDefaults()
	md := &markDue{m: Mark{Root: ref.Root, Latest: pl.Latest, Floor: pl.Floor, Checked: now, Updated: now,
		Pending: len(pl.StateAfter.Ranges)}}
	md.due, md.why = now.Add(fullCheckAfter(ref.Name, p.FullCheckEvery)), "full check"
	// Re-plan: planRanges re-sends a range when now - At > ReplanAfter.
	for _, r := range pl.StateAfter.Ranges {
		at := r.At.Add(p.ReplanAfter + time.Second)
		if md.m.ReplanAt.IsZero() || at.Before(md.m.ReplanAt) {
			md.m.ReplanAt = at
		}
	}
	md.set(md.m.ReplanAt, "re-plan of tracked ranges")
	var prunable []time.Time
	for i, v := range pl.vs {
		if v.Version < pl.Floor || pl.Latest < uint64(p.KeepLast) || v.Version > pl.Latest-uint64(p.KeepLast) {
			continue
		}
		if at, ok := prunableAt(i); ok {
			prunable = append(prunable, pl.leaseDelay(v.Version, at)) // a lease's versions: at its end
		}
	}
	slices.SortFunc(prunable, time.Time.Compare)
	if len(prunable) > 0 {
		md.m.PrunableAt = prunable[0]
		at := prunable[0].Add(p.PruneMaxWait)
		if len(prunable) >= p.PruneMinVersions {
			at = minTime(at, prunable[p.PruneMinVersions-1])
		}
		md.set(at, "versions prunable")
	}
	if pl.Prunable > 0 && len(pl.Ranges) == 0 && len(pl.StateAfter.Ranges) == 0 {
		md.set(now, "prunable versions not enqueued") // cannot happen; never skip it
	}
	return md
}

// set moves the due time up to at (zero: no rule), for reason.
func (md *markDue) set(at time.Time, reason string) {
	if !at.IsZero() && at.Before(md.due) {
		md.due, md.why = at, reason
	}
}

func (md *markDue) done() Mark {
	md.m.Due, md.m.DueReason = md.due, md.why
	return md.m
}

// carryCompactSince keeps the time small fragments were first left
// waiting across maintenances that leave some (so the wait bound counts
// from the first), and moves the due time up accordingly.
func carryCompactSince(ref TableRef, m, prev Mark) Mark {
	if m.CompactFrags == 0 || prev.CompactFrags == 0 || prev.CompactSince.IsZero() || !prev.CompactSince.Before(m.CompactSince) {
		return m
	}
	p := ref.Policy.WithDefaults()
	m.CompactSince = prev.CompactSince
	if at := m.CompactSince.Add(p.CompactMaxWait); m.CompactFrags < p.CompactMinFragments && at.Before(m.Due) {
		m.Due, m.DueReason = at, "small fragments waiting"
	}
	return m
}

// fullCheckAfter is when, after a maintenance, the table's next full check
// is due: in (every/2, every], at a point fixed by the table's name (FNV-1a),
// so that tables maintained in one pass are not all checked in one pass.
func fullCheckAfter(name string, every time.Duration) time.Duration {
	h := fnv.New64a()
	_, _ = h.Write([]byte(name))
	half := every / 2
	if half <= 0 {
		return every
	}
	return every - time.Duration(h.Sum64()%uint64(half))
}

// markFailed records a failed or timed-out maintenance: the table keeps
// its previous mark (so nothing it recorded as pending is forgotten) and
// is retried after a backoff that doubles with each failure.
func markFailed(ref TableRef, prev Mark, known bool, err error, base time.Duration, now time.Time) Mark {
	m := prev
	if !known || m.Root != ref.Root {
		m = Mark{Root: ref.Root, Due: now}
	}
	m.Failures++
	back := base << min(m.Failures-1, 16)
	if back > maxFailureBackoff || back <= 0 {
		back = maxFailureBackoff
	}
	m.RetryAt = now.Add(back)
	m.Updated = now
	m.Error = err.Error()
	if len(m.Error) > 300 {
		m.Error = m.Error[:300]
	}
	return m
}

// maxFailureBackoff caps the retry backoff of a failing table.
const maxFailureBackoff = 6 * time.Hour

// compactFragsOf is how many fragments the compaction planner would take
// from the latest manifest t holds.
func compactFragsOf(c *Compactor, t *table.Table, p Policy) int {
	m := t.Cached()
	if m == nil || c == nil || c.Planner == nil {
		return 0
	}
	n := 0
	for _, g := range c.Planner.Plan(m, p).Groups {
		n += len(g.Fragments)
	}
	return n
}
