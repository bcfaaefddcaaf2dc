package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/tablekeep/tablekeep/shared/objstore"
)

// The safety-net scan's state (ScanStateKey; docs/format.md 2.6 "Scan
// state"): the end of the last window a scan covered and a summary of each
// index shard as last read. The Scheduler's scan decides with it
// (scheduler.go).

// scanStateVersion is the format of the scan state.
const scanStateVersion = 1

// MaxScanStateSkew is how far ahead of a scanner's clock the scan state's
// time may be (another scanner's clock running ahead): later than that the
// state is distrusted and the pass lists every table.
const MaxScanStateSkew = time.Minute

// MaxSafetyScanEvery bounds the safety-net cadence.
const MaxSafetyScanEvery = 7 * 24 * time.Hour

// ScanState is the safety-net scan's state (docs/format.md "Scan state").
type ScanState struct {
	V int `json:"v"`
	// At is the end of the last window covered: every shard whose phase
	// point is at or before At has been listed at or after its point.
	At time.Time `json:"at"`
	// Every is the cadence (nanoseconds) the windows were covered for: a
	// state of another cadence is ignored.
	Every int64 `json:"every"`
	// Shards summarises each shard as last read, by "%02x".
	Shards map[string]ShardSummary `json:"shards"`
	// Gen and N are the index layout the summaries are of (absent:
	// generation 0, 256 shards); the summaries of another layout are
	// ignored (the pass reads every shard once; the windows are of the
	// 256 slots whatever the layout, and hold).
	Gen uint64 `json:"gen,omitempty"`
	N   int    `json:"n,omitempty"`
}

// Of reports whether the state is of layout l.
func (st *ScanState) Of(l Layout) bool {
	n := st.N
	if n == 0 {
		n = Shards
	}
	return st.Gen == l.Gen && n == l.N
}

// ShardSummary is what a pass needs to know of a shard it does not read.
type ShardSummary struct {
	// Seq is the shard object summarised (a newer one: read it).
	Seq uint64 `json:"seq"`
	// Wake is the earliest time one of its marks is due with no change
	// (Wake); zero: at once.
	Wake time.Time `json:"wake,omitzero"`
	// Digest is of its marks' (name, root, registered policy): the
	// registry's digest of the shard's tables differs if a table was
	// registered, dropped, moved or re-policied since.
	Digest string `json:"digest"`
}

// ShardPhase is the phase of a slot (ShardOf(name, Shards): a table's
// shard in 256, whatever the index's layout) in a cadence of every.
func ShardPhase(shard int, every time.Duration) time.Duration {
	return every / Shards * time.Duration(shard)
}

// InSafetyWindow reports whether slot shard's phase point (phase + k*every,
// from the Unix epoch) lies in (last, now]: zero last, or a window of at
// least every, holds every point.
func InSafetyWindow(shard int, last, now time.Time, every time.Duration) bool {
	if last.IsZero() || every <= 0 || now.Sub(last) >= every {
		return true
	}
	ns := now.UnixNano() - int64(ShardPhase(shard, every))
	k := ns / int64(every)
	if ns < 0 && ns%int64(every) != 0 {
		k--
	}
	point := k*int64(every) + int64(ShardPhase(shard, every))
	return point > last.UnixNano()
}

// ReadScanState reads the scan state (nil if absent, unreadable or of
// another cadence: the pass then lists every table and reads every shard).
func ReadScanState(ctx context.Context, store objstore.Store, root string, every time.Duration) (*ScanState, error) {
	b, err := store.Get(ctx, root+ScanStateKey)
	if errors.Is(err, objstore.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var st ScanState
	if json.Unmarshal(b, &st) != nil || st.V != scanStateVersion || st.Every != int64(every) || st.At.IsZero() {
		return nil, nil
	}
	return &st, nil
}

// WriteScanState writes the state whole (last writer wins: any writer's
// summary of a shard's seq is true of that object, and its window's end
// was covered).
func WriteScanState(ctx context.Context, store objstore.Store, root string, st *ScanState) error {
	st.V = scanStateVersion
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	return store.Put(ctx, root+ScanStateKey, b)
}
