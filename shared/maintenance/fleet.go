package maintenance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/table"
)

// FleetIndexDir is the folder of the fleet index under the warehouse root
// (docs/format.md "Fleet index"). The catalog refuses a table there.
const FleetIndexDir = "_fleet/"

// fleetShardDir is the folder of the index shards under FleetIndexDir.
const fleetShardDir = FleetIndexDir + "index/"

// The fan-out's objects under FleetIndexDir (written by awsfn; the layout
// of _fleet/ is described here and in docs/format.md 2.6): a retry marker
// per table in retry, FleetRetryDir + name, and an inline run record per
// scheduled run working inline, FleetInlineRunPrefix + "/" + id + ".json"
// (FleetInlineRunPrefix + ".json" in earlier releases).
const (
	FleetRetryDir        = FleetIndexDir + "retry/"
	FleetInlineRunPrefix = FleetIndexDir + "inline-run"
)

// FleetShards is the number of shards of the fleet index: a table's mark
// lives in shard FleetShardOf(name), so one maintenance rewrites the marks
// of about 1/FleetShards of the fleet, and a scan reads at most
// FleetShards objects (one GET per shard holding a mark) whatever the
// number of tables.
const FleetShards = 256

// fleetIndexVersion is the format of the fleet index objects.
const fleetIndexVersion = 2

// fleetIndexKeep is how many objects below the newest a shard keeps (a
// reader that listed one of them may still be reading it; one whose GET
// finds it gone reads the shard again).
const fleetIndexKeep = 1

// fleetIndexTries bounds a shard write's attempts (a lost PutIfAbsent race,
// or a write that is not the newest once written).
const fleetIndexTries = 8

// FleetShardOf is the index shard of a table's mark: FNV-1a 32 of its
// registered name, modulo FleetShards.
func FleetShardOf(name string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(name))
	return int(h.Sum32() % FleetShards)
}

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
	// CompactFailures counts consecutive maintenances whose compaction
	// failed while pruning succeeded; until CompactRetryAt compaction is
	// not tried (pruning keeps its own bounds); CompactError is the last.
	CompactFailures int       `json:"compact_failures,omitempty"`
	CompactRetryAt  time.Time `json:"compact_retry_at,omitzero"`
	CompactError    string    `json:"compact_error,omitempty"`
}

// newer reports whether m should replace o when two index writers merge:
// the later maintenance wins, then the later update.
func (m Mark) newer(o Mark) bool {
	if !m.Checked.Equal(o.Checked) {
		return m.Checked.After(o.Checked)
	}
	return m.Updated.After(o.Updated)
}

// compactHeld reports whether compaction is backing off at now.
func (m Mark) compactHeld(now time.Time) bool {
	return m.CompactFailures > 0 && now.Before(m.CompactRetryAt)
}

// FleetIndex is the warehouse's fleet index as read: every shard's newest
// object, merged (one mark per table).
type FleetIndex struct {
	Tables map[string]Mark
	// Damaged lists the shards whose newest object could not be read
	// (their tables have no mark: in need); the next writer of such a
	// shard writes the next object.
	Damaged []int

	shards map[int]*fleetShard
	// legacy: the index had no shard yet, and these single-object index
	// objects of earlier releases (_fleet/{inverted seq}.json) gave its
	// marks: the scan's index write moves them into the shards, then
	// deletes these.
	legacy []string
}

// fleetShard is one index object: the marks of the tables of one shard.
type fleetShard struct {
	V       int             `json:"v"`
	Shard   int             `json:"shard"`
	Seq     uint64          `json:"seq"`
	Written time.Time       `json:"written"`
	Tables  map[string]Mark `json:"tables"`
}

func emptyFleetIndex() *FleetIndex {
	return &FleetIndex{Tables: map[string]Mark{}, shards: map[int]*fleetShard{}}
}

// shard returns the shard as read (seq 0 and no marks if it has no object).
func (x *FleetIndex) shard(n int) *fleetShard {
	if s, ok := x.shards[n]; ok {
		return s
	}
	return &fleetShard{V: fleetIndexVersion, Shard: n, Tables: map[string]Mark{}}
}

func fleetShardPrefix(root string, shard int) string {
	return fmt.Sprintf("%s%s%02x/", root, fleetShardDir, shard)
}

