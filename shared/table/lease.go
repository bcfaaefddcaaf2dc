package table

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tablekeep/tablekeep/shared/clock"
	"github.com/tablekeep/tablekeep/shared/dataset"
	"github.com/tablekeep/tablekeep/shared/objstore"
)

// Reader leases. A reader that scans one version for longer than the grace
// window registers a lease on it; the prune planner never raises the
// retention floor above the lowest version a live lease holds. A lease is
// one object whose NAME carries everything the planner needs (version,
// expiry, id), so the planner reads leases with one LIST and no GET:
//
//	<dir>{version, 20 digits}-{expiry, Unix ms, 20 digits}-{id, 16 hex}
//
// dir is LeasesPrefix under a tablekeep table's root, and
// _tablekeep/leases/ under a Lance dataset's (its sidecar). docs/format.md
// ("Reader leases") specifies the layout; docs/reliability.md ("Reader
// leases") states the rule with its margins.

const (
	// LeasesPrefix holds a tablekeep table's reader leases (relative to
	// its root).
	LeasesPrefix = "_leases/"
	// MaxLeases bounds the live leases at or above the floor of one
	// table: creating one more is refused (ErrTooManyLeases).
	MaxLeases = 1000
	// MaxLeaseTTL bounds a lease's ttl (create and renew). A lease whose
	// name claims a later expiry (forged, or written by a broken client)
	// is taken to expire MaxLeaseTTL + MaxClockSkew after its object was
	// written: no lease pins a table for longer than that without renewal.
	MaxLeaseTTL = 7 * 24 * time.Hour
	// MaxLeaseObjects bounds a lease listing (bounded memory, at most 100
	// LISTs): beyond it the listing fails (ErrTooManyLeases) and the
	// planner does not raise the floor. Every object counts, as the
	// listing must see them all to find the pin; the names that pin
	// nothing (malformed, expired, below the floor) are deleted by the
	// planner, so a bound far above MaxLeases is reached only by a flood.
	MaxLeaseObjects = 100 * objstore.MaxListKeys
	leaseNameLen    = 20 + 1 + 20 + 1 + 16
)

// Lease errors.
var (
	ErrInvalidLease  = errors.New("invalid lease")
	ErrTooManyLeases = errors.New("too many leases")
	ErrLeaseNotFound = errors.New("lease not found")
	// ErrLeaseWindow: the version's retention window may already be over
	// (superseded longer ago than the lease window): a lease taken now
	// might lose a race with a prune planner. Tag the version instead.
	ErrLeaseWindow = errors.New("version too old to lease")
)

// LeaseInfo is one lease name, parsed.
type LeaseInfo struct {
	ID      string    `json:"id"`
	Version uint64    `json:"version"`
	Expires time.Time `json:"expires"` // as the name says
	Key     string    `json:"key"`     // full key
	Written time.Time `json:"written"` // the object's LastModified
}

// LeaseName is the object name (relative to the lease directory) of a
// lease: fixed-width, so names sort by version, then expiry.
func LeaseName(version uint64, expires time.Time, id string) string {
	ms := expires.UnixMilli()
	if ms < 0 {
		ms = 0
	}
	return fmt.Sprintf("%020d-%020d-%s", version, ms, id)
}

