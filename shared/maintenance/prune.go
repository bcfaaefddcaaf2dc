package maintenance

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tablekeep/tablekeep/shared/dataset"
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
	// Records, if set (a format-3 table), are the versions of [From+1,
	// To+1] that have a change record, ascending: the cleaner reads only
	// those (a version that added and removed no file has none). Unset:
	// every version has one. A cleaner that does not know the field
	// refuses the message: deploy cleaners first.
	Records *[]uint64 `json:"records,omitempty"`
}

// MaxMessageRecords bounds RangeMessage.Records; a range with more
// records, or whose message would then take more than half of
// MaxMessageBytes, is sent without the field (its cleaner reads every
// version). 64 versions of 20 digits take 1,344 bytes.
const MaxMessageRecords = 64

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
	case m.Records != nil && len(*m.Records) > MaxMessageRecords:
		return m, fmt.Errorf("%w: %d records", ErrInvalidMessage, len(*m.Records))
	}
	if m.Records != nil {
		prev := m.From
		for _, v := range *m.Records {
			if v <= prev || v > m.To+1 {
				return m, fmt.Errorf("%w: records not ascending within [%d, %d]", ErrInvalidMessage, m.From+1, m.To+1)
			}
			prev = v
		}
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
	Latest   uint64
	Floor    uint64 // new retention floor: versions below it are prunable
	OldFloor uint64 // the floor trusted for deletion the plan started from (trustFloor)
	// Unproven is the highest floor read that is not trusted (a legacy
	// _refs/floor.json or an unstamped marker of an earlier release), if
	// above OldFloor: readers honour it, the plan does not.
	Unproven  uint64
	Tagged    []uint64
	Ranges    []RangeMessage
	Versions  int // versions stored before pruning
	Prunable  int // versions below the floor, untagged, still stored
	Repaired  int // change records rebuilt
	Replanned int // ranges re-enqueued because an earlier message was lost
	// Resumed: half-cleaned ranges sent again (a ListedBelowFloor's
	// HalfCleaned: manifests gone, change records still stored).
	Resumed   int
	Unreclaim int // versions stored that are below the floor (backlog)
	// PrunableBytes is the size of the prunable versions' manifests.
	PrunableBytes int64
	// Leased is what reader leases did to the floor (lease.go).
	Leased LeaseHold
	// Token is the fencing token of the lease the plan is applied under:
	// ApplyPrune writes the prune state under it, and the state of the
	// highest token wins (a stale holder cannot roll a newer one back).
	Token      uint64
	StateAfter pruneState
	// Fence, if set, is checked before the ranges are sent and before the
	// prune state is written: a holder that lost its lease between its
	// floor write and its enqueue sends nothing. (Its floor marker is
	// harmless: the floor only rises; its state is under a lower token.)
	Fence func(ctx context.Context) error `json:"-"`

	// What the plan was computed from: ApplyPrune recomputes the ranges
	// with the tags read after the raised floor is written.
	name      string
	policy    Policy
	now       time.Time
	vs        []dataset.VersionInfo
	floorRead table.FloorRead   // the plan's floor read (SetFloorFrom)
	tags      map[string]uint64 // read by the plan (dry run: why versions are kept)
	grace     time.Duration     // RetentionGrace
	state     pruneState
	stateKeys []objstore.ObjectInfo // the state objects listed
	changed   bool                  // StateAfter differs from the state read
	// Lease names to delete when applied (holdForLeases).
	staleLeases []string
	leaseDir    *table.LeaseDir
	halfCleaned [][2]uint64 // ListedBelowFloor.HalfCleaned, after Prepare
}

// trackedRange is one enqueued range: At is when it was last sent.
type trackedRange struct {
	From uint64    `json:"from"`
	To   uint64    `json:"to"`
	At   time.Time `json:"at"`
}

