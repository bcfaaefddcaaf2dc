package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
// object, merged (one mark per table).
type Index struct {
	Tables map[string]Mark
	// Damaged lists the shards whose newest object could not be read
	// (their tables have no mark: in need); the next writer of such a
	// shard writes the next object.
	Damaged []int

	shards map[int]*Shard
	// legacy: the index had no shard yet, and these single-object index
	// objects of earlier releases (_fleet/{inverted seq}.json) gave its
	// marks: the scan's index write moves them into the shards, then
	// deletes these.
	legacy []string
}

// Shard is one index object: the marks of the tables of one shard.
type Shard struct {
	V       int             `json:"v"`
	Shard   int             `json:"shard"`
	Seq     uint64          `json:"seq"`
	Written time.Time       `json:"written"`
	Tables  map[string]Mark `json:"tables"`
}

func NewIndex() *Index {
	return &Index{Tables: map[string]Mark{}, shards: map[int]*Shard{}}
}

// shard returns the shard as read (seq 0 and no marks if it has no object).
func (x *Index) Shard(n int) *Shard {
	if s, ok := x.shards[n]; ok {
		return s
	}
	return &Shard{V: indexVersion, Shard: n, Tables: map[string]Mark{}}
}

// decodeShard decodes one index object of shard at seq.
func decodeShard(b []byte, shard int, seq uint64) (*Shard, error) {
	var s Shard
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%w: %v", table.ErrCorruptObject, err)
	}
	if s.V != indexVersion || s.Shard != shard {
		return nil, fmt.Errorf("%w: format %d shard %d", table.ErrCorruptObject, s.V, s.Shard)
	}
	s.Seq = seq
	if s.Tables == nil {
		s.Tables = map[string]Mark{}
	}
	for n := range s.Tables {
		if ShardOf(n) != shard {
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

// Read reads the fleet index under the warehouse root: a LIST
// of the shards' folder (one page per 1,000 keys; a shard holds one or two
// objects, so one page for the 256 shards) and one GET per shard holding
// an object, at most 64 at once. Strays are stepped over; a shard whose
// newest object is unreadable is listed in Damaged (its tables have no
// mark). A warehouse without an index has an empty one.
func Read(ctx context.Context, store objstore.Store, root string) (*Index, error) {
	idx, _, err := ReadSel(ctx, store, root, nil)
	return idx, err
}

// ReadSel is Read reading only the shards sel accepts
// (nil: every shard holding an object); it also returns every shard's
// newest seq as listed (read or not). A warehouse with no shard reads the
// legacy index whatever sel says.
func ReadSel(ctx context.Context, store objstore.Store, root string, sel func(shard int, newest uint64) bool) (*Index, map[int]uint64, error) {
	found := map[int]*shardKeys{}
	err := objstore.ListAll(ctx, store, root+IndexDir, "", func(o objstore.ObjectInfo) error {
		if sh, seq, ok := ParseShardKey(root, o.Key); ok {
			if found[sh] == nil {
				found[sh] = &shardKeys{}
			}
			found[sh].add(o.Key, seq)
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("read fleet index: %w", err)
	}
	idx := NewIndex()
	if len(found) == 0 {
		idx, err := readLegacy(ctx, store, root)
		return idx, map[int]uint64{}, err
	}
	newest := make(map[int]uint64, len(found))
	shards := make([]int, 0, len(found))
	for sh, k := range found {
		newest[sh] = k.newest
		if sel == nil || sel(sh, k.newest) {
			shards = append(shards, sh)
		}
	}
	sort.Ints(shards)
	read := make([]*Shard, len(shards))
	errs := make([]error, len(shards))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(readsInFlight)
	for i, sh := range shards {
		g.Go(func() error {
			read[i], errs[i] = readShardAt(gctx, store, root, sh, found[sh].newest)
			return nil
		})
	}
	_ = g.Wait()
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	for i := range shards {
		if errs[i] != nil && !errors.Is(errs[i], table.ErrCorruptObject) {
			return nil, nil, fmt.Errorf("read fleet index: %w", errs[i])
		}
		idx.add(read[i], errs[i] != nil)
	}
	return idx, newest, nil
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

// readShardAt GETs the shard's object at seq; if it is gone (replaced
// and removed since the listing) it reads the shard again. An unreadable
// newest object returns the shard with its seq and no marks, and an error
// wrapping table.ErrCorruptObject.
func readShardAt(ctx context.Context, store objstore.Store, root string, shard int, seq uint64) (*Shard, error) {
	for attempt := 0; ; attempt++ {
		b, err := store.Get(ctx, ShardKey(root, shard, seq))
		if errors.Is(err, objstore.ErrNotExist) && attempt < 3 {
			k, lerr := listShard(ctx, store, root, shard)
			if lerr != nil {
				return nil, lerr
			}
			if k.newest == 0 {
				return &Shard{V: indexVersion, Shard: shard, Tables: map[string]Mark{}}, nil
			}
			seq = k.newest
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read fleet index shard %02x: %w", shard, err)
		}
		s, err := decodeShard(b, shard, seq)
		if err != nil {
			return &Shard{V: indexVersion, Shard: shard, Seq: seq, Tables: map[string]Mark{}},
				fmt.Errorf("read fleet index %s: %w", ShardKey(root, shard, seq), err)
		}
		return s, nil
	}
}

// listShard lists one shard's folder (one page: a shard holds a few
// objects; more than a page of leftovers is cleaned a page at a time).
func listShard(ctx context.Context, store objstore.Store, root string, shard int) (*shardKeys, error) {
	page, err := store.List(ctx, objstore.ListOptions{Prefix: ShardPrefix(root, shard)})
	if err != nil {
		return nil, fmt.Errorf("list fleet index shard %02x: %w", shard, err)
	}
	k := &shardKeys{}
	for _, o := range page.Objects {
		if sh, seq, ok := ParseShardKey(root, o.Key); ok && sh == shard {
			k.add(o.Key, seq)
		}
	}
	return k, nil
}

// ReadShards reads the given shards only (one LIST and one GET each):
// the index a writer of a few tables' marks needs.
func ReadShards(ctx context.Context, store objstore.Store, root string, shards []int) (*Index, error) {
	idx := NewIndex()
	// Shards are independent: read readsInFlight at once (a batch
	// across 256 shards is then a few round trips, not 512 in series).
	read := make([]*Shard, len(shards))
	damaged := make([]bool, len(shards))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(readsInFlight)
	for i, sh := range shards {
		g.Go(func() error {
			k, err := listShard(gctx, store, root, sh)
			if err != nil {
				return fmt.Errorf("read fleet index: %w", err)
			}
			if k.newest == 0 {
				return nil
			}
			s, err := readShardAt(gctx, store, root, sh, k.newest)
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

// WriteShard merges updates (marks of this shard's tables) into base
// and writes the result as the shard's next object by PutIfAbsent, then
// lists the shard: the write counts only if it is the newest there (a
// base read long ago may name a sequence number already written and
// deleted: the object would land below the newest, unseen). A writer that
// lost the race, or whose object is not the newest, re-reads the shard and
// merges again (the newer mark of each table wins, Mark.newer), at most
// indexTries times. The same listing gives the objects below the
// newest beyond indexKeep, left by a failed delete or a crash between
// a put and its delete: they are deleted (one request, best effort). keep,
// if not nil, drops the marks of tables it rejects (unregistered). A
// damaged newest object (base holding its seq and no marks) is replaced by
// the next one.
func WriteShard(ctx context.Context, store objstore.Store, root string, shard int, base *Shard, updates map[string]Mark, keep func(string) bool, now time.Time) (*Shard, error) {
	for attempt := 0; attempt < indexTries; attempt++ {
		if attempt > 0 || base == nil {
			idx, err := ReadShards(ctx, store, root, []int{shard})
			if err != nil {
				return nil, err
			}
			base = idx.Shard(shard)
		}
		if base.Seq >= MaxSeq {
			return nil, fmt.Errorf("write fleet index shard %02x: %w: sequence number %d is the largest; delete the shard's folder %s (its tables are then maintained once)",
				shard, table.ErrCorruptObject, base.Seq, ShardPrefix(root, shard))
		}
		next := &Shard{V: indexVersion, Shard: shard, Seq: base.Seq + 1, Written: now, Tables: make(map[string]Mark, len(base.Tables)+len(updates))}
		for n, m := range base.Tables {
			if keep == nil || keep(n) {
				next.Tables[n] = m
			}
		}
		for n, m := range updates {
			// The writer's mark wins unless the index holds a strictly newer one.
			if old, ok := next.Tables[n]; !ok || !old.Newer(m) || m.Root != old.Root {
				next.Tables[n] = m
			}
		}
		b, err := json.Marshal(next)
		if err != nil {
			return nil, fmt.Errorf("write fleet index: %w", err)
		}
		err = store.PutIfAbsent(ctx, ShardKey(root, shard, next.Seq), b)
		if errors.Is(err, objstore.ErrExists) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("write fleet index: %w", err)
		}
		k, err := listShard(ctx, store, root, shard)
		if err != nil {
			return nil, fmt.Errorf("write fleet index: %w", err)
		}
		if k.newest != next.Seq {
			continue // not the newest: merge into the newest and write again
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

// Write writes the updates into their shards (one shard write
// each, see WriteShard, writesInFlight at once), from base if not nil (a scan's index), and
// also rewrites the shards listed in also (damaged ones, or ones holding
// marks that keep drops). It returns how many marks were written.
func Write(ctx context.Context, store objstore.Store, root string, base *Index, updates map[string]Mark, also []int, keep func(string) bool, now time.Time) (int, error) {
	byShard := map[int]map[string]Mark{}
	for n, m := range updates {
		sh := ShardOf(n)
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
		var b *Shard
		if base != nil {
			b = base.Shard(sh)
		}
		g.Go(func() error {
			_, errs[i] = WriteShard(ctx, store, root, sh, b, byShard[sh], keep, now)
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