// ParseLeaseName parses a lease name (relative to the lease directory). It
// accepts exactly LeaseName's form: a version in [1, MaxUint64], an expiry
// in [0, MaxInt64] ms, an id of 16 lowercase hex digits.
func ParseLeaseName(name string) (LeaseInfo, error) {
	bad := func(why string) (LeaseInfo, error) {
		return LeaseInfo{}, fmt.Errorf("%w: name %q: %s", ErrInvalidLease, name, why)
	}
	if len(name) != leaseNameLen {
		return bad(fmt.Sprintf("length %d, want %d", len(name), leaseNameLen))
	}
	if name[20] != '-' || name[41] != '-' {
		return bad("separators")
	}
	if !allDigits(name[:20]) || !allDigits(name[21:41]) {
		return bad("not digits")
	}
	v, err := strconv.ParseUint(name[:20], 10, 64)
	if err != nil || v == 0 {
		return bad("version out of range")
	}
	ms, err := strconv.ParseInt(name[21:41], 10, 64)
	if err != nil {
		return bad("expiry out of range")
	}
	id := name[42:]
	if !isLeaseID(id) {
		return bad("id")
	}
	return LeaseInfo{ID: id, Version: v, Expires: time.UnixMilli(ms).UTC()}, nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func isLeaseID(id string) bool {
	if len(id) != 16 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func newLeaseID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// addSat is t + d, saturating at the largest representable time.
func addSat(t time.Time, d time.Duration) time.Time {
	const maxUnix = 253402300799 // 9999-12-31T23:59:59Z
	if t.Unix() > maxUnix-int64(d/time.Second)-1 {
		return time.Unix(maxUnix, 0).UTC()
	}
	return t.Add(d)
}

// EffectiveExpiry is when the planner takes the lease to end: its name's
// expiry, but no later than MaxLeaseTTL + MaxClockSkew after its object
// was written.
func (l LeaseInfo) EffectiveExpiry() time.Time {
	if l.Written.IsZero() {
		return l.Expires
	}
	capAt := addSat(l.Written, MaxLeaseTTL+MaxClockSkew)
	if l.Expires.After(capAt) {
		return capAt
	}
	return l.Expires
}

// Live reports whether the planner honours the lease at now: until its
// effective expiry plus MaxClockSkew (the holder's clock may be behind).
func (l LeaseInfo) Live(now time.Time) bool {
	return !now.After(addSat(l.EffectiveExpiry(), MaxClockSkew))
}

// LeaseSet is one listing of a lease directory.
type LeaseSet struct {
	Names []LeaseInfo // every well-formed name, in listing (version) order
	// Malformed are the objects whose names do not parse: they pin
	// nothing, and are deleted once older than MaxLeaseTTL + MaxClockSkew.
	Malformed []objstore.ObjectInfo
}

// Live is the live leases at now, one per id (its latest expiry: a
// renewal writes the new name before deleting the old), lowest version
// first.
func (s LeaseSet) Live(now time.Time) []LeaseInfo {
	byID := map[string]LeaseInfo{}
	for _, l := range s.Names {
		if !l.Live(now) {
			continue
		}
		if o, ok := byID[l.ID]; !ok || l.EffectiveExpiry().After(o.EffectiveExpiry()) {
			byID[l.ID] = l
		}
	}
	out := make([]LeaseInfo, 0, len(byID))
	for _, l := range byID {
		out = append(out, l)
	}
	slices.SortFunc(out, func(a, b LeaseInfo) int {
		if a.Version != b.Version {
			if a.Version < b.Version {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Key, b.Key)
	})
	return out
}

// Pinning is the live leases at now on versions at or above floor, as
// Live: a lease below the floor protects nothing (its version may be
// deleted already) and pins nothing.
func (s LeaseSet) Pinning(now time.Time, floor uint64) []LeaseInfo {
	return slices.DeleteFunc(s.Live(now), func(l LeaseInfo) bool { return l.Version < floor })
}

// Pin is the live lease on the lowest version at or above floor at now:
// the floor may not rise above its version.
func (s LeaseSet) Pin(now time.Time, floor uint64) (LeaseInfo, bool) {
	live := s.Pinning(now, floor)
	if len(live) == 0 {
		return LeaseInfo{}, false
	}
	return live[0], true
}

// Stale is the keys the planner deletes at now, given the stored floor:
// names no longer live, names below the floor (live or not: they pin
// nothing, and no holder can renew them), and malformed names older than
// MaxLeaseTTL + MaxClockSkew.
func (s LeaseSet) Stale(now time.Time, floor uint64) []string {
	var out []string
	for _, l := range s.Names {
		if !l.Live(now) || l.Version < floor {
			out = append(out, l.Key)
		}
	}
	for _, o := range s.Malformed {
		if now.Sub(o.LastModified) > MaxLeaseTTL+MaxClockSkew {
			out = append(out, o.Key)
		}
	}
	return out
}

// ReadLeases lists the lease directory dir (a full key prefix ending in
// "/"): List requests only, one per 1,000 names. Malformed names are
// logged (the first few) and returned apart. More than MaxLeaseObjects
// objects is ErrTooManyLeases (with the set read so far).
func ReadLeases(ctx context.Context, store objstore.Store, dir string, logger *slog.Logger) (LeaseSet, error) {
	var s LeaseSet
	n := 0
	err := objstore.ListAll(ctx, store, dir, "", func(o objstore.ObjectInfo) error {
		if n++; n > MaxLeaseObjects {
			return fmt.Errorf("%s: %w: more than %d lease objects", dir, ErrTooManyLeases, MaxLeaseObjects)
		}
		l, err := ParseLeaseName(strings.TrimPrefix(o.Key, dir))
		if err != nil {
			if logger != nil && len(s.Malformed) < maxMalformedLogged {
				logger.WarnContext(ctx, "malformed lease name ignored", "key", o.Key, "err", err)
			}
			s.Malformed = append(s.Malformed, o)
			return nil
		}
		l.Key, l.Written = o.Key, o.LastModified
		s.Names = append(s.Names, l)
		return nil
	})
	return s, err
}

// maxMalformedLogged bounds the malformed names one listing logs.
const maxMalformedLogged = 10

// LeaseDir is where one dataset's leases live and what taking one checks.
// A tablekeep table's is Table.LeaseDir; a Lance dataset's is
// lance.Source.LeaseDir.
type LeaseDir struct {
	Store  objstore.Store
	Dir    string      // full key prefix, ending in "/"
	Clock  clock.Clock // nil: the real clock
	Logger *slog.Logger
	// Check refuses a version that cannot be leased at now (before the
	// lease is written): one that does not exist yet (in the future),
	// below the floor (ErrVersionPruned), or whose retention window may
	// be over (ErrLeaseWindow). It returns the floor it read.
	Check func(ctx context.Context, v uint64, now time.Time) (floor uint64, err error)
	// Floor reads the retention floor (after the lease is written).
	Floor func(ctx context.Context) (uint64, error)
}

// Now reads d.Clock (the real clock if nil).
func (d *LeaseDir) Now() time.Time { return clock.Or(d.Clock).Now() }

// Read lists the directory.
func (d *LeaseDir) Read(ctx context.Context) (LeaseSet, error) {
	return ReadLeases(ctx, d.Store, d.Dir, d.Logger)
}

// leaseBody is the object's body: informative only (the planner reads
// names, never bodies).
type leaseBody struct {
	Format  string    `json:"format"`
	ID      string    `json:"id"`
	Version uint64    `json:"version"`
	Expires time.Time `json:"expires"`
}

// leaseExpiry is now + ttl rounded up to the millisecond (what a name
// holds): a lease lasts at least its ttl.
func leaseExpiry(now time.Time, ttl time.Duration) time.Time {
	e := now.Add(ttl)
	if t := e.Truncate(time.Millisecond); !t.Equal(e) {
		e = t.Add(time.Millisecond)
	}
	return e.UTC()
}

func checkTTL(ttl time.Duration) error {
	if ttl <= 0 || ttl > MaxLeaseTTL {
		return fmt.Errorf("%w: ttl %s not in (0, %s]", ErrInvalidLease, ttl, MaxLeaseTTL)
	}
	return nil
}

// Acquire takes a lease on version v for ttl. It checks the version and
// counts the live leases (at once), writes the lease, and reads the floor:
// a version below it is refused with ErrVersionPruned and the lease is
// deleted. The writes must land within MaxCommitDuration of the check
// (else the lease is withdrawn: the check's margin assumes it).
// Stale names seen are deleted, best effort.
func (d *LeaseDir) Acquire(ctx context.Context, v uint64, ttl time.Duration) (*Lease, error) {
	if err := checkTTL(ttl); err != nil {
		return nil, err
	}
	l := &Lease{dir: d, id: newLeaseID(), version: v}
	if err := l.take(ctx, ttl, true); err != nil {
		return nil, err
	}
	return l, nil
}

// take writes a new name for l after the full check (a new lease, or a
// renewal that came too late to rely on the old name).
func (l *Lease) take(ctx context.Context, ttl time.Duration, count bool) error {
	d := l.dir
	c0 := d.Now()
	var set LeaseSet
	var setErr, checkErr error
	var floor0 uint64
	var wg sync.WaitGroup
	if count {
		wg.Add(1)
		go func() { defer wg.Done(); set, setErr = d.Read(ctx) }()
	}
	floor0, checkErr = d.Check(ctx, l.version, c0)
	wg.Wait()
	if checkErr != nil {
		return checkErr
	}
	if setErr != nil {
		return setErr
	}
	if count {
		if live := set.Pinning(c0, floor0); len(live) >= MaxLeases {
			return fmt.Errorf("%s: %w: %d live leases (at most %d)", d.Dir, ErrTooManyLeases, len(live), MaxLeases)
		}
	}
	exp := leaseExpiry(c0, ttl)
	key, err := l.put(ctx, exp)
	if err != nil {
		return err
	}
	withdraw := func(e error) error {
		d.withdraw(ctx, key)
		return e
	}
	if el := d.Now().Sub(c0); el > MaxCommitDuration {
		return withdraw(fmt.Errorf("%w: lease written %s after its check (at most %s): retry", ErrInvalidLease, el, MaxCommitDuration))
	}
	floor, err := d.Floor(ctx)
	if err != nil {
		return withdraw(err)
	}
	if l.version < floor {
		return withdraw(fmt.Errorf("%s: %w: version %d is below the retention floor %d", d.Dir, ErrVersionPruned, l.version, floor))
	}
	l.rotate(key, exp)
	if count {
		if stale := set.Stale(c0, floor0); len(stale) > 0 {
			_ = d.Store.Delete(ctx, stale)
		}
	}
	return nil
}

// withdrawAttempts is how often a refused lease's name is deleted before
// it is left (below the floor it pins nothing, Find refuses to renew it,
// and the next raising pass deletes it).
const withdrawAttempts = 3

// withdraw deletes the name of a refused lease, retried.
func (d *LeaseDir) withdraw(ctx context.Context, key string) {
	var err error
	for range withdrawAttempts {
		if err = d.Store.Delete(context.WithoutCancel(ctx), []string{key}); err == nil {
			return
		}
	}
	if d.Logger != nil {
		d.Logger.WarnContext(ctx, "refused lease not withdrawn", "key", key, "err", err)
	}
}

func (l *Lease) put(ctx context.Context, exp time.Time) (string, error) {
	key := l.dir.Dir + LeaseName(l.version, exp, l.id)
	b, _ := json.Marshal(leaseBody{Format: "tablekeep-lease/1", ID: l.id, Version: l.version, Expires: exp.UTC()})
	if err := l.dir.Store.Put(ctx, key, b); err != nil {
		return "", fmt.Errorf("write lease %s: %w", key, err)
	}
	return key, nil
}

// rotate makes key the current name; the name before the previous one is
// deleted (the previous stays until the next renewal, so a listing that
// overlaps a renewal sees at least one of the two).
func (l *Lease) rotate(key string, exp time.Time) {
	l.mu.Lock()
	old := l.prev
	l.prev, l.key, l.expires = l.key, key, exp
	l.mu.Unlock()
	if old != "" && old != key {
		_ = l.dir.Store.Delete(context.Background(), []string{old})
	}
}

// Lease is a reader's lease on one version.
type Lease struct {
	dir     *LeaseDir
	id      string
	version uint64

	mu      sync.Mutex
	key     string // current name (full key)
	prev    string // the name before it, deleted at the next renewal
	expires time.Time
	// below is set by Find for a lease below the floor: it pins nothing,
	// and Renew refuses it.
	below error
}

// ID is the lease's id (16 hex digits).
func (l *Lease) ID() string { return l.id }

// Version is the leased version.
func (l *Lease) Version() uint64 { return l.version }

// Expires is the current expiry (the holder's clock).
func (l *Lease) Expires() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.expires
}

// renewMargin: a renewal that starts later than this before the expiry
// (by the holder's clock) cannot rely on the old name still being honoured
// when the new one lands, and re-checks as a new lease does.
const renewMargin = MaxCommitDuration + 2*MaxClockSkew

// Renew extends the lease to now + ttl: it writes the new name, then
// deletes the one before the previous. A lease renewed while more than
// MaxCommitDuration + 2 x MaxClockSkew remain, its new name written within
// MaxCommitDuration, is continuous; otherwise it is checked as a new lease (ErrVersionPruned if the floor passed the version
// meanwhile, ErrLeaseWindow if it may have).
func (l *Lease) Renew(ctx context.Context, ttl time.Duration) error {
	if err := checkTTL(ttl); err != nil {
		return err
	}
	if l.below != nil {
		return l.below
	}
	now := l.dir.Now()
	if now.Add(renewMargin).Before(l.Expires()) {
		exp := leaseExpiry(now, ttl)
		key, err := l.put(ctx, exp)
		if err != nil {
			return err
		}
		if l.dir.Now().Sub(now) <= MaxCommitDuration {
			l.rotate(key, exp)
			return nil
		}
		// Landed too late to rely on the old name: checked as a new lease.
		l.mu.Lock()
		own := key == l.key || key == l.prev // the same name (same expiry)
		l.mu.Unlock()
		if !own {
			_ = l.dir.Store.Delete(context.WithoutCancel(ctx), []string{key})
		}
	}
	return l.take(ctx, ttl, false)
}

// RenewDue renews the lease for ttl if a third of ttl has passed since it
// was last renewed (two thirds or less left).
func (l *Lease) RenewDue(ctx context.Context, ttl time.Duration) error {
	if l.Expires().Sub(l.dir.Now()) > ttl-ttl/3 {
		return nil
	}
	return l.Renew(ctx, ttl)
}

// KeepAlive calls RenewDue every interval of real time (default ttl/6)
// until ctx is done or a renewal fails; run it in its own goroutine, as
// lock.Fence.KeepAlive. It returns the error that ended it.
func (l *Lease) KeepAlive(ctx context.Context, ttl, interval time.Duration) error {
	if interval <= 0 {
		interval = ttl / 6
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
			if err := l.RenewDue(ctx, ttl); err != nil {
				return err
			}
		}
	}
}

// Release deletes the lease's names: from then on it pins nothing.
func (l *Lease) Release(ctx context.Context) error {
	l.mu.Lock()
	keys := []string{l.key}
	if l.prev != "" {
		keys = append(keys, l.prev)
	}
	l.mu.Unlock()
	return l.dir.Store.Delete(ctx, keys)
}

// Find returns the lease with id (for a holder in another process: the
// CLI's renew and release), from its name of latest expiry; every other
// name of the id becomes its previous name(s), deleted by its next renewal
// or release. The floor is read beside the listing: a lease below it
// (its acquire was refused and its withdrawal failed, or its name was
// written by hand) pins nothing, and its Renew is refused with
// ErrVersionPruned (Release still deletes its names).
func (d *LeaseDir) Find(ctx context.Context, id string) (*Lease, error) {
	if !isLeaseID(id) {
		return nil, fmt.Errorf("%w: id %q is not 16 lowercase hex digits", ErrInvalidLease, id)
	}
	var floor uint64
	var floorErr error
	var wg sync.WaitGroup
	wg.Go(func() { floor, floorErr = d.Floor(ctx) })
	set, err := d.Read(ctx)
	wg.Wait()
	if err == nil {
		err = floorErr
	}
	if err != nil {
		return nil, err
	}
	var mine []LeaseInfo
	for _, n := range set.Names {
		if n.ID == id {
			mine = append(mine, n)
		}
	}
	if len(mine) == 0 {
		return nil, fmt.Errorf("%s%s: %w", d.Dir, id, ErrLeaseNotFound)
	}
	slices.SortFunc(mine, func(a, b LeaseInfo) int { return a.Expires.Compare(b.Expires) })
	cur := mine[len(mine)-1]
	l := &Lease{dir: d, id: id, version: cur.Version, key: cur.Key, expires: cur.EffectiveExpiry()}
	if cur.Version < floor {
		l.below = fmt.Errorf("%s: lease %s: %w: version %d is below the retention floor %d", d.Dir, id, ErrVersionPruned, cur.Version, floor)
	}
	if len(mine) > 1 {
		l.prev = mine[len(mine)-2].Key
		// Older names still: deleted now (best effort).
		var older []string
		for _, n := range mine[:len(mine)-2] {
			older = append(older, n.Key)
		}
		if len(older) > 0 {
			_ = d.Store.Delete(ctx, older)
		}
	}
	return l, nil
}

// LeaseDir is the table's lease directory: a lease is checked against the
// table's versions (the version exists; it is the latest, or its successor
// was written at most WriterGrace - SafetyMargin ago) and its floor.
func (t *Table) LeaseDir() *LeaseDir {
	return &LeaseDir{
		Store: t.store, Dir: t.key(LeasesPrefix), Clock: t.opts.Clock, Logger: t.opts.Logger,
		Check: t.checkLeaseVersion, Floor: t.Floor,
	}
}

// LeaseWindow is how recently a version must have been superseded to be
// leased (the latest always may be): a planner that raised the floor past
// it must have seen its successor more than WriterGrace + SafetyMargin
// old, which a lease checked within this window and written within
// MaxCommitDuration cannot miss (docs/reliability.md, "Reader leases").
func LeaseWindow(writerGrace time.Duration) time.Duration {
	return max(writerGrace-SafetyMargin, 0)
}

func (t *Table) checkLeaseVersion(ctx context.Context, v uint64, now time.Time) (uint64, error) {
	if v == 0 {
		return 0, fmt.Errorf("%w: version 0", ErrInvalidLease)
	}
	var vs []dataset.VersionInfo
	var floor uint64
	g := make(chan error, 1)
	go func() {
		var err error
		floor, err = t.Floor(ctx)
		g <- err
	}()
	vs, err := t.Versions(ctx)
	if ferr := <-g; err == nil {
		err = ferr
	}
	if err != nil {
		return floor, err
	}
	if len(vs) == 0 {
		return floor, fmt.Errorf("%s: %w", t.name(), ErrNotATable)
	}
	latest := vs[len(vs)-1].Version
	if v > latest {
		return floor, fmt.Errorf("%w: version %d is in the future (latest %d)", ErrInvalidLease, v, latest)
	}
	if v < floor {
		return floor, objErr(t.key(manifestKey(v)), ErrVersionPruned, fmt.Sprintf("version %d is below the retention floor %d", v, floor))
	}
	i, found := slices.BinarySearchFunc(vs, v, func(x dataset.VersionInfo, v uint64) int {
		switch {
		case x.Version < v:
			return -1
		case x.Version > v:
			return 1
		}
		return 0
	})
	if !found {
		return floor, objErr(t.key(manifestKey(v)), ErrVersionNotFound, fmt.Sprintf("version %d", v))
	}
	if i+1 < len(vs) {
		if m, _ := t.cached(); m == nil {
			if _, err := t.Refresh(ctx); err != nil {
				return floor, err
			}
		}
		w := LeaseWindow(t.WriterGrace())
		if age := now.Sub(vs[i+1].Time); age > w {
			return floor, fmt.Errorf("%w: version %d was superseded %s ago (lease window %s): tag it to keep it", ErrLeaseWindow, v, age.Round(time.Second), w)
		}
	}
	return floor, nil
}

// Lease takes a reader lease on version v for ttl (at most MaxLeaseTTL):
// the prune planner keeps v (the floor stays at or below it) until the
// lease is released or expires. See LeaseDir.Acquire.
func (t *Table) Lease(ctx context.Context, v uint64, ttl time.Duration) (*Lease, error) {
	return t.LeaseDir().Acquire(ctx, v, ttl)
}

// Leases lists the table's leases (one LIST per 1,000 names).
func (t *Table) Leases(ctx context.Context) (LeaseSet, error) {
	return t.LeaseDir().Read(ctx)
}

// Lease takes a reader lease on the snapshot's version (Table.Lease).
func (s *Snapshot) Lease(ctx context.Context, ttl time.Duration) (*Lease, error) {
	return s.t.Lease(ctx, s.Version(), ttl)
}

// Hold takes a lease on the snapshot's version and renews it in the
// background (KeepAlive, every ttl/6 of real time) until stop is called,
// which ends the renewals and releases the lease.
func (s *Snapshot) Hold(ctx context.Context, ttl time.Duration) (l *Lease, stop func(context.Context) error, err error) {
	l, err = s.Lease(ctx, ttl)
	if err != nil {
		return nil, nil, err
	}
	kctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := l.KeepAlive(kctx, ttl, 0); err != nil && !errors.Is(err, context.Canceled) {
			s.t.opts.Logger.WarnContext(kctx, "lease renewal stopped", "lease", l.ID(), "err", err)
		}
	}()
	return l, func(ctx context.Context) error {
		cancel()
		<-done
		return l.Release(ctx)
	}, nil
}