// pruneState remembers which ranges were enqueued and when, so a range is
// not enqueued twice while a message for it may be in flight, and is
// re-enqueued once it is older than ReplanAfter and still not cleaned.
type pruneState struct {
	Token  uint64         `json:"token,omitempty"`
	Ranges []trackedRange `json:"ranges,omitempty"`
	// Legacy single-object state (prune-state.json): read, never written.
	EnqueuedThrough uint64    `json:"enqueued_through,omitempty"`
	EnqueuedAt      time.Time `json:"enqueued_at,omitzero"`
}

// MaxTrackedRanges bounds the ranges a prune state tracks: beyond it the
// two closest ranges are merged, keeping the older send time (so a merged
// range is re-planned no later than its parts would have been).
const MaxTrackedRanges = 64

const (
	// pruneStatePrefix holds one state object per fencing token,
	// prune-state/<token, 20 digits>.json: the highest token wins.
	pruneStatePrefix = "_maintenance/prune-state/"
	// legacyPruneStateKey is the state object of earlier releases.
	legacyPruneStateKey = "_maintenance/prune-state.json"
)

func pruneStateKey(token uint64) string { return fmt.Sprintf("%s%020d.json", pruneStatePrefix, token) }

// readPruneState returns the state of the highest fencing token (or the
// legacy object if there is none) and the keys of every state object.
// stateLocation is where a prune state lives: a *table.Table, or a
// Source's state prefix (stateAt).
type stateLocation interface {
	Store() objstore.Store
	Root() string
}

func readPruneState(ctx context.Context, t stateLocation) (pruneState, []objstore.ObjectInfo, error) {
	var s pruneState
	var keys []objstore.ObjectInfo
	err := objstore.ListAll(ctx, t.Store(), t.Root()+pruneStatePrefix, "", func(o objstore.ObjectInfo) error {
		rel := strings.TrimPrefix(o.Key, t.Root()+pruneStatePrefix)
		if len(rel) == 25 && strings.HasSuffix(rel, ".json") {
			keys = append(keys, o)
		}
		return nil
	})
	if err != nil {
		return s, nil, err
	}
	key := t.Root() + legacyPruneStateKey
	if len(keys) > 0 {
		key = keys[len(keys)-1].Key // zero-padded: the last is the highest token
	}
	b, err := t.Store().Get(ctx, key)
	if errors.Is(err, objstore.ErrNotExist) {
		return s, keys, nil
	}
	if err != nil {
		return s, keys, err
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, keys, fmt.Errorf("%s: %w: %v", key, table.ErrCorruptObject, err)
	}
	if len(s.Ranges) == 0 && s.EnqueuedThrough > 0 {
		s.Ranges = []trackedRange{{From: 1, To: s.EnqueuedThrough, At: s.EnqueuedAt}}
	}
	s.EnqueuedThrough, s.EnqueuedAt = 0, time.Time{}
	return s, keys, nil
}

// StateRestartAge: a prune state of a higher fencing token than the
// writer's, last written longer ago than this, is taken to predate a
// restart of the lock's token sequence (a DynamoDB lock item removed by TTL
// after a week unused) and is deleted; a younger one is a newer holder's,
// and the writer, stale, leaves it alone.
const StateRestartAge = 24 * time.Hour

// writePruneState writes s under token (its own key: only the holder of
// that token writes it), then deletes the states of lower tokens and the
// legacy object, best effort. A stale holder's state, written late under
// its lower token, is ignored by readers and deleted by the next holder.
func writePruneState(ctx context.Context, t stateLocation, s pruneState, token uint64, old []objstore.ObjectInfo, now time.Time) error {
	s.Token = token
	b, _ := json.Marshal(s)
	key := t.Root() + pruneStateKey(token)
	if err := t.Store().Put(ctx, key, b); err != nil {
		return err
	}
	var del []string
	for _, o := range old {
		if o.Key < key || o.Key > key && now.Sub(o.LastModified) > StateRestartAge {
			del = append(del, o.Key)
		}
	}
	del = append(del, t.Root()+legacyPruneStateKey)
	_ = t.Store().Delete(ctx, del)
	return nil
}

