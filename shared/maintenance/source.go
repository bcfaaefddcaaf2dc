package maintenance

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/tablekeep/tablekeep/shared/dataset"
	"github.com/tablekeep/tablekeep/shared/objstore"
)

// Source is what the prune pipeline (planner, prune state, cleaner) needs
// of a versioned dataset, whatever its format: its versions, change
// records, floor, tags and the keys a version owns. Every registered
// dataset is one: a tablekeep table (TableSource, with its fast paths as
// optional interfaces) and a Lance dataset (lance.Source, through
// shared/formats), so this package does not learn Lance and the Lance
// package does not learn queues. The runner, cleaner, sweep, health,
// stats and dry run take a Source; compaction is a capability a Source
// may offer (TableBacked, SourceCompacter).
//
// Every key a Source returns is relative to Root(). A key ending in "/" is
// a directory the format treats as one file (a Lance index): the cleaner
// deletes everything under it.
type Source interface {
	// Root is the dataset's key prefix, ending in "/".
	Root() string
	Store() objstore.Store
	// StateRoot is where maintenance keeps this dataset's prune state (a
	// prefix the format's own readers ignore), ending in "/".
	StateRoot() string
	// Prepare brings the change records up to date (a format whose writers
	// do not write them derives them here, each manifest read once). Called
	// under the table's lock, before Versions.
	Prepare(ctx context.Context) error
	// Versions lists the stored versions, oldest first. Time is when the
	// version was written; GraceFrom when its grace window starts: a
	// version is retained while now - GraceFrom is at most Grace
	// (tablekeep: when its successor was written, none for the latest;
	// Lance: its own manifest timestamp, as cleanup_old_versions(older_than)).
	Versions(ctx context.Context) ([]dataset.VersionInfo, error)
	// Floor is the retention floor: versions below it may be pruned.
	Floor(ctx context.Context) (uint64, error)
	// SetFloor raises the floor (never lowers it).
	SetFloor(ctx context.Context, floor uint64) error
	// Tags maps tag names to versions.
	Tags(ctx context.Context) (map[string]uint64, error)
	// ChangeRecord is version v's record (an error wrapping
	// objstore.ErrNotExist if there is none): its Removed files were
	// referenced by exactly the versions [Since, v-1].
	ChangeRecord(ctx context.Context, v uint64) (*dataset.ChangeRecord, error)
	// EnsureChangeRecords rebuilds missing records of the spans [from,
	// through] where it can; it returns how many it rebuilt.
	EnsureChangeRecords(ctx context.Context, spans [][2]uint64) (int, error)
	// CheckKey accepts only keys the format's change records may name
	// (data files, deletion files, ...): a forged record deletes nothing.
	CheckKey(rel string) error
	// ManifestKeys are the keys of version v's manifest; RecordKey is its
	// change record's. The cleaner deletes them after the files.
	ManifestKeys(ctx context.Context, v uint64) ([]string, error)
	RecordKey(v uint64) string
	// Grace is how long a version is retained past its Time, and how old
	// an unreferenced file must be before anything may delete it, given
	// the policy's grace.
	Grace(policyGrace time.Duration) time.Duration
	// LatestRefs reads the latest version from the store (not from any
	// derived state) and returns it with the keys, relative to Root(), of
	// its manifest and of every file it references (a key ending in "/" is
	// a directory): what the latest-version guard protects (guard.go).
	LatestRefs(ctx context.Context) (uint64, []string, error)
}

// SourceOpener opens the Source of a registered dataset (by
// TableRef.Format): formats.Open knows every format, OpenTableSource
// tablekeep's own. Opening makes no request for either.
type SourceOpener func(ctx context.Context, store objstore.Store, ref TableRef) (Source, error)

// stateAt is the prune state's location: a store and a prefix.
type stateAt struct {
	store objstore.Store
	root  string
}

func (s stateAt) Store() objstore.Store { return s.store }
func (s stateAt) Root() string          { return s.root }

