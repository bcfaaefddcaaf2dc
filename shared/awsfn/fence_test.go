package awsfn_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/internal/fakeclock"
	"github.com/tablekeep/tablekeep/shared/internal/testenv"
	"github.com/tablekeep/tablekeep/shared/internal/testkit"
	"github.com/tablekeep/tablekeep/shared/lock"
	"github.com/tablekeep/tablekeep/shared/table"
)

// A compactor that was paused past its lease (and whose clock still says the
// lease is valid) tries to commit to a table on S3 after another compactor
// took the DynamoDB lock over: the fencing check in the table's commit path
// refuses the commit, and the table is untouched. The 5-contender and
// take-over cases are in shared/lock (TestDynamoLocker, on moto).
func TestStaleHolderCommitRefusedByDynamoFence(t *testing.T) {
	ctx := context.Background()
	client := testkit.DynamoClient(t)
	locks := randomName("tablekeep-fence-")
	if err := lock.CreateLockTable(ctx, client, locks); err != nil {
		t.Fatal(err)
	}
	st := testenv.S3Store(t)
	base := fakeclock.New(time.Now())
	create, err := table.Create(ctx, st, "wh/t", registrySchema, "name", table.Options{Format: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := create.Upsert(ctx, row("a", "u0")); err != nil {
		t.Fatal(err)
	}

	// Holder A takes the lock with a 1-minute lease, then stalls.
	clockA := lock.AheadClock{Clock: base, Ahead: 0}
	lockerA := lock.NewDynamoLocker(client, locks, clockA)
	leaseA, err := lockerA.Acquire(ctx, "table/t", lock.AcquireOptions{Owner: "compactor-A", Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	fenceA := lock.NewFence(lockerA, leaseA, clockA, time.Second)
	tA, err := table.Open(ctx, st, "wh/t", table.Options{Fence: fenceA.CheckFence})
	if err != nil {
		t.Fatal(err)
	}

	// Two minutes later B takes the expired lock over and commits.
	base.Advance(2 * time.Minute)
	lockerB := lock.NewDynamoLocker(client, locks, base)
	leaseB, err := lockerB.Acquire(ctx, "table/t", lock.AcquireOptions{Owner: "compactor-B", Lease: time.Minute, MaxWait: -1})
	if err != nil {
		t.Fatalf("take-over of the expired lease: %v", err)
	}
	if leaseB.Token <= leaseA.Token {
		t.Fatalf("take-over token %d not above %d", leaseB.Token, leaseA.Token)
	}
	fenceB := lock.NewFence(lockerB, leaseB, base, time.Second)
	tB, err := table.Open(ctx, st, "wh/t", table.Options{Fence: fenceB.CheckFence})
	if err != nil {
		t.Fatal(err)
	}
	resB, err := tB.Upsert(ctx, row("b", "from-B"))
	if err != nil {
		t.Fatalf("current holder's commit: %v", err)
	}

	// A wakes up. Its clock runs two minutes slow, so by its own clock the
	// lease is still valid: only the token check against DynamoDB stops it.
	slowA := lock.AheadClock{Clock: base, Ahead: -2 * time.Minute}
	lockerA = lock.NewDynamoLocker(client, locks, slowA)
	fenceA = lock.NewFence(lockerA, leaseA, slowA, time.Second)
	tA, err = table.Open(ctx, st, "wh/t", table.Options{Fence: fenceA.CheckFence})
	if err != nil {
		t.Fatal(err)
	}
	_, err = tA.Upsert(ctx, row("a", "stale-write"))
	if !errors.Is(err, lock.ErrLeaseLost) {
		t.Fatalf("stale holder's commit: %v, want refusal wrapping lock.ErrLeaseLost", err)
	}
	// Its expired lease, judged on a correct clock, is refused too.
	fenceA = lock.NewFence(lockerA, leaseA, base, time.Second)
	if err := fenceA.CheckFence(ctx); !errors.Is(err, lock.ErrLeaseExpired) && !errors.Is(err, lock.ErrLeaseLost) {
		t.Errorf("stale fence on a correct clock: %v", err)
	}
	latest, err := create.Refresh(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if latest.Version != resB.Version {
		t.Errorf("latest version %d, want %d (B's): the stale holder committed", latest.Version, resB.Version)
	}
	want := map[string]string{"a": "u0", "b": "from-B"}
	if got := rows(t, create); !sameRows(got, want) {
		t.Errorf("rows %v, want %v", got, want)
	}
	if err := lockerB.Release(ctx, leaseB); err != nil {
		t.Errorf("release: %v", err)
	}
}