// RetentionGrace is how long after being superseded a version of t is
// kept, and how old an unreferenced file must be before the sweep deletes
// it: the longer of the policy's and the writers' grace windows, plus
// table.SafetyMargin (a writer's last check may precede its manifest PUT by
// MaxCommitDuration, and the clocks of writer, store and maintainer may
// each be off by MaxClockSkew): table.RetentionGrace, saturated, with a
// policy grace beyond table.MaxGrace counted as MaxGrace.
func RetentionGrace(t *table.Table, p Policy) time.Duration {
	return table.RetentionGrace(p.WithDefaults().Grace, t.WriterGrace())
}

// PlanPrune computes the retention floor and the ranges to enqueue. Retained:
// the newest KeepLast versions, tagged versions, and versions superseded
// (by the store time of the next manifest) at most RetentionGrace before
// now. It reads only listings, tags and the prune state.
func PlanPrune(ctx context.Context, t *table.Table, name string, p Policy, now time.Time) (PrunePlan, error) {
	return planPrune(ctx, &TableSource{T: t}, name, p, now, 0, false)
}

// planPrune is PlanSourcePrune after `commits` more versions committed at
// now (the dry run's model of a planned compaction: dryrun.go), for every
// format. forApply: the plan is applied next (ApplySourcePrune), which
// reads the tags after raising the floor; with a FloorReader the tags are
// then read here only when the floor stays (one LIST fewer for a plan that
// raises it).
func planPrune(ctx context.Context, src Source, name string, p Policy, now time.Time, commits int, forApply bool) (PrunePlan, error) {
	p = p.WithDefaults()
	plan := PrunePlan{name: name, policy: p, now: now}
	if err := src.Prepare(ctx); err != nil {
		return plan, fmt.Errorf("prepare %s: %w", src.Root(), err)
	}
	if lb, ok := src.(ListedBelowFloor); ok {
		plan.halfCleaned = lb.HalfCleaned()
	}
	// The version listing, the floor and the tags are independent reads:
	// sent at once. (Tags read here only preview the plan (dry run):
	// the apply reads them again after writing the raised floor.)
	fr, fast := src.(FloorReader)
	var vs []dataset.VersionInfo
	var tags map[string]uint64
	tagsRead := !forApply || !fast
	reads := []func(context.Context) error{
		func(ctx context.Context) (err error) { vs, err = src.Versions(ctx); return err },
		func(ctx context.Context) (err error) {
			if !fast {
				plan.OldFloor, err = src.Floor(ctx)
				return err
			}
			plan.floorRead, err = fr.ReadFloor(ctx)
			plan.OldFloor = plan.floorRead.Floor
			return err
		},
	}
	if tagsRead {
		reads = append(reads, func(ctx context.Context) (err error) { tags, err = src.Tags(ctx); return err })
	}
	err := inParallel(ctx, reads...)
	if err != nil {
		return plan, err
	}
	if len(vs) == 0 {
		return plan, fmt.Errorf("%s: %w", src.Root(), table.ErrNotATable)
	}
	plan.Versions = len(vs)
	if err := plan.trustFloor(src.Root(), vs, fast); err != nil {
		return plan, err
	}
	vs = withCommits(vs, commits, now)
	plan.vs = vs
	plan.Latest = vs[len(vs)-1].Version
	// The floor is the first version that must be kept: among the newest
	// KeepLast, or whose grace window (from GraceFrom) is not over.
	grace := src.Grace(p.Grace)
	plan.grace = grace
	floor := uint64(1)
	if plan.Latest > uint64(p.KeepLast) {
		floor = plan.Latest - uint64(p.KeepLast) + 1
	}
	for _, v := range vs {
		if !v.GraceFrom.IsZero() && now.Sub(v.GraceFrom) <= grace {
			floor = min(floor, v.Version)
			break
		}
	}
	plan.Floor = max(floor, plan.OldFloor)
	if ll, ok := src.(LeaseLister); ok {
		if err := plan.holdForLeases(ctx, ll.LeaseDir(), now, forApply); err != nil {
			return plan, err
		}
	}
	plan.stampableFloor(vs, now)
	// With no stored version below the floor (an idle, cleaned table)
	// nothing can be enqueued and the state is not needed: skip reading it.
	var more []func(context.Context) error
	if vs[0].Version < plan.Floor {
		more = append(more, func(ctx context.Context) (err error) {
			plan.state, plan.stateKeys, err = readPruneState(ctx, stateAt{src.Store(), src.StateRoot()})
			return err
		})
	}
	// A floor that stays: the apply keeps the plan's tags (no Tag lands
	// below an unchanged floor), so they are read now. A raised floor:
	// the apply reads them after writing it, and the ranges planned here
	// without them are replaced then.
	if !tagsRead && plan.Floor <= plan.OldFloor {
		more = append(more, func(ctx context.Context) (err error) { tags, err = src.Tags(ctx); return err })
	}
	if err := inParallel(ctx, more...); err != nil {
		return plan, err
	}
	plan.planRanges(src.Root(), tags)
	return plan, nil
}