func fleetShardKey(root string, shard int, seq uint64) string {
	return fmt.Sprintf("%s%020d.json", fleetShardPrefix(root, shard), math.MaxUint64-seq)
}

// parseFleetShardKey parses {root}_fleet/index/{2 hex}/{20 digits}.json;
// anything else under the folder (a console folder marker, a key sorting
// before the digits) is a stray, stepped over.
func parseFleetShardKey(root, key string) (shard int, seq uint64, ok bool) {
	rel, ok := strings.CutPrefix(key, root+fleetShardDir)
	if !ok || len(rel) != 3+25 || rel[2] != '/' || !strings.HasSuffix(rel, ".json") {
		return 0, 0, false
	}
	sh, err := strconv.ParseUint(rel[:2], 16, 8)
	if err != nil || strings.ToLower(rel[:2]) != rel[:2] || int(sh) >= FleetShards {
		return 0, 0, false
	}
	digits := rel[3:23]
	if strings.Trim(digits, "0123456789") != "" {
		return 0, 0, false
	}
	inv, err := strconv.ParseUint(digits, 10, 64)
	if err != nil || inv == math.MaxUint64 || math.MaxUint64-inv > maxFleetSeq {
		return 0, 0, false // seq 0, or beyond any a writer reaches: a stray
	}
	return int(sh), math.MaxUint64 - inv, true
}

// maxFleetSeq bounds a shard's sequence numbers (a writer at 2^63-1 refuses
// to go on; keys naming more are strays): far beyond any real count of
// writes, and no sum near the integer limit.
const maxFleetSeq = 1<<63 - 1

// decodeFleetShard decodes one index object of shard at seq.
func decodeFleetShard(b []byte, shard int, seq uint64) (*fleetShard, error) {
	var s fleetShard
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%w: %v", table.ErrCorruptObject, err)
	}
	if s.V != fleetIndexVersion || s.Shard != shard {
		return nil, fmt.Errorf("%w: format %d shard %d", table.ErrCorruptObject, s.V, s.Shard)
	}
	s.Seq = seq
	if s.Tables == nil {
		s.Tables = map[string]Mark{}
	}
	for n := range s.Tables {
		if FleetShardOf(n) != shard {
			delete(s.Tables, n) // not this shard's: ignored
		}
	}
	return &s, nil
}

// shardKeys is what one listing says of a shard: its newest object's seq
// and every index object's key and seq.
type shardKeys struct {
	newest uint64
	keys   []string
	seqs   []uint64
}

func (k *shardKeys) add(key string, seq uint64) {
	k.newest = max(k.newest, seq)
	k.keys, k.seqs = append(k.keys, key), append(k.seqs, seq)
}

