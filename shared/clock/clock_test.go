package clock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/clock"
	"github.com/tablekeep/tablekeep/shared/internal/fakeclock"
)

// TestClockSystemAndFake: the real clock reads the time and sleeps, cut
// short by its context; the fake clock is a Clock too; Or fills a nil one.
func TestClockSystemAndFake(t *testing.T) {
	c := clock.System()
	t0 := c.Now()
	if err := c.Sleep(context.Background(), time.Millisecond); err != nil || c.Now().Sub(t0) < time.Millisecond {
		t.Fatalf("slept %s: %v", c.Now().Sub(t0), err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("sleep on a cancelled context: %v", err)
	}
	var fake clock.Clock = fakeclock.New(time.Unix(1e9, 0))
	if err := fake.Sleep(context.Background(), time.Hour); err != nil || !fake.Now().Equal(time.Unix(1e9, 0).Add(time.Hour)) {
		t.Fatalf("fake clock after a sleep of 1h: %v, %v", fake.Now(), err)
	}
	if clock.Or(nil) == nil || clock.Or(fake) != fake {
		t.Fatal("Or")
	}
}