func versionCmp(v dataset.VersionInfo, f uint64) int { return cmp.Compare(v.Version, f) }

// trustFloor decides the floor the plan starts from (plan.OldFloor): a
// floor is trusted only when it provably belongs to this history
// (docs/format.md 2.4, "Which floor is trusted"; docs/reliability.md). A
// FloorReader's (tablekeep's) is its highest marker's, when that marker is
// stamped with the stamp its version's manifest is listed with in vs (the
// plan's own listing: no request more). The legacy object and markers
// without a stamp (earlier releases) are not trusted: the plan starts from
// floor 0, that is from the versions' own times, and readers keep
// honouring them (plan.Unproven) until a trusted floor passes them.
// Evidence of another history is ErrStaleFloor, nothing planned: the
// readers' floor above the latest version, the highest stamped marker's
// version listed with another stamp, or an unstamped marker older than
// its version's manifest by more than MaxClockSkew. Other Sources (Lance)
// prove their floor in Prepare (the sidecar's head against its manifest).
func (plan *PrunePlan) trustFloor(root string, vs []dataset.VersionInfo, fast bool) error {
	latest := vs[len(vs)-1].Version
	if plan.OldFloor > latest {
		return staleFloor(root, plan.OldFloor, latest)
	}
	if !fast {
		return nil
	}
	proof := plan.floorRead.Prove(listedIn(vs))
	if proof.Other != "" {
		return fmt.Errorf("%w (%s)", staleFloor(root, plan.OldFloor, latest), proof.Other)
	}
	plan.OldFloor, plan.Unproven = proof.Floor, proof.Unproven
	return nil
}

// listedIn answers FloorRead.Prove from a version listing (oldest
// first): the planner's (trustFloor) and the sweep's (trustedFloor).
func listedIn(vs []dataset.VersionInfo) table.Listed {
	return func(v uint64) (int64, time.Time, bool) {
		i, found := slices.BinarySearchFunc(vs, v, versionCmp)
		if !found {
			return 0, time.Time{}, false
		}
		return vs[i].ManifestBytes, vs[i].Time, true
	}
}

// stampableFloor moves a raised floor onto a version whose manifest its
// marker can name (docs/format.md 2.4): a floor on a version not stored (a
// gap) first moves up to the next stored one, which deletes nothing more;
// then down to the highest stored version whose manifest was written more
// than table.FloorStampAge before now (by the store's time against the
// planner's clock), which keeps more. So the old and the new history's
// manifests of one version are never dated in the same second: their
// stamps differ whatever their sizes. If no version above OldFloor
// qualifies the floor stays, except that floor 1 needs no proof (nothing
// is below it: trusting it deletes nothing).
func (plan *PrunePlan) stampableFloor(vs []dataset.VersionInfo, now time.Time) {
	if plan.Floor <= plan.OldFloor {
		return
	}
	i, _ := slices.BinarySearchFunc(vs, plan.Floor, versionCmp)
	i = min(i, len(vs)-1)
	for i >= 0 && vs[i].Version > max(plan.OldFloor, 1) && !table.Stampable(vs[i].Time, now) {
		i--
	}
	if i < 0 || vs[i].Version <= plan.OldFloor {
		plan.Floor = plan.OldFloor
		return
	}
	plan.Floor = vs[i].Version
}

