package lock

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/tablekeep/tablekeep/shared/internal/faultproxy"
	"github.com/tablekeep/tablekeep/shared/internal/testenv"
	"github.com/tablekeep/tablekeep/shared/internal/testkit"
)

// lostResponses loses the response of one chosen UpdateItem after moto
// applied it (a faultproxy rule with After), and can run a contender's
// request on the client right after that attempt, before the SDK retries.
type lostResponses struct {
	mu      sync.Mutex
	armed   bool   // the next UpdateItem gets the fault
	fired   bool   // it did; the client has not seen the answer yet
	between func() // run once the client has the faulted answer
}

// lose arms the fault for the next UpdateItem; between (may be nil) runs
// after that attempt and before the retry.
func (n *lostResponses) lose(between func()) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.armed, n.fired, n.between = true, false, between
}

// match is the proxy rule's Match: exactly the first UpdateItem after lose.
func (n *lostResponses) match(r *http.Request) bool {
	if !faultproxy.AWSTarget("UpdateItem")(r) {
		return false
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.armed {
		return false
	}
	n.armed, n.fired = false, true
	return true
}

// afterAttempt is called by the client after every attempt.
func (n *lostResponses) afterAttempt() {
	n.mu.Lock()
	f := n.between
	if !n.fired {
		f = nil
	}
	n.fired, n.between = false, nil
	n.mu.Unlock()
	if f != nil {
		f()
	}
}

type hookedClient struct {
	inner aws.HTTPClient
	n     *lostResponses
}

func (c hookedClient) Do(r *http.Request) (*http.Response, error) {
	resp, err := c.inner.Do(r)
	c.n.afterAttempt()
	return resp, err
}

// lostClient returns a DynamoDB client through a faultproxy in front of moto
// that loses the response of the UpdateItem chosen with lostResponses.lose,
// with fault f (after moto applied the request). The SDK's standard retryer
// retries it as deployed (3 attempts), with the backoff capped.
func lostClient(t *testing.T, f faultproxy.Fault) (*dynamodb.Client, *lostResponses, *faultproxy.Proxy) {
	t.Helper()
	n := &lostResponses{}
	proxy, err := faultproxy.Start(testenv.AWSEndpoint(t), faultproxy.Options{Rules: []faultproxy.Rule{
		{Fault: f, Match: n.match, Every: 1, After: true},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	cfg, err := config.LoadDefaultConfig(context.Background(), config.WithRegion("us-east-1"),
		config.WithRetryer(func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.RateLimiter = ratelimit.None
				o.Backoff = retry.NewExponentialJitterBackoff(faultproxy.MaxBackoff)
			})
		}))
	if err != nil {
		t.Fatal(err)
	}
	cfg.BaseEndpoint = aws.String(proxy.URL())
	return dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		o.HTTPClient = hookedClient{o.HTTPClient, n}
	}), n, proxy
}

