package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/table"
)

// readsInFlight is how many shards a read GETs at once.
const readsInFlight = 64

// indexVersion is the format of the fleet index objects.
const indexVersion = 2

// indexKeep is how many objects below the newest a shard keeps (a
// reader that listed one of them may still be reading it; one whose GET
// finds it gone reads the shard again).
const indexKeep = 1

// indexTries bounds a shard write's attempts (a lost PutIfAbsent race,
// or a write that is not the newest once written).
const indexTries = 8

// Mark is one table's maintenance mark (maintenance.Mark: MaintainTable
// computes it; this package stores it).
type Mark = maintenance.Mark

// Index is the warehouse's fleet index as read: every shard's newest
// object of its current layout, merged (one mark per table).
type Index struct {
	Tables map[string]Mark
	// Damaged lists the shards whose newest object could not be read
	// (their tables have no mark: in need); the next writer of such a
	// shard writes the next object.
	Damaged []int
	// Layout is the current generation (Layout.N 0: the index has none
	// yet, empty or still the single object of earlier releases).
	Layout Layout

	shards map[int]*Shard
	// newest is each shard of Layout as listed (read or not).
	newest map[int]uint64
	// stale is every key of a layout below Layout (an earlier generation
	// a reshard left, or one a concurrent reshard lost); maxGen the
	// highest generation listed, sealed or not (a reshard writes the next).
	stale  []string
	maxGen uint64
	// legacy: the index had no shard yet, and these single-object index
	// objects of earlier releases (_fleet/{inverted seq}.json) gave its
	// marks: the scan's index write moves them into the shards, then
	// deletes these.
	legacy []string
}

// Shard is one index object: the marks of the tables of one shard.
type Shard struct {
	V     int    `json:"v"`
	Shard int    `json:"shard"`
	Gen   uint64 `json:"gen,omitempty"`    // the layout's generation (absent: 0)
	N     int    `json:"shards,omitempty"` // the layout's shard count (absent: 256, generation 0)
	Seq   uint64 `json:"seq"`
	// Written is when the object was written.
	Written time.Time       `json:"written"`
	Tables  map[string]Mark `json:"tables"`
}

func NewIndex() *Index {
	return &Index{Tables: map[string]Mark{}, shards: map[int]*Shard{}, newest: map[int]uint64{}}
}

// ShardOf is the shard of name's mark in the index's layout.
func (x *Index) ShardOf(name string) int { return ShardOf(name, x.Layout.N) }

// emptyShard is shard n of layout l with no object (seq 0).
func emptyShard(l Layout, n int) *Shard {
	s := &Shard{V: indexVersion, Shard: n, Tables: map[string]Mark{}}
	if l.Gen > 0 {
		s.Gen, s.N = l.Gen, l.N
	}
	return s
}

// shard returns the shard as read (seq 0 and no marks if it has no object).
func (x *Index) Shard(n int) *Shard {
	if s, ok := x.shards[n]; ok {
		return s
	}
	return emptyShard(x.Layout, n)
}

