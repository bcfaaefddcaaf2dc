package maintenance

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/tablekeep/tablekeep/shared/fleet"
)

// Idle tables with S3 notifications on (issue 23 point 4; docs/format.md
// "Scan state", docs/reliability.md "Safety-net scan").
//
// With Runner.SafetyScanEvery = S > 0 a notified write maintains its table
// (the compaction queue), so the scheduled scan need not list an unchanged
// table at every pass. Instead each index shard has a phase, shard*S/256,
// and a pass lists the tables of the shards whose phase point (phase + k*S)
// falls in the window (last, now], last being the end of the previous
// pass's window (the scan state, one small object). Windows chain, so every
// table is listed once per S, about 1/N of the fleet a pass (N = S / the
// pass interval), never all at once. The scan state also summarises each
// shard as last read (its newest seq, the earliest time one of its marks
// is due without a change, a digest of its tables), so a pass GETs only
// the shards that changed, whose tables changed in the registry, that are
// due, or whose window it is.

// idleScan is a scan's safety-net bookkeeping.
type idleScan struct {
	every time.Duration
	last  time.Time // zero: no usable state (every shard is listed)
	prev  *fleet.ScanState
	// newest is each shard's newest seq as listed.
	newest map[int]uint64
	list   map[int]bool // shards whose tables this pass lists
	// Listed is how many tables the pass listed.
	listed int
}

// digestItem is one table's contribution to a shard digest.
func digestItem(name, root string, p *Policy) uint64 {
	h := sha256.New()
	h.Write([]byte(name))
	h.Write([]byte{0})
	h.Write([]byte(root))
	h.Write([]byte{0})
	if p == nil {
		h.Write([]byte("unregistered"))
	} else {
		b, _ := json.Marshal(p.WithDefaults())
		h.Write(b)
	}
	return binary.BigEndian.Uint64(h.Sum(nil))
}

func digestString(sum uint64, n int) string { return fmt.Sprintf("%d:%016x", n, sum) }

// registryDigests is each shard's digest of its registered tables.
func registryDigests(refs []TableRef) map[int]string {
	sums, counts := map[int]uint64{}, map[int]int{}
	for _, ref := range refs {
		sh := FleetShardOf(ref.Name)
		p := ref.Policy
		sums[sh] += digestItem(ref.Name, ref.Root, &p)
		counts[sh]++
	}
	out := make(map[int]string, len(sums))
	for sh, s := range sums {
		out[sh] = digestString(s, counts[sh])
	}
	return out
}

// summarise is the summary of shard s as read, against the registry.
func summarise(s *fleet.Shard, byName map[string]TableRef) fleet.ShardSummary {
	var sum uint64
	var wake time.Time
	first := true
	for n, m := range s.Tables {
		ref, ok := byName[n]
		if !ok {
			sum += digestItem(n, m.Root, nil)
			continue
		}
		p := ref.Policy
		sum += digestItem(n, m.Root, &p)
		if w := fleet.Wake(m, thresholds(ref)); first || w.Before(wake) {
			wake, first = w, false
		}
	}
	if first {
		wake = time.Unix(1<<62, 0) // no mark: never due
	}
	return fleet.ShardSummary{Seq: s.Seq, Wake: wake, Digest: digestString(sum, len(s.Tables))}
}

// unnotified reports whether ref's writes are not notified (listed at
// every pass).
func (r *Runner) unnotified(ref TableRef) bool {
	return r.Unnotified != nil && r.Unnotified(ref)
}

// startIdleScan reads the scan state and decides which shards the pass
// lists (their phase point in the window) and, through the returned
// selector, which it reads.
func (r *Runner) startIdleScan(ctx context.Context, root string, refs []TableRef, now time.Time) (*idleScan, func(int, uint64) bool) {
	is := &idleScan{every: r.SafetyScanEvery, list: map[int]bool{}}
	st, err := fleet.ReadScanState(ctx, r.Store, root, is.every)
	if err != nil {
		r.Logger.WarnContext(ctx, "scan state unreadable: every table is listed", "err", err)
	}
	if st != nil && st.At.After(now.Add(fleet.MaxScanStateSkew)) {
		r.Logger.WarnContext(ctx, "scan state ahead of this clock: every table is listed", "at", st.At, "now", now)
		st = nil
	}
	if st != nil {
		is.prev, is.last = st, st.At
	}
	for sh := range fleet.Shards {
		is.list[sh] = fleet.InSafetyWindow(sh, is.last, now, is.every)
	}
	always := map[int]bool{}
	for _, ref := range refs {
		if r.unnotified(ref) {
			always[FleetShardOf(ref.Name)] = true
		}
	}
	reg := registryDigests(refs)
	sel := func(sh int, newest uint64) bool {
		if st == nil || is.list[sh] || always[sh] {
			return true
		}
		sum, ok := st.Shards[fmt.Sprintf("%02x", sh)]
		return !ok || sum.Seq != newest || sum.Digest != reg[sh] || !now.Before(sum.Wake)
	}
	return is, sel
}

// saveScanState writes the scan state after a scan whose marks were
// recorded: its window's end (never before the previous one) and the
// summaries of the shards it read (the others' carried over). A write that
// fails leaves the previous state: the next pass's window then starts
// earlier, which lists more, never less.
func (r *Runner) saveScanState(ctx context.Context, root string, sc *FleetScan) {
	is := sc.idle
	if is == nil || sc.IndexError != "" {
		return
	}
	st := &fleet.ScanState{At: sc.At, Every: int64(is.every), Shards: map[string]fleet.ShardSummary{}}
	if is.last.After(st.At) {
		st.At = is.last
	}
	byName := make(map[string]TableRef, len(sc.refs))
	for _, ref := range sc.refs {
		byName[ref.Name] = ref
	}
	damaged := map[int]bool{}
	for _, sh := range sc.index.Damaged {
		damaged[sh] = true
	}
	shards := make([]int, 0, len(is.newest))
	for sh := range is.newest {
		shards = append(shards, sh)
	}
	sort.Ints(shards)
	for _, sh := range shards {
		key := fmt.Sprintf("%02x", sh)
		if s, ok := sc.index.ReadShard(sh); ok {
			if !damaged[sh] {
				st.Shards[key] = summarise(s, byName)
			}
		} else if is.prev != nil {
			if old, ok := is.prev.Shards[key]; ok {
				st.Shards[key] = old
			}
		}
	}
	if err := fleet.WriteScanState(ctx, r.Store, root, st); err != nil {
		r.Logger.WarnContext(ctx, "scan state not written; the next pass lists from the previous window", "err", err)
	}
}