// TestDynamoLockerLostResponses: an Acquire, Renew or Release whose
// UpdateItem was applied but whose response was lost (500 or a reset after
// moto applied it) is retried by the SDK; the retry fails its condition
// because of the first attempt's own effect, and the locker recognises its
// write from the old item (its nonce, or the token it released) and reports
// success, also when a contender acquired the lock between the attempts. A
// lease that was genuinely lost or a lock genuinely held is still reported
// as such.
func TestDynamoLockerLostResponses(t *testing.T) {
	client := testkit.DynamoClient(t)
	table := lockTable(t, client)
	for _, fault := range []faultproxy.Fault{faultproxy.InternalError, faultproxy.Reset} {
		t.Run(fault.String(), func(t *testing.T) {
			ctx := context.Background()
			proxied, n, proxy := lostClient(t, fault)
			clock := newFakeClock()
			lk := NewDynamoLocker(proxied, table, clock)
			direct := NewDynamoLocker(client, table, clock)
			// A contender whose clock is two minutes ahead: it takes over
			// one-minute leases at once.
			ahead := NewDynamoLocker(client, table, offsetClock{clock, 2 * time.Minute})
			prefix := t.Name() + "/"
			opts := func(owner string) AcquireOptions {
				return AcquireOptions{Owner: owner, Lease: time.Minute, MaxWait: -1}
			}
			faults := 0
			expectFault := func(what string) {
				t.Helper()
				faults++
				if got := proxy.Stats().Total(); got != faults {
					t.Fatalf("%s: %d faults injected, want %d", what, got, faults)
				}
			}
			item := func(name string, want map[string]string) {
				t.Helper()
				got := describe(getItem(t, client, table, prefix+name))
				for k, v := range want {
					if got[k] != v {
						t.Errorf("item %q: %s = %q, want %q (item %v)", name, k, got[k], v, got)
					}
				}
			}
			expMs := func(d time.Duration) string { return "N:" + itoa(clock.Now().Add(d).UnixMilli()) }

			// Acquire: the retry finds the lock held by the caller itself.
			n.lose(nil)
			a, err := lk.Acquire(ctx, prefix+"x", opts("a"))
			expectFault("acquire")
			if err != nil {
				t.Fatalf("acquire with its response lost: %v", err)
			}
			if a.Owner != "a" || a.Token != 1 || !a.Expires.Equal(clock.Now().Add(time.Minute)) || a.Duration != time.Minute {
				t.Errorf("acquire with its response lost: lease %v", a)
			}
			item("x", map[string]string{"owner": "S:a", "token": "N:1", "expires_at": expMs(time.Minute)})
			if err := direct.Check(ctx, a); err != nil {
				t.Errorf("check of the recovered lease: %v", err)
			}

			// Renew: the retry re-applies the same extension.
			clock.Advance(10 * time.Second)
			n.lose(nil)
			a, err = lk.Renew(ctx, a)
			expectFault("renew")
			if err != nil {
				t.Fatalf("renew with its response lost: %v", err)
			}
			if a.Token != 1 || !a.Expires.Equal(clock.Now().Add(time.Minute)) {
				t.Errorf("renew with its response lost: lease %v", a)
			}
			item("x", map[string]string{"owner": "S:a", "token": "N:1", "expires_at": expMs(time.Minute)})

			// Release: the retry finds the lock released, by this call.
			n.lose(nil)
			if err := lk.Release(ctx, a); err != nil {
				t.Fatalf("release with its response lost: %v", err)
			}
			expectFault("release")
			item("x", map[string]string{"owner": "", "token": "N:1", "expires_at": "N:0", "released": "N:1"})
			// A second release of the same lease is still refused.
			if err := lk.Release(ctx, a); !errors.Is(err, ErrLeaseLost) {
				t.Errorf("second release: %v, want ErrLeaseLost", err)
			}

			// Release, and a contender acquires before the retry: the retry
			// finds the lock held by the contender, and token 2 released.
			a = mustAcquire(t, lk, prefix+"x", opts("a"))
			var b *Lease
			n.lose(func() { b = mustAcquire(t, direct, prefix+"x", opts("b")) })
			if err := lk.Release(ctx, a); err != nil {
				t.Fatalf("release with its response lost, then re-acquired: %v", err)
			}
			expectFault("release, then re-acquired")
			if b == nil || b.Token != 3 {
				t.Fatalf("contender's lease %v, want token 3", b)
			}
			item("x", map[string]string{"owner": "S:b", "token": "N:3", "released": "N:2"})
			if err := direct.Check(ctx, b); err != nil {
				t.Errorf("contender's check: %v", err)
			}

			// Genuinely held: the lost answer was a refusal, and so is the retry's.
			n.lose(nil)
			_, err = lk.Acquire(ctx, prefix+"x", opts("a"))
			expectFault("acquire of a held lock")
			if !errors.Is(err, ErrLockHeld) || !strings.Contains(err.Error(), `owner "b" token 3`) {
				t.Errorf("acquire of a held lock: %v, want ErrLockHeld by b token 3", err)
			}

			// Genuinely lost: b's lease expired and c took over.
			clock.Advance(time.Minute + time.Millisecond)
			c := mustAcquire(t, direct, prefix+"x", opts("c"))
			n.lose(nil)
			_, err = lk.Renew(ctx, b)
			expectFault("renew of a lost lease")
			if !errors.Is(err, ErrLeaseLost) {
				t.Errorf("renew of a lost lease: %v, want ErrLeaseLost", err)
			}
			n.lose(nil)
			err = lk.Release(ctx, b)
			expectFault("release of a lost lease")
			if !errors.Is(err, ErrLeaseLost) {
				t.Errorf("release of a lost lease: %v, want ErrLeaseLost", err)
			}
			item("x", map[string]string{"owner": "S:c", "token": "N:4"})

			// Applied, then taken over before the retry (by a contender whose
			// clock is ahead): the lease is lost, and reported so.
			n.lose(func() { mustAcquire(t, ahead, prefix+"x", opts("d")) })
			_, err = lk.Renew(ctx, c)
			expectFault("renew, then taken over")
			if !errors.Is(err, ErrLeaseLost) || !strings.Contains(err.Error(), `now held by "d" token 5`) {
				t.Errorf("renew, then taken over: %v, want ErrLeaseLost (held by d token 5)", err)
			}
			n.lose(func() { mustAcquire(t, ahead, prefix+"y", opts("d")) })
			_, err = lk.Acquire(ctx, prefix+"y", opts("a"))
			expectFault("acquire, then taken over")
			if !errors.Is(err, ErrLockHeld) || !strings.Contains(err.Error(), `owner "d" token 2`) {
				t.Errorf("acquire, then taken over: %v, want ErrLockHeld (d token 2)", err)
			}
		})
	}
}