// PlanSourcePrune plans the pruning of any Source: it prepares the change
// records, then computes the floor (the newest KeepLast versions and every
// version whose grace window, from its GraceFrom, is not over are kept)
// and the ranges to enqueue. Call it under the table's lock (Prepare may
// write).
func PlanSourcePrune(ctx context.Context, src Source, name string, p Policy, now time.Time) (PrunePlan, error) {
	return planPrune(ctx, src, name, p, now, 0, false)
}

// ApplySourcePrune applies a plan of src: the floor first (a FloorReader's
// from the plan's floor read), then the tags read again, the ranges'
// change records ensured (a RecordLister's named in the messages), the
// ranges sent and the prune state written under plan.Token. Call it under
// the table's lock, with the fence checked. From the floor write on,
// checkout, tag and restore below it fail, before any cleaner can delete
// anything.
func ApplySourcePrune(ctx context.Context, src Source, plan *PrunePlan, q Enqueuer) error {
	at := applyTarget{
		root: src.Root(), setFloor: src.SetFloor, tags: src.Tags, ensure: src.EnsureChangeRecords,
		state: stateAt{src.Store(), src.StateRoot()},
	}
	if fr, ok := src.(FloorReader); ok {
		// The plan's floor read stands in for SetFloor's own (same lock).
		at.setFloor = func(ctx context.Context, f uint64) error {
			stamp, err := plan.floorStamp(f)
			if err != nil {
				return err
			}
			return fr.SetFloorFrom(ctx, f, stamp, plan.floorRead)
		}
	}
	if rl, ok := src.(RecordLister); ok {
		var have [][]uint64
		at.ensure = func(ctx context.Context, spans [][2]uint64) (int, error) {
			var n int
			var err error
			n, have, err = rl.EnsureRecords(ctx, spans)
			return n, err
		}
		at.records = func(i int) *[]uint64 {
			if have == nil || i >= len(have) || len(have[i]) > MaxMessageRecords {
				return nil
			}
			recs := append([]uint64{}, have[i]...) // [] (not null) when none has one
			return &recs
		}
	}
	return plan.apply(ctx, at, q)
}

// checkSourceKey applies src's key check and the store's, to a key
// relative to the root.
func checkSourceKey(src Source, rel string) error {
	if strings.Contains(rel, "..") || strings.HasPrefix(rel, "/") {
		return fmt.Errorf("%w: %q under %q", ErrForeignKey, rel, src.Root())
	}
	if err := src.CheckKey(rel); err != nil {
		return fmt.Errorf("%w: %w", ErrForeignKey, err)
	}
	return objstore.ValidateKey(src.Root() + rel)
}

// ListedBelowFloor is a Source whose readers list and open every stored
// version, the floor notwithstanding (Lance: LanceDB lists _versions/ and
// checks any version out). Its cleaner deletes a pruned version's manifest
// before the files only pruned versions referenced (docs/reliability.md,
// "No listed Lance version is left unreadable"): a crash then leaves
// orphan files, never a listed version that cannot be read.
type ListedBelowFloor interface {
	// StoredIn returns the versions in [lo, hi] whose manifests are
	// stored, ascending (Lance, inverted names: one LIST per 1,000 of
	// them, from hi down; plain names: the whole listing).
	StoredIn(ctx context.Context, lo, hi uint64) ([]uint64, error)
	// HalfCleaned returns the ranges, below the floor, whose manifests
	// are gone and whose change records are still stored (a cleanup cut
	// off after the manifests, or LanceDB's own cleanup), found by
	// Prepare: the planner sends them again on every pass until their
	// records are gone.
	HalfCleaned() [][2]uint64
}

// DamageChecker is a Source that can look, at a bounded cost, for listed
// versions whose manifests reference files that are gone (Lance: what a
// cleanup of an earlier release, cut off after a range's files and before
// its manifests, left): `tablekeep status` reports them as "damaged".
type DamageChecker interface {
	// ListedUnreadable checks the versions of below (stored, below the
	// stored floor), and returns those that reference a file that is
	// gone, and whether every one of below was checked fully.
	ListedUnreadable(ctx context.Context, below []uint64, floor uint64) ([]uint64, bool, error)
}
