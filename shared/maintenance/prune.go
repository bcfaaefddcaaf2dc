package maintenance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/table"
)

// RangeMessage asks a cleaner to prune versions [From, To] of a table. It
// is the queue's message body (JSON). Cursor, on a continuation, is the last
// change record already processed.
type RangeMessage struct {
	V      int    `json:"v"`
	Table  string `json:"table"` // name in _registry
	Root   string `json:"root"`  // the table's root, checked against _registry
	From   uint64 `json:"from"`
	To     uint64 `json:"to"`
	Cursor uint64 `json:"cursor,omitempty"`
}

// MaxMessageBytes bounds a cleanup message body; real ones are ~100 bytes.
const MaxMessageBytes = 4096

// DecodeRangeMessage parses and sanity-checks a message body.
func DecodeRangeMessage(body []byte) (RangeMessage, error) {
	var m RangeMessage
	if len(body) > MaxMessageBytes {
		return m, fmt.Errorf("%w: %d bytes", ErrInvalidMessage, len(body))
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return m, fmt.Errorf("%w: %v", ErrInvalidMessage, err)
	}
	if dec.More() {
		return m, fmt.Errorf("%w: trailing data", ErrInvalidMessage)
	}
	switch {
	case m.V != 1:
		return m, fmt.Errorf("%w: version %d", ErrInvalidMessage, m.V)
	case m.Table == "":
		return m, fmt.Errorf("%w: no table", ErrInvalidMessage)
	case m.From == 0 || m.To < m.From:
		return m, fmt.Errorf("%w: range [%d, %d]", ErrInvalidMessage, m.From, m.To)
	case m.To-m.From >= 100000:
		return m, fmt.Errorf("%w: range [%d, %d] too large", ErrInvalidMessage, m.From, m.To)
	case m.Cursor != 0 && (m.Cursor < m.From || m.Cursor > m.To+1):
		return m, fmt.Errorf("%w: cursor %d outside [%d, %d]", ErrInvalidMessage, m.Cursor, m.From, m.To+1)
	}
	// JSON escaping can grow a body up to 6x on re-encoding (a continuation
	// is one): refuse what could not be re-sent (found by FuzzDecodeRangeMessage).
	cont := m
	cont.Cursor = math.MaxUint64
	if n := len(cont.Encode()); n > MaxMessageBytes {
		return m, fmt.Errorf("%w: re-encoded message would be %d bytes", ErrInvalidMessage, n)
	}
	return m, nil
}

// Encode returns the message body.
func (m RangeMessage) Encode() []byte {
	b, _ := json.Marshal(m)
	return b
}

// PrunePlan is what the prune planner decided.
type PrunePlan struct {
	Latest    uint64
	Floor     uint64 // new retention floor: versions below it are prunable
	OldFloor  uint64
	Tagged    []uint64
	Ranges    []RangeMessage
	Versions  int // versions stored before pruning
	Prunable  int // versions below the floor, untagged, still stored
	Repaired  int // change records rebuilt
	Replanned int // ranges re-enqueued because an earlier message was lost
	Unreclaim int // versions stored that are below the floor (backlog)
	// PrunableBytes is the size of the prunable versions' manifests.
	PrunableBytes int64
	StateAfter    pruneState
}

// pruneState remembers which ranges were enqueued, so a range is never
// enqueued twice while a message for it may be in flight.
type pruneState struct {
	EnqueuedThrough uint64    `json:"enqueued_through"`
	EnqueuedAt      time.Time `json:"enqueued_at"`
}

const pruneStateKey = "_maintenance/prune-state.json"

func readPruneState(ctx context.Context, t *table.Table) (pruneState, error) {
	var s pruneState
	b, err := t.Store().Get(ctx, t.Root()+pruneStateKey)
	if errors.Is(err, objstore.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("%s%s: %w: %v", t.Root(), pruneStateKey, table.ErrCorruptObject, err)
	}
	return s, nil
}