// floorStamp is the stamp of version v's manifest as the plan listed it.
func (plan *PrunePlan) floorStamp(v uint64) (table.ManifestStamp, error) {
	i, found := slices.BinarySearchFunc(plan.vs, v, versionCmp)
	if !found {
		return table.ManifestStamp{}, fmt.Errorf("floor %d: %w: its manifest is not in the plan's listing", v, table.ErrVersionNotFound)
	}
	return table.StampOfListed(plan.vs[i].ManifestBytes, plan.vs[i].Time), nil
}

// planRanges fills the tag-dependent part of the plan: the prunable
// versions (stored, below the floor, untagged), the ranges to enqueue and
// the state after. A tracked range is kept while it holds a prunable
// version; one older than ReplanAfter is re-enqueued; a prunable version
// no tracked range covers (new below the floor, or untagged since its
// range was done) starts a new range. So every prunable version is
// enqueued at most ReplanAfter + one pass after its last send, whatever
// else is enqueued meanwhile.
func (plan *PrunePlan) planRanges(root string, tags map[string]uint64) {
	p, now := plan.policy, plan.now
	plan.tags = tags
	tagged := map[uint64]bool{}
	plan.Tagged = plan.Tagged[:0]
	for _, v := range tags {
		if !tagged[v] {
			plan.Tagged = append(plan.Tagged, v)
		}
		tagged[v] = true
	}
	slices.Sort(plan.Tagged)
	plan.Unreclaim, plan.Prunable, plan.PrunableBytes, plan.Replanned = 0, 0, 0, 0
	plan.Ranges = nil
	var prunable []uint64
	for _, v := range plan.vs {
		if v.Version < plan.Floor {
			plan.Unreclaim++
			if !tagged[v.Version] {
				prunable = append(prunable, v.Version)
				plan.PrunableBytes += v.ManifestBytes
			}
		}
	}
	plan.Prunable = len(prunable)
	has := func(r trackedRange) (uint64, bool) {
		i, _ := slices.BinarySearch(prunable, r.From)
		if i < len(prunable) && prunable[i] <= r.To {
			return prunable[i], true
		}
		return 0, false
	}
	send := func(from, to uint64) {
		for f := from; f <= to; f += p.RangeVersions {
			plan.Ranges = append(plan.Ranges, RangeMessage{V: 1, Table: plan.name, Root: root, From: f, To: min(f+p.RangeVersions-1, to)})
		}
	}
	var after []trackedRange
	for _, r := range plan.state.Ranges {
		lo, ok := has(r)
		if !ok {
			continue // cleaned (or only tagged versions left): forget it
		}
		if now.Sub(r.At) > p.ReplanAfter || plan.started(r) {
			// A message for it was lost (or its cleaner keeps failing);
			// or its cleanup started and was cut off (a half-cleaned
			// range overlaps it): re-sent by this pass.
			send(lo, min(r.To, plan.Floor-1))
			plan.Replanned++
			r.At = now
		}
		after = append(after, r)
	}
	slices.SortFunc(after, func(a, b trackedRange) int { return cmp.Compare(a.From, b.From) })
	covered := func(v uint64) (nextFrom uint64, in bool) {
		nextFrom = math.MaxUint64
		for _, r := range after {
			if v >= r.From && v <= r.To {
				return 0, true
			}
			if r.From > v {
				return r.From, false
			}
		}
		return nextFrom, false
	}
	var fresh []trackedRange
	for i := 0; i < len(prunable); {
		v := prunable[i]
		next, in := covered(v)
		if in {
			i++
			continue
		}
		// Up to RangeVersions, the floor, or the next tracked range.
		to := min(v+p.RangeVersions-1, plan.Floor-1, next-1)
		send(v, to)
		fresh = append(fresh, trackedRange{From: v, To: to, At: now})
		for i < len(prunable) && prunable[i] <= to {
			i++
		}
	}
	after = append(after, fresh...)
	// A half-cleaned range (its manifests gone before its files, the
	// cleanup cut off) has no prunable version left to track: it is sent
	// on every pass until its change records are gone, not ReplanAfter
	// later (docs/reliability.md, "No listed Lance version is left
	// unreadable"). Its cleaner deletes what is left, idempotently.
	plan.Resumed = 0
	for _, r := range plan.halfCleaned {
		if r[0] < plan.Floor && r[0] <= r[1] {
			send(r[0], min(r[1], plan.Floor-1))
			plan.Resumed++
		}
	}
	slices.SortFunc(after, func(a, b trackedRange) int { return cmp.Compare(a.From, b.From) })
	for len(after) > MaxTrackedRanges {
		best := 0
		for i := 1; i+1 < len(after); i++ {
			if after[i+1].From-after[i].To < after[best+1].From-after[best].To {
				best = i
			}
		}
		a, b := after[best], after[best+1]
		after[best] = trackedRange{From: a.From, To: max(a.To, b.To), At: minTime(a.At, b.At)}
		after = slices.Delete(after, best+1, best+2)
	}
	plan.StateAfter = pruneState{Ranges: after}
	plan.changed = !slices.EqualFunc(after, plan.state.Ranges, func(a, b trackedRange) bool {
		return a.From == b.From && a.To == b.To && a.At.Equal(b.At)
	})
}