// decodeShard decodes one index object of shard at seq in layout l.
func decodeShard(b []byte, l Layout, shard int, seq uint64) (*Shard, error) {
	var s Shard
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%w: %v", table.ErrCorruptObject, err)
	}
	wantN := 0
	if l.Gen > 0 {
		wantN = l.N
	}
	if s.V != indexVersion || s.Shard != shard || s.Gen != l.Gen || s.N != wantN {
		return nil, fmt.Errorf("%w: format %d shard %d generation %d of %d shards", table.ErrCorruptObject, s.V, s.Shard, s.Gen, s.N)
	}
	s.Seq = seq
	if s.Tables == nil {
		s.Tables = map[string]Mark{}
	}
	for n := range s.Tables {
		if ShardOf(n, l.N) != shard {
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

// listing is one LIST of IndexDir: every layout's shards and seals.
type listing struct {
	shards map[Layout]map[int]*shardKeys
	seals  map[Layout]string
	maxGen uint64
}

// less orders layouts: by generation, then by shard count (two reshards
// that sealed the same generation: the larger count counts).
func less(a, b Layout) bool { return a.Gen < b.Gen || (a.Gen == b.Gen && a.N < b.N) }

// listIndex lists IndexDir in full (one page per 1,000 keys).
func listIndex(ctx context.Context, store objstore.Store, root string) (*listing, error) {
	ls := &listing{shards: map[Layout]map[int]*shardKeys{}, seals: map[Layout]string{}}
	err := objstore.ListAll(ctx, store, root+IndexDir, "", func(o objstore.ObjectInfo) error {
		l, sh, seq, seal, ok := ParseIndexKey(root, o.Key)
		if !ok {
			return nil
		}
		ls.maxGen = max(ls.maxGen, l.Gen)
		if seal {
			ls.seals[l] = o.Key
			return nil
		}
		if ls.shards[l] == nil {
			ls.shards[l] = map[int]*shardKeys{}
		}
		if ls.shards[l][sh] == nil {
			ls.shards[l][sh] = &shardKeys{}
		}
		ls.shards[l][sh].add(o.Key, seq)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read fleet index: %w", err)
	}
	return ls, nil
}

// current is the highest sealed layout (generation 0 counts as sealed
// once it holds a shard object); ok false: none.
func (ls *listing) current() (cur Layout, ok bool) {
	if len(ls.shards[Legacy256]) > 0 {
		cur, ok = Legacy256, true
	}
	for l := range ls.seals {
		if !ok || less(cur, l) {
			cur, ok = l, true
		}
	}
	return cur, ok
}

// index is the empty index of the listing's current layout, with its
// shards' newest seqs and the keys of the layouts below it.
func (ls *listing) index() (*Index, map[int]*shardKeys, bool) {
	idx := NewIndex()
	idx.maxGen = ls.maxGen
	cur, ok := ls.current()
	if !ok {
		return idx, nil, false
	}
	idx.Layout = cur
	for l, shards := range ls.shards {
		if less(l, cur) {
			for _, k := range shards {
				idx.stale = append(idx.stale, k.keys...)
			}
		}
	}
	for l, key := range ls.seals {
		if less(l, cur) {
			idx.stale = append(idx.stale, key)
		}
	}
	sort.Strings(idx.stale)
	found := ls.shards[cur]
	for sh, k := range found {
		idx.newest[sh] = k.newest
	}
	return idx, found, true
}

// errVanished: a shard's folder was emptied while it was read (a reshard
// completed and deleted the layout read): the read starts again.
var errVanished = errors.New("fleet index layout replaced while read")

// readTries bounds how often a read starts again after errVanished.
const readTries = 3

// Read reads the fleet index under the warehouse root: a LIST
// of IndexDir (one page per 1,000 keys; a shard holds one or two
// objects, so one page for 256 shards and a reshard's second layout) and
// one GET per shard of the current layout holding an object, at most 64 at
// once. Strays are stepped over; a shard whose newest object is unreadable
// is listed in Damaged (its tables have no mark). A warehouse without an
// index has an empty one.
func Read(ctx context.Context, store objstore.Store, root string) (*Index, error) {
	idx, _, err := ReadSel(ctx, store, root, nil)
	return idx, err
}

// ReadSel is Read reading only the shards sel accepts (given the current
// layout; nil: every shard holding an object); it also returns every
// shard's newest seq as listed (read or not). A warehouse with no layout
// reads the legacy index whatever sel says. A shard whose folder is found
// emptied while read (a reshard deleted the layout) starts the read again,
// at most readTries times in all.
func ReadSel(ctx context.Context, store objstore.Store, root string, sel func(l Layout, shard int, newest uint64) bool) (*Index, map[int]uint64, error) {
	for attempt := 1; ; attempt++ {
		idx, err := readSelOnce(ctx, store, root, sel)
		if errors.Is(err, errVanished) && attempt < readTries {
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		return idx, idx.newest, nil
	}
}

func readSelOnce(ctx context.Context, store objstore.Store, root string, sel func(Layout, int, uint64) bool) (*Index, error) {
	ls, err := listIndex(ctx, store, root)
	if err != nil {
		return nil, err
	}
	idx, found, ok := ls.index()
	if !ok {
		legacy, err := readLegacy(ctx, store, root)
		if err != nil {
			return nil, err
		}
		legacy.maxGen, legacy.stale = idx.maxGen, nil
		return legacy, nil
	}
	shards := make([]int, 0, len(found))
	for sh, k := range found {
		if sel == nil || sel(idx.Layout, sh, k.newest) {
			shards = append(shards, sh)
		}
	}
	if err := idx.readShards(ctx, store, root, shards); err != nil {
		return nil, err
	}
	return idx, nil
}

// readShards GETs the given shards of x's layout at their newest as
// listed, readsInFlight at once, into x.
func (x *Index) readShards(ctx context.Context, store objstore.Store, root string, shards []int) error {
	sort.Ints(shards)
	read := make([]*Shard, len(shards))
	errs := make([]error, len(shards))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(readsInFlight)
	for i, sh := range shards {
		g.Go(func() error {
			read[i], errs[i] = readShardAt(gctx, store, root, x.Layout, sh, x.newest[sh])
			return nil
		})
	}
	_ = g.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	for i := range shards {
		if errs[i] != nil && !errors.Is(errs[i], table.ErrCorruptObject) {
			return fmt.Errorf("read fleet index: %w", errs[i])
		}
		x.add(read[i], errs[i] != nil)
	}
	return nil
}

// readLegacy reads the single-object index of earlier releases
// (_fleet/{2^64-1-seq, 20 digits}.json, version 1: one LIST page of
// _fleet/, where those names sort first, and one GET of the newest), for a
// warehouse that has no shard yet: its marks carry over, so the first pass
// after the upgrade does not maintain every table. Unreadable: no marks.
func readLegacy(ctx context.Context, store objstore.Store, root string) (*Index, error) {
	idx := NewIndex()
	page, err := store.List(ctx, objstore.ListOptions{Prefix: root + Dir})
	if err != nil {
		return nil, fmt.Errorf("read fleet index: %w", err)
	}
	for _, o := range page.Objects {
		if isLegacyKey(root, o.Key) {
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
func (x *Index) add(s *Shard, damaged bool) {
	x.shards[s.Shard] = s
	if damaged {
		x.Damaged = append(x.Damaged, s.Shard)
	}
	for n, m := range s.Tables {
		x.Tables[n] = m
	}
}

// readShardAt GETs the shard's object at seq in layout l; if it is gone
// (replaced and removed since the listing) it lists the shard again (a
// folder found empty: errVanished, the layout was replaced). An
// unreadable newest object returns the shard with its seq and no marks,
// and an error wrapping table.ErrCorruptObject.
func readShardAt(ctx context.Context, store objstore.Store, root string, l Layout, shard int, seq uint64) (*Shard, error) {
	for attempt := 0; ; attempt++ {
		b, err := store.Get(ctx, ShardKey(root, l, shard, seq))
		if errors.Is(err, objstore.ErrNotExist) && attempt < 3 {
			k, lerr := listShard(ctx, store, root, l, shard)
			if lerr != nil {
				return nil, lerr
			}
			if k.newest == 0 {
				return nil, fmt.Errorf("read fleet index shard %02x: %w", shard, errVanished)
			}
			seq = k.newest
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read fleet index shard %02x: %w", shard, err)
		}
		s, err := decodeShard(b, l, shard, seq)
		if err != nil {
			d := emptyShard(l, shard)
			d.Seq = seq
			return d, fmt.Errorf("read fleet index %s: %w", ShardKey(root, l, shard, seq), err)
		}
		return s, nil
	}
}

// listShard lists one shard's folder of layout l (one page: a shard holds
// a few objects; more than a page of leftovers is cleaned a page at a
// time).
func listShard(ctx context.Context, store objstore.Store, root string, l Layout, shard int) (*shardKeys, error) {
	page, err := store.List(ctx, objstore.ListOptions{Prefix: ShardPrefix(root, l, shard)})
	if err != nil {
		return nil, fmt.Errorf("list fleet index shard %02x: %w", shard, err)
	}
	k := &shardKeys{}
	for _, o := range page.Objects {
		if ol, sh, seq, seal, ok := ParseIndexKey(root, o.Key); ok && !seal && ol == l && sh == shard {
			k.add(o.Key, seq)
		}
	}
	return k, nil
}

// ReadFor reads the shards holding the given tables' marks only (one LIST
// of IndexDir, which gives the layout, and one GET per shard): the index a
// writer of a few tables' marks needs.
func ReadFor(ctx context.Context, store objstore.Store, root string, names []string) (*Index, error) {
	for attempt := 1; ; attempt++ {
		ls, err := listIndex(ctx, store, root)
		if err != nil {
			return nil, err
		}
		idx, found, ok := ls.index()
		if !ok {
			return idx, nil // no layout yet: the write makes one
		}
		seen := map[int]bool{}
		var shards []int
		for _, n := range names {
			if sh := idx.ShardOf(n); !seen[sh] && found[sh] != nil {
				seen[sh] = true
				shards = append(shards, sh)
			}
		}
		err = idx.readShards(ctx, store, root, shards)
		if errors.Is(err, errVanished) && attempt < readTries {
			continue
		}
		if err != nil {
			return nil, err
		}
		return idx, nil
	}
}

// mergeMarks puts updates into into: the writer's mark wins unless the
// index holds a strictly newer one for the same root.
func mergeMarks(into, updates map[string]Mark) {
	for n, m := range updates {
		if old, ok := into[n]; !ok || !old.Newer(m) || m.Root != old.Root {
			into[n] = m
		}
	}
}

// errResharded: the shard's folder was emptied under a writer (a reshard
// replaced its layout): its marks are not recorded (the tables are
// maintained again at the next pass).
var errResharded = errors.New("fleet index layout replaced by a reshard")

// WriteShard merges updates (marks of this shard's tables) into base
// and writes the result as the shard's next object in layout l by
// PutIfAbsent, then lists the shard: the write counts only if it is the
// newest there (a base read long ago may name a sequence number already
// written and deleted: the object would land below the newest, unseen). A
// writer that lost the race, or whose object is not the newest, re-reads
// the shard and merges again (the newer mark of each table wins,
// Mark.newer), at most indexTries times; a shard found emptied (its
// layout replaced by a reshard: the object below the newest, which every
// writer keeps, is gone) ends the write with an error. The same
// listing gives the objects below the newest beyond indexKeep, left by a
// failed delete or a crash between a put and its delete: they are deleted
// (one request, best effort). keep, if not nil, drops the marks of tables
// it rejects (unregistered). A damaged newest object (base holding its seq
// and no marks) is replaced by the next one.
func WriteShard(ctx context.Context, store objstore.Store, root string, l Layout, shard int, base *Shard, updates map[string]Mark, keep func(string) bool, now time.Time) (*Shard, error) {
	for attempt := 0; attempt < indexTries; attempt++ {
		if attempt > 0 || base == nil {
			k, err := listShard(ctx, store, root, l, shard)
			if err != nil {
				return nil, fmt.Errorf("read fleet index: %w", err)
			}
			switch {
			case k.newest == 0 && base != nil && base.Seq > 0:
				return nil, fmt.Errorf("write fleet index shard %02x: %w", shard, errResharded)
			case k.newest == 0:
				base = emptyShard(l, shard)
			default:
				if base, err = readShardAt(ctx, store, root, l, shard, k.newest); err != nil && !errors.Is(err, table.ErrCorruptObject) {
					return nil, fmt.Errorf("read fleet index: %w", err)
				}
			}
		}
		if base.Seq >= MaxSeq {
			return nil, fmt.Errorf("write fleet index shard %02x: %w: sequence number %d is the largest; delete the shard's folder %s (its tables are then maintained once)",
				shard, table.ErrCorruptObject, base.Seq, ShardPrefix(root, l, shard))
		}
		next := emptyShard(l, shard)
		next.Seq, next.Written = base.Seq+1, now
		for n, m := range base.Tables {
			if keep == nil || keep(n) {
				next.Tables[n] = m
			}
		}
		mergeMarks(next.Tables, updates)
		b, err := json.Marshal(next)
		if err != nil {
			return nil, fmt.Errorf("write fleet index: %w", err)
		}
		err = store.PutIfAbsent(ctx, ShardKey(root, l, shard, next.Seq), b)
		if errors.Is(err, objstore.ErrExists) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("write fleet index: %w", err)
		}
		k, err := listShard(ctx, store, root, l, shard)
		if err != nil {
			return nil, fmt.Errorf("write fleet index: %w", err)
		}
		if k.newest != next.Seq {
			continue // not the newest: merge into the newest and write again
		}
		if next.Seq > 1 && !slices.Contains(k.seqs, next.Seq-1) {
			// The object below the newest is kept by every writer (indexKeep):
			// gone, a reshard deleted this layout since base was read. The
			// object just written would be a stale key: take it back.
			_ = store.Delete(ctx, []string{ShardKey(root, l, shard, next.Seq)})
			return nil, fmt.Errorf("write fleet index shard %02x: %w", shard, errResharded)
		}
		var old []string
		for i, seq := range k.seqs {
			if seq+indexKeep < next.Seq {
				old = append(old, k.keys[i])
			}
		}
		if len(old) > 0 {
			_ = store.Delete(ctx, old[:min(len(old), objstore.MaxDeleteKeys)])
		}
		return next, nil
	}
	return nil, fmt.Errorf("write fleet index shard %02x: %w (not the newest after %d tries)", shard, objstore.ErrExists, indexTries)
}

// Write writes the updates into their shards of base's layout (one shard
// write each, see WriteShard, writesInFlight at once), from base if not
// nil (a scan's index; nil: the updates' shards are read first, ReadFor),
// and also rewrites the shards listed in also (damaged ones, or ones
// holding marks that keep drops). An index with no layout yet is written
// as a new one of TargetShards(marks, 0) shards: an empty index gets its
// seal first and the marks written into it (a writer that finds the seal
// made by another writes into that layout); the marks of the single
// object of earlier releases go through Reshard. It returns how many
// marks were written.
func Write(ctx context.Context, store objstore.Store, root string, base *Index, updates map[string]Mark, also []int, keep func(string) bool, now time.Time) (int, error) {
	if base == nil {
		names := make([]string, 0, len(updates))
		for n := range updates {
			names = append(names, n)
		}
		var err error
		if base, err = ReadFor(ctx, store, root, names); err != nil {
			return 0, err
		}
	}
	for attempt := 1; base.Layout.N == 0; attempt++ {
		if attempt > indexTries {
			return 0, fmt.Errorf("write fleet index: no layout after %d tries: %w", indexTries, objstore.ErrExists)
		}
		n := TargetShards(len(base.Tables)+len(updates), 0)
		if len(base.Tables) > 0 || len(base.legacy) > 0 {
			// Marks to carry over (the single object of earlier releases):
			// shards first, then the seal.
			written, err := Reshard(ctx, store, root, base, updates, keep, n, now)
			if !errors.Is(err, ErrReshardLost) {
				return written, err
			}
		} else {
			// A new index: its first layout is empty, so the seal goes
			// first (an empty sealed layout is a complete index) and the
			// marks are then written into it as into any layout; a writer
			// that finds the seal there (another made it at once) writes
			// into that one: no mark lost to the race.
			l := Layout{Gen: base.maxGen + 1, N: n}
			b, _ := json.Marshal(Seal{V: sealVersion, Gen: l.Gen, N: l.N, Written: now})
			if err := store.PutIfAbsent(ctx, SealKey(root, l), b); err != nil && !errors.Is(err, objstore.ErrExists) {
				return 0, fmt.Errorf("write fleet index: %w", err)
			}
		}
		var err error
		if base, err = ReadFor(ctx, store, root, slices.Collect(maps.Keys(updates))); err != nil {
			return 0, err
		}
	}
	byShard := map[int]map[string]Mark{}
	for n, m := range updates {
		sh := base.ShardOf(n)
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
	g.SetLimit(writesInFlight)
	for i, sh := range shards {
		b := base.Shard(sh)
		if _, read := base.shards[sh]; !read && base.newest[sh] != 0 {
			b = nil // listed, not read: WriteShard reads it
		}
		g.Go(func() error {
			_, errs[i] = WriteShard(ctx, store, root, base.Layout, sh, b, byShard[sh], keep, now)
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

// writesInFlight is how many shards an index write writes at once (a
// scan that saw 100 tables change touches ~80 shards: 5 rounds of PUT,
// LIST and DELETE instead of 80).
const writesInFlight = 16

// Seal is the body of a generation's seal object.
type Seal struct {
	V       int       `json:"v"`
	Gen     uint64    `json:"gen"`
	N       int       `json:"shards"`
	Tables  int       `json:"tables"`
	Written time.Time `json:"written"`
}

// sealVersion is the format of the seal object.
const sealVersion = 1

// ErrReshardLost: another writer wrote the generation a reshard was
// writing; nothing is sealed by this one (the other's stands).
var ErrReshardLost = errors.New("fleet index reshard lost to another writer")

// Reshard writes every mark of base (its unread shards read first; marks
// keep rejects dropped) merged with updates into a new layout of n shards,
// generation base's highest listed + 1: each non-empty shard at seq 1 by
// PutIfAbsent (writesInFlight at once), then the seal by PutIfAbsent; only
// then it deletes every key of the layouts below (base's layout, the
// layouts base listed as stale, and the single object of earlier
// releases; best effort: what is left goes at the next reshard or pass).
// A crash before the seal leaves an unsealed layout no reader counts; a
// key of it that exists already (another writer at the same generation)
// ends the reshard with ErrReshardLost. It returns how many updates were
// written.
func Reshard(ctx context.Context, store objstore.Store, root string, base *Index, updates map[string]Mark, keep func(string) bool, n int, now time.Time) (int, error) {
	if !validN(n) {
		return 0, fmt.Errorf("reshard fleet index: %d shards is not 1, 16 or 256", n)
	}
	if base.maxGen >= MaxSeq {
		return 0, fmt.Errorf("reshard fleet index: %w: generation %d is the largest", table.ErrCorruptObject, base.maxGen)
	}
	if base.Layout.N > 0 {
		var unread []int
		for sh, seq := range base.newest {
			if _, ok := base.shards[sh]; !ok && seq > 0 {
				unread = append(unread, sh)
			}
		}
		if err := base.readShards(ctx, store, root, unread); err != nil {
			return 0, fmt.Errorf("reshard fleet index: %w", err)
		}
	}
	all := make(map[string]Mark, len(base.Tables)+len(updates))
	for name, m := range base.Tables {
		if keep == nil || keep(name) {
			all[name] = m
		}
	}
	mergeMarks(all, updates)
	l := Layout{Gen: base.maxGen + 1, N: n}
	byShard := map[int]*Shard{}
	for name, m := range all {
		sh := ShardOf(name, n)
		if byShard[sh] == nil {
			byShard[sh] = emptyShard(l, sh)
			byShard[sh].Seq, byShard[sh].Written = 1, now
		}
		byShard[sh].Tables[name] = m
	}
	var g errgroup.Group
	g.SetLimit(writesInFlight)
	for sh, s := range byShard {
		g.Go(func() error {
			b, err := json.Marshal(s)
			if err != nil {
				return err
			}
			return store.PutIfAbsent(ctx, ShardKey(root, l, sh, 1), b)
		})
	}
	werr := g.Wait()
	if werr == nil {
		b, _ := json.Marshal(Seal{V: sealVersion, Gen: l.Gen, N: l.N, Tables: len(all), Written: now})
		werr = store.PutIfAbsent(ctx, SealKey(root, l), b)
	}
	if errors.Is(werr, objstore.ErrExists) {
		return 0, fmt.Errorf("reshard fleet index to generation %d: %w", l.Gen, ErrReshardLost)
	}
	if werr != nil {
		return 0, fmt.Errorf("reshard fleet index to generation %d: %w", l.Gen, werr)
	}
	// One more LIST: every key of the layouts below the new one, those
	// written since base was listed included.
	var old []string
	if ls, err := listIndex(ctx, store, root); err == nil {
		for ol, shards := range ls.shards {
			if less(ol, l) {
				for _, k := range shards {
					old = append(old, k.keys...)
				}
			}
		}
		for ol, key := range ls.seals {
			if less(ol, l) {
				old = append(old, key)
			}
		}
	}
	old = append(old, base.legacy...)
	_, _ = objstore.DeleteAll(ctx, store, old, objstore.MaxDeleteKeys)
	return len(updates), nil
}

// DeleteStale deletes the keys of the layouts below x's (an earlier
// generation a crash or a failed delete left): best effort.
func DeleteStale(ctx context.Context, store objstore.Store, x *Index) error {
	_, err := objstore.DeleteAll(ctx, store, x.stale, objstore.MaxDeleteKeys)
	return err
}

// Stale is the keys of the layouts below x's as listed.
func (x *Index) Stale() []string { return x.stale }

// Read reports whether shard n was read (a shard not read has no marks in
// Tables whatever it holds).
func (x *Index) ReadShard(n int) (*Shard, bool) {
	s, ok := x.shards[n]
	return s, ok
}

// Legacy is the single-object index objects of earlier releases the index
// was read from (no shard yet): a pass moves their marks into the shards,
// then deletes them.
func (x *Index) Legacy() []string { return x.legacy }

// DeleteLegacy deletes the single-object index objects of earlier releases
// x was read from, once their marks were written into the shards.
func DeleteLegacy(ctx context.Context, store objstore.Store, x *Index) error {
	_, err := objstore.DeleteAll(ctx, store, x.legacy, objstore.MaxDeleteKeys)
	return err
}