// ReadFleetIndex reads the fleet index under the warehouse root: a LIST
// of the shards' folder (one page per 1,000 keys; a shard holds one or two
// objects, so one page for the 256 shards) and one GET per shard holding
// an object, at most 64 at once. Strays are stepped over; a shard whose
// newest object is unreadable is listed in Damaged (its tables have no
// mark). A warehouse without an index has an empty one.
func ReadFleetIndex(ctx context.Context, store objstore.Store, root string) (*FleetIndex, error) {
	found := map[int]*shardKeys{}
	err := objstore.ListAll(ctx, store, root+fleetShardDir, "", func(o objstore.ObjectInfo) error {
		if sh, seq, ok := parseFleetShardKey(root, o.Key); ok {
			if found[sh] == nil {
				found[sh] = &shardKeys{}
			}
			found[sh].add(o.Key, seq)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read fleet index: %w", err)
	}
	idx := emptyFleetIndex()
	if len(found) == 0 {
		return readLegacyFleetIndex(ctx, store, root)
	}
	shards := make([]int, 0, len(found))
	for sh := range found {
		shards = append(shards, sh)
	}
	sort.Ints(shards)
	read := make([]*fleetShard, len(shards))
	errs := make([]error, len(shards))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(DefaultScanConcurrency)
	for i, sh := range shards {
		g.Go(func() error {
			read[i], errs[i] = readFleetShardAt(gctx, store, root, sh, found[sh].newest)
			return nil
		})
	}
	_ = g.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for i := range shards {
		if errs[i] != nil && !errors.Is(errs[i], table.ErrCorruptObject) {
			return nil, fmt.Errorf("read fleet index: %w", errs[i])
		}
		idx.add(read[i], errs[i] != nil)
	}
	return idx, nil
}

// readLegacyFleetIndex reads the single-object index of earlier releases
// (_fleet/{2^64-1-seq, 20 digits}.json, version 1: one LIST page of
// _fleet/, where those names sort first, and one GET of the newest), for a
// warehouse that has no shard yet: its marks carry over, so the first pass
// after the upgrade does not maintain every table. Unreadable: no marks.
func readLegacyFleetIndex(ctx context.Context, store objstore.Store, root string) (*FleetIndex, error) {
	idx := emptyFleetIndex()
	page, err := store.List(ctx, objstore.ListOptions{Prefix: root + FleetIndexDir})
	if err != nil {
		return nil, fmt.Errorf("read fleet index: %w", err)
	}
	for _, o := range page.Objects {
		rel := strings.TrimPrefix(o.Key, root+FleetIndexDir)
		if len(rel) == 25 && strings.HasSuffix(rel, ".json") && strings.Trim(rel[:20], "0123456789") == "" {
			idx.legacy = append(idx.legacy, o.Key)
		}
	}
	if len(idx.legacy) == 0 {
		return idx, nil
	}
	b, err := store.Get(ctx, idx.legacy[0]) // the newest: names are inverted
	if err != nil {
		return idx, nil // gone or unreadable: no marks carried over
	}
	var old struct {
		V      int             `json:"v"`
		Tables map[string]Mark `json:"tables"`
	}
	if json.Unmarshal(b, &old) == nil && old.V == 1 {
		for n, m := range old.Tables {
			idx.Tables[n] = m
		}
	}
	return idx, nil
}

// add puts one shard as read into the index (damaged: its newest object
// was unreadable; s holds its seq and no marks).
func (x *FleetIndex) add(s *fleetShard, damaged bool) {
	x.shards[s.Shard] = s
	if damaged {
		x.Damaged = append(x.Damaged, s.Shard)
	}
	for n, m := range s.Tables {
		x.Tables[n] = m
	}
}

// readFleetShardAt GETs the shard's object at seq; if it is gone (replaced
// and removed since the listing) it reads the shard again. An unreadable
// newest object returns the shard with its seq and no marks, and an error
// wrapping table.ErrCorruptObject.
func readFleetShardAt(ctx context.Context, store objstore.Store, root string, shard int, seq uint64) (*fleetShard, error) {
	for attempt := 0; ; attempt++ {
		b, err := store.Get(ctx, fleetShardKey(root, shard, seq))
		if errors.Is(err, objstore.ErrNotExist) && attempt < 3 {
			k, lerr := listFleetShard(ctx, store, root, shard)
			if lerr != nil {
				return nil, lerr
			}
			if k.newest == 0 {
				return &fleetShard{V: fleetIndexVersion, Shard: shard, Tables: map[string]Mark{}}, nil
			}
			seq = k.newest
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read fleet index shard %02x: %w", shard, err)
		}
		s, err := decodeFleetShard(b, shard, seq)
		if err != nil {
			return &fleetShard{V: fleetIndexVersion, Shard: shard, Seq: seq, Tables: map[string]Mark{}},
				fmt.Errorf("read fleet index %s: %w", fleetShardKey(root, shard, seq), err)
		}
		return s, nil
	}
}

// listFleetShard lists one shard's folder (one page: a shard holds a few
// objects; more than a page of leftovers is cleaned a page at a time).
func listFleetShard(ctx context.Context, store objstore.Store, root string, shard int) (*shardKeys, error) {
	page, err := store.List(ctx, objstore.ListOptions{Prefix: fleetShardPrefix(root, shard)})
	if err != nil {
		return nil, fmt.Errorf("list fleet index shard %02x: %w", shard, err)
	}
	k := &shardKeys{}
	for _, o := range page.Objects {
		if sh, seq, ok := parseFleetShardKey(root, o.Key); ok && sh == shard {
			k.add(o.Key, seq)
		}
	}
	return k, nil
}

// readFleetShards reads the given shards only (one LIST and one GET each):
// the index a writer of a few tables' marks needs.
func readFleetShards(ctx context.Context, store objstore.Store, root string, shards []int) (*FleetIndex, error) {
	idx := emptyFleetIndex()
	// Shards are independent: read DefaultScanConcurrency at once (a batch
	// across 256 shards is then a few round trips, not 512 in series).
	read := make([]*fleetShard, len(shards))
	damaged := make([]bool, len(shards))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(DefaultScanConcurrency)
	for i, sh := range shards {
		g.Go(func() error {
			k, err := listFleetShard(gctx, store, root, sh)
			if err != nil {
				return fmt.Errorf("read fleet index: %w", err)
			}
			if k.newest == 0 {
				return nil
			}
			s, err := readFleetShardAt(gctx, store, root, sh, k.newest)
			if err != nil && !errors.Is(err, table.ErrCorruptObject) {
				return fmt.Errorf("read fleet index: %w", err)
			}
			read[i], damaged[i] = s, err != nil
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	for i := range shards {
		if read[i] != nil {
			idx.add(read[i], damaged[i])
		}
	}
	return idx, nil
}

// writeFleetShard merges updates (marks of this shard's tables) into base
// and writes the result as the shard's next object by PutIfAbsent, then
// lists the shard: the write counts only if it is the newest there (a
// base read long ago may name a sequence number already written and
// deleted: the object would land below the newest, unseen). A writer that
// lost the race, or whose object is not the newest, re-reads the shard and
// merges again (the newer mark of each table wins, Mark.newer), at most
// fleetIndexTries times. The same listing gives the objects below the
// newest beyond fleetIndexKeep, left by a failed delete or a crash between
// a put and its delete: they are deleted (one request, best effort). keep,
// if not nil, drops the marks of tables it rejects (unregistered). A
// damaged newest object (base holding its seq and no marks) is replaced by
// the next one.
func writeFleetShard(ctx context.Context, store objstore.Store, root string, shard int, base *fleetShard, updates map[string]Mark, keep func(string) bool, now time.Time) (*fleetShard, error) {
	for attempt := 0; attempt < fleetIndexTries; attempt++ {
		if attempt > 0 || base == nil {
			idx, err := readFleetShards(ctx, store, root, []int{shard})
			if err != nil {
				return nil, err
			}
			base = idx.shard(shard)
		}
		if base.Seq >= maxFleetSeq {
			return nil, fmt.Errorf("write fleet index shard %02x: %w: sequence number %d is the largest; delete the shard's folder %s (its tables are then maintained once)",
				shard, table.ErrCorruptObject, base.Seq, fleetShardPrefix(root, shard))
		}
		next := &fleetShard{V: fleetIndexVersion, Shard: shard, Seq: base.Seq + 1, Written: now, Tables: make(map[string]Mark, len(base.Tables)+len(updates))}
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
		b, err := json.Marshal(next)
		if err != nil {
			return nil, fmt.Errorf("write fleet index: %w", err)
		}
		err = store.PutIfAbsent(ctx, fleetShardKey(root, shard, next.Seq), b)
		if errors.Is(err, objstore.ErrExists) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("write fleet index: %w", err)
		}
		k, err := listFleetShard(ctx, store, root, shard)
		if err != nil {
			return nil, fmt.Errorf("write fleet index: %w", err)
		}
		if k.newest != next.Seq {
			continue // not the newest: merge into the newest and write again
		}
		var old []string
		for i, seq := range k.seqs {
			if seq+fleetIndexKeep < next.Seq {
				old = append(old, k.keys[i])
			}
		}
		if len(old) > 0 {
			_ = store.Delete(ctx, old[:min(len(old), objstore.MaxDeleteKeys)])
		}
		return next, nil
	}
	return nil, fmt.Errorf("write fleet index shard %02x: %w (not the newest after %d tries)", shard, objstore.ErrExists, fleetIndexTries)
}

// writeFleetIndex writes the updates into their shards (one shard write
// each, see writeFleetShard, fleetWritesInFlight at once), from base if not nil (a scan's index), and
// also rewrites the shards listed in also (damaged ones, or ones holding
// marks that keep drops). It returns how many marks were written.
func writeFleetIndex(ctx context.Context, store objstore.Store, root string, base *FleetIndex, updates map[string]Mark, also []int, keep func(string) bool, now time.Time) (int, error) {
	byShard := map[int]map[string]Mark{}
	for n, m := range updates {
		sh := FleetShardOf(n)
		if byShard[sh] == nil {
			byShard[sh] = map[string]Mark{}
		}
		byShard[sh][n] = m
	}
	for _, sh := range also {
		if byShard[sh] == nil {
			byShard[sh] = map[string]Mark{}
		}
	}
	shards := make([]int, 0, len(byShard))
	for sh := range byShard {
		shards = append(shards, sh)
	}
	sort.Ints(shards)
	errs := make([]error, len(shards))
	var g errgroup.Group
	g.SetLimit(fleetWritesInFlight)
	for i, sh := range shards {
		var b *fleetShard
		if base != nil {
			b = base.shard(sh)
		}
		g.Go(func() error {
			_, errs[i] = writeFleetShard(ctx, store, root, sh, b, byShard[sh], keep, now)
			return nil
		})
	}
	_ = g.Wait()
	written := 0
	for i, sh := range shards {
		if errs[i] == nil {
			written += len(byShard[sh])
		}
	}
	return written, errors.Join(errs...)
}

// fleetWritesInFlight is how many shards an index write writes at once (a
// scan that saw 100 tables change touches ~80 shards: 5 rounds of PUT,
// LIST and DELETE instead of 80).
const fleetWritesInFlight = 16

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
		if m.compactHeld(now) {
			// Compaction backs off: the versions since count (pruning's
			// own need), not the fragments compaction left.
			est = 0
		}
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
//
// grace is the Source's; seen, if not 0, is the latest version compaction
// worked from (a tablekeep table's manifest held).
func markAfter(ref TableRef, grace time.Duration, seen uint64, pl PrunePlan, compactFrags int, cs compactState, now time.Time) Mark {
	p := ref.Policy.WithDefaults()
	// Prune: retained versions in [floor, latest-KeepLast] become prunable,
	// oldest first, when their grace window (from GraceFrom) is over.
	md := newMarkDue(ref, pl, now, func(i int) (time.Time, bool) {
		v := pl.vs[i]
		return v.GraceFrom.Add(table.SatAdd(grace, time.Second)), !v.GraceFrom.IsZero()
	})
	md.m.CompactFrags = compactFrags
	// The fragment count is of the manifest compaction held: the mark's
	// latest version is that manifest's, so that a version written after
	// it (a commit between compaction and the prune plan's listing) is a
	// change the next scan sees and counts.
	if seen != 0 && seen < md.m.Latest {
		md.m.Latest = seen
	}
	md.m.CompactFailures, md.m.CompactRetryAt, md.m.CompactError = cs.Failures, cs.RetryAt, cs.Error
	// Compaction left (stopped at a bound, or below the planner's group
	// size): due at the threshold's wait bound, at once above it; while
	// compaction backs off after failures, not before its retry time.
	if compactFrags > 0 {
		md.m.CompactSince = now
		if compactFrags >= p.CompactMinFragments {
			md.set(laterOf(now, cs.RetryAt), "compaction left")
		} else {
			md.set(laterOf(md.m.CompactSince.Add(p.CompactMaxWait), cs.RetryAt), "small fragments waiting")
		}
	}
	return md.done()
}

// compactState is a table's compaction backoff after a maintenance: the
// consecutive compaction failures, when compaction is tried again, the last
// error (zero: compaction did not fail).
type compactState struct {
	Failures int
	RetryAt  time.Time
	Error    string
}

func laterOf(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
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
		at := r.At.Add(table.SatAdd(p.ReplanAfter, time.Second))
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
	if at := laterOf(m.CompactSince.Add(p.CompactMaxWait), m.CompactRetryAt); m.CompactFrags < p.CompactMinFragments && at.Before(m.Due) {
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
// is retried after the failure backoff (FailureBackoffFor).
func markFailed(ref TableRef, prev Mark, known bool, err error, base, most time.Duration, now time.Time) Mark {
	m := prev
	if !known || m.Root != ref.Root {
		m = Mark{Root: ref.Root, Due: now}
	}
	m.Failures++
	m.RetryAt = addSat(now, FailureBackoffFor(m.Failures, base, most))
	m.Updated = now
	m.Error = clip(err.Error())
	return m
}

func clip(s string) string {
	if len(s) > 300 {
		return s[:300]
	}
	return s
}

// addSat is t + d, saturating at the largest time instead of wrapping.
func addSat(t time.Time, d time.Duration) time.Time {
	u := t.Add(d)
	if d > 0 && u.Before(t) {
		return time.Unix(1<<62, 0)
	}
	return u
}

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