// started reports whether a half-cleaned range (ListedBelowFloor) overlaps
// r: r's cleanup deleted manifests from its start and was cut off before
// its last ones (a continuation's), so the rest of r is re-sent now rather
// than ReplanAfter after its send. (A half-cleaned range just below r is
// sent by itself: r's own files were not touched yet.)
func (plan *PrunePlan) started(r trackedRange) bool {
	for _, h := range plan.halfCleaned {
		if h[0] <= r.To && h[1] >= r.From {
			return true
		}
	}
	return false
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// Enqueuer sends cleanup messages.
type Enqueuer interface {
	Send(ctx context.Context, bodies [][]byte) error
}

// ApplyPrune records the floor, reads the tags (after the floor: a Tag
// racing the plan is either seen here or withdraws itself), re-plans the
// ranges with them, makes sure every change record the ranges need exists,
// enqueues the ranges and records what was enqueued under plan.Token. Call
// it under the table's lock, with the fence checked. The floor is written
// first: from then on checkout, tag and restore below it fail, before any
// cleaner can delete anything.
func ApplyPrune(ctx context.Context, t *table.Table, plan *PrunePlan, q Enqueuer) error {
	return ApplySourcePrune(ctx, &TableSource{T: t}, plan, q)
}

// applyTarget is what applying a prune plan writes to and reads from
// (ApplySourcePrune).
type applyTarget struct {
	root     string
	setFloor func(context.Context, uint64) error
	tags     func(context.Context) (map[string]uint64, error)
	ensure   func(context.Context, [][2]uint64) (int, error) // the ranges' change records exist
	// records, if set, is range i's RangeMessage.Records after ensure (nil:
	// the cleaner reads every version).
	records func(i int) *[]uint64
	state   stateLocation
}

// apply is ApplyPrune's order, for every format: the floor, the tags read
// again, the ranges' change records ensured, the fence, the ranges sent, the
// fence, the prune state.
func (plan *PrunePlan) apply(ctx context.Context, at applyTarget, q Enqueuer) error {
	defer plan.deleteStaleLeases(ctx)
	if plan.Floor > plan.OldFloor {
		if err := at.setFloor(ctx, plan.Floor); err != nil {
			return fmt.Errorf("set floor: %w", err)
		}
		// With the floor unchanged the plan's tags stand: no Tag can land
		// below an unchanged floor (its Checkout refuses the version).
		tags, err := at.tags(ctx)
		if err != nil {
			return fmt.Errorf("read tags: %w", err)
		}
		plan.planRanges(at.root, tags)
	}
	if len(plan.Ranges) == 0 && !plan.changed {
		return nil
	}
	if len(plan.Ranges) > 0 {
		// A range [From, To] reads the change records [From+1, To+1]:
		// only those are repaired, so a record re-created while an earlier
		// message's cleaner deletes it is deleted again by the range sent
		// now (never left outside every range).
		plan.Repaired = 0
		spans := make([][2]uint64, len(plan.Ranges))
		for i, r := range plan.Ranges {
			spans[i] = [2]uint64{r.From + 1, min(r.To+1, plan.Floor)}
		}
		n, err := at.ensure(ctx, spans)
		plan.Repaired = n
		if err != nil {
			return err
		}
		bodies := make([][]byte, len(plan.Ranges))
		for i, r := range plan.Ranges {
			if at.records != nil {
				if r.Records = at.records(i); len(r.Encode()) > MaxMessageBytes/2 {
					r.Records = nil // room for a continuation's re-encoding
				}
			}
			bodies[i] = r.Encode()
		}
		if err := plan.checkFence(ctx); err != nil {
			return err
		}
		if err := q.Send(ctx, bodies); err != nil {
			return fmt.Errorf("enqueue %d ranges: %w", len(bodies), err)
		}
	}
	if err := plan.checkFence(ctx); err != nil {
		return err
	}
	if err := writePruneState(ctx, at.state, plan.StateAfter, plan.Token, plan.stateKeys, plan.now); err != nil {
		// The messages went out; without the state a later run re-enqueues
		// them, which cleaners tolerate (at-least-once).
		return fmt.Errorf("record prune state: %w", err)
	}
	return nil
}

func (plan *PrunePlan) checkFence(ctx context.Context) error {
	if plan.Fence == nil {
		return nil
	}
	return plan.Fence(ctx)
}

// ensureChangeRecords rebuilds missing change records for the versions of
// each span [from, through] from their manifests (a committer that crashed
// between its manifest and its change record leaves one missing). The
// spans' listings are sent at once, then the missing records are rebuilt
// at once (each bounded by Concurrency); the requests are those of a
// serial run: one listing per span, one repair per missing record.
func ensureChangeRecords(ctx context.Context, t *table.Table, spans [][2]uint64) (int, error) {
	n, _, err := ensureChangeRecordsIndexed(ctx, t, spans)
	return n, err
}

// ensureChangeRecordsIndexed is ensureChangeRecords that also returns, per
// span, the versions that have a record afterwards. On a format-3 table a
// missing record whose version the latest manifest's record index says
// added and removed no file is not repaired: that version has none.
func ensureChangeRecordsIndexed(ctx context.Context, t *table.Table, spans [][2]uint64) (int, [][]uint64, error) {
	missing := make([][]uint64, len(spans))
	have := make([][]uint64, len(spans))
	latest := t.Cached()
	err := forEach(ctx, len(spans), func(ctx context.Context, i int) error {
		if noIndexedRecord(latest, spans[i][0], spans[i][1]) {
			// Format 3: the latest manifest's record index covers the
			// whole span and names no version in it, so no commit in it
			// wrote a record: the listing could find none to repair or to
			// name, and is not sent. A stray record the index does not
			// name is the orphan sweep's, as when the listing runs
			// (docs/format.md, "Record index"). Nothing is deleted on
			// this answer: the cleaner reads and deletes only the named
			// records, and its latest-version guard and floor re-check
			// are unchanged.
			have[i] = []uint64{}
			return nil
		}
		var err error
		if named, ok := indexedRecordsIn(latest, spans[i][0], spans[i][1]); ok && len(named) <= maxRecordHeads {
			// Format 3: the index covers the span and names a few
			// versions, the only ones whose records the listing below
			// would count (an unnamed version's missing record is not
			// repaired, and a stray record is the orphan sweep's, as
			// above): a HEAD of each named record (priced as a GET, a
			// twelfth of a LIST) says the same as the listing.
			missing[i], have[i], err = headChangeRecords(ctx, t, named)
			return err
		}
		missing[i], have[i], err = missingChangeRecords(ctx, t, spans[i][0], spans[i][1])
		if latest != nil {
			missing[i] = slices.DeleteFunc(missing[i], func(v uint64) bool {
				has, known := latest.HasRecord(v)
				return known && !has
			})
		}
		return err
	})
	if err != nil {
		return 0, nil, err
	}
	var todo []uint64
	for _, m := range missing {
		todo = append(todo, m...)
	}
	slices.Sort(todo)
	todo = slices.Compact(todo)
	var repaired atomic.Int64
	err = forEachTick(ctx, "repairing change records", len(todo), func(ctx context.Context, i int) error {
		v := todo[i]
		if _, err := t.RepairChangeRecord(ctx, v); err != nil {
			if errors.Is(err, objstore.ErrNotExist) {
				return nil // version already pruned by an earlier pass
			}
			return fmt.Errorf("repair change record %d: %w", v, err)
		}
		repaired.Add(1)
		return nil
	})
	for i := range have {
		have[i] = append(have[i], missing[i]...)
		slices.Sort(have[i])
		have[i] = slices.Compact(have[i])
	}
	return int(repaired.Load()), have, err
}

// noIndexedRecord reports whether m's record index covers every version
// of [from, through] and names none of them (format 3).
func noIndexedRecord(m *table.Manifest, from, through uint64) bool {
	if m == nil || from > through {
		return false
	}
	if _, known := m.HasRecord(max(from, 1)); !known {
		return false
	}
	if _, known := m.HasRecord(through); !known {
		return false
	}
	i, _ := slices.BinarySearch(m.Records, max(from, 1))
	return i == len(m.Records) || m.Records[i] > through
}

// maxRecordHeads bounds the records ensureChangeRecordsIndexed checks by
// HEAD instead of listing the span: up to 4 (4 HEADs cost a third of a
// LIST; an active table's span names 1 or 2).
const maxRecordHeads = 4

// indexedRecordsIn returns the versions of [from, through] that m's record
// index names, and whether the index covers the whole span (format 3).
func indexedRecordsIn(m *table.Manifest, from, through uint64) ([]uint64, bool) {
	if m == nil || from > through {
		return nil, false
	}
	if _, known := m.HasRecord(max(from, 1)); !known {
		return nil, false
	}
	if _, known := m.HasRecord(through); !known {
		return nil, false
	}
	var out []uint64
	for _, v := range m.Records {
		if v >= max(from, 1) && v <= through {
			out = append(out, v)
		}
	}
	return out, true
}

// headChangeRecords checks the change records of versions vs, one HEAD
// each (sent at once), and returns those missing and those present.
func headChangeRecords(ctx context.Context, t *table.Table, vs []uint64) (missing, present []uint64, err error) {
	found := make([]bool, len(vs))
	err = forEach(ctx, len(vs), func(ctx context.Context, i int) error {
		_, err := t.Store().Head(ctx, t.Root()+table.ChangeKey(vs[i]))
		if errors.Is(err, objstore.ErrNotExist) {
			return nil
		}
		found[i] = err == nil
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	for i, v := range vs {
		if found[i] {
			present = append(present, v)
		} else {
			missing = append(missing, v)
		}
	}
	return missing, present, nil
}

// missingChangeRecords lists the change records of [from, through] and
// returns the versions whose record is missing.
func missingChangeRecords(ctx context.Context, t *table.Table, from, through uint64) (missing, present []uint64, err error) {
	have := map[uint64]bool{}
	startAfter := t.Root() + table.ChangeKey(from-1)
	if from <= 1 {
		startAfter = ""
	}
	err = objstore.ListAll(ctx, t.Store(), t.Root()+table.ChangesPrefix, startAfter, func(o objstore.ObjectInfo) error {
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
		return nil, nil, err
	}
	for v := max(from, 1); v <= through; v++ {
		if !have[v] {
			missing = append(missing, v)
		} else {
			present = append(present, v)
		}
	}
	return missing, present, nil
}

var errStopList = errors.New("stop listing")