// PlanPrune computes the retention floor and the ranges to enqueue. Retained:
// the newest KeepLast versions, tagged versions, and versions superseded less
// than Grace ago. It reads only listings, tags and missing change records.
func PlanPrune(ctx context.Context, t *table.Table, name string, p Policy, now time.Time) (PrunePlan, error) {
	p = p.WithDefaults()
	var plan PrunePlan
	vs, err := t.Versions(ctx)
	if err != nil {
		return plan, err
	}
	if len(vs) == 0 {
		return plan, fmt.Errorf("%s: %w", t.Root(), table.ErrNotATable)
	}
	plan.Versions = len(vs)
	plan.Latest = vs[len(vs)-1].Version
	if plan.OldFloor, err = t.Floor(ctx); err != nil {
		return plan, err
	}
	tags, err := t.Tags(ctx)
	if err != nil {
		return plan, err
	}
	tagged := map[uint64]bool{}
	for _, v := range tags {
		tagged[v] = true
		plan.Tagged = append(plan.Tagged, v)
	}
	// The floor is the first version that must be kept: among the newest
	// KeepLast, or superseded (its successor written) less than Grace ago.
	floor := plan.Latest
	if plan.Latest > uint64(p.KeepLast) {
		floor = plan.Latest - uint64(p.KeepLast) + 1
	} else {
		floor = 1
	}
	for i := 0; i+1 < len(vs); i++ {
		if now.Sub(vs[i+1].Time) < p.Grace {
			floor = min(floor, vs[i].Version)
			break
		}
	}
	plan.Floor = max(floor, plan.OldFloor)
	var prunable []uint64
	for _, v := range vs {
		if v.Version < plan.Floor {
			plan.Unreclaim++
			if !tagged[v.Version] {
				prunable = append(prunable, v.Version)
				plan.PrunableBytes += v.ManifestBytes
			}
		}
	}
	plan.Prunable = len(prunable)
	state, err := readPruneState(ctx, t)
	if err != nil {
		return plan, err
	}
	plan.StateAfter = state
	if len(prunable) == 0 {
		return plan, nil
	}
	// Ranges cover stored versions below the floor. Those above
	// EnqueuedThrough are new; those at or below it were enqueued before and
	// are re-enqueued only if still stored after ReplanAfter (a lost message).
	lo := prunable[0]
	hi := plan.Floor - 1
	start := state.EnqueuedThrough + 1
	if state.EnqueuedThrough >= lo && now.Sub(state.EnqueuedAt) > p.ReplanAfter {
		start = lo
		plan.Replanned = 1
	}
	start = max(start, lo)
	for from := start; from <= hi; from += p.RangeVersions {
		to := min(from+p.RangeVersions-1, hi)
		plan.Ranges = append(plan.Ranges, RangeMessage{V: 1, Table: name, Root: t.Root(), From: from, To: to})
	}
	if len(plan.Ranges) > 0 {
		plan.StateAfter = pruneState{EnqueuedThrough: hi, EnqueuedAt: now}
	}
	return plan, nil
}

// Enqueuer sends cleanup messages.
type Enqueuer interface {
	Send(ctx context.Context, bodies [][]byte) error
}

// ApplyPrune records the floor, makes sure every change record the ranges
// need exists, enqueues the ranges and records what was enqueued. Call it
// under the table's lock. The floor is written first: from then on checkout,
// tag and restore below it fail, before any cleaner can delete anything.
func ApplyPrune(ctx context.Context, t *table.Table, plan *PrunePlan, q Enqueuer) error {
	if plan.Floor > plan.OldFloor {
		if err := t.SetFloor(ctx, plan.Floor); err != nil {
			return fmt.Errorf("set floor: %w", err)
		}
	}
	if len(plan.Ranges) == 0 {
		return nil
	}
	// A range [From, To] reads the change records [From+1, To+1].
	n, err := ensureChangeRecords(ctx, t, plan.Ranges[0].From+1, plan.Floor)
	plan.Repaired = n
	if err != nil {
		return err
	}
	bodies := make([][]byte, len(plan.Ranges))
	for i, r := range plan.Ranges {
		bodies[i] = r.Encode()
	}
	if err := q.Send(ctx, bodies); err != nil {
		return fmt.Errorf("enqueue %d ranges: %w", len(bodies), err)
	}
	b, _ := json.Marshal(plan.StateAfter)
	if err := t.Store().Put(ctx, t.Root()+pruneStateKey, b); err != nil {
		// The messages went out; without the state a later run re-enqueues
		// them, which cleaners tolerate (at-least-once).
		return fmt.Errorf("record prune state: %w", err)
	}
	return nil
}

// ensureChangeRecords rebuilds missing change records for versions
// [from, through] from their manifests (a committer that crashed between
// its manifest and its change record leaves one missing).
func ensureChangeRecords(ctx context.Context, t *table.Table, from, through uint64) (int, error) {
	have := map[uint64]bool{}
	startAfter := t.Root() + table.ChangeKey(from-1)
	if from <= 1 {
		startAfter = ""
	}
	err := objstore.ListAll(ctx, t.Store(), t.Root()+table.ChangesPrefix, startAfter, func(o objstore.ObjectInfo) error {
		v, ok := table.ParseChangeKey(strings.TrimPrefix(o.Key, t.Root()))
		if ok {
			if v > through {
				return errStopList
			}
			have[v] = true
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStopList) {
		return 0, err
	}
	repaired := 0
	for v := max(from, 1); v <= through; v++ {
		if have[v] {
			continue
		}
		if _, err := t.RepairChangeRecord(ctx, v); err != nil {
			if errors.Is(err, objstore.ErrNotExist) {
				continue // version already pruned by an earlier pass
			}
			return repaired, fmt.Errorf("repair change record %d: %w", v, err)
		}
		repaired++
	}
	return repaired, nil
}

var errStopList = errors.New("stop listing")
