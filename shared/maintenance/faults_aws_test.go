package maintenance_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go"

	"github.com/tablekeep/tablekeep/shared/internal/awshttp"
	"github.com/tablekeep/tablekeep/shared/internal/faultproxy"
	"github.com/tablekeep/tablekeep/shared/internal/testenv"
	"github.com/tablekeep/tablekeep/shared/internal/testkit"
	"github.com/tablekeep/tablekeep/shared/lock"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/queue"
	"github.com/tablekeep/tablekeep/shared/table"
)

// awsClients returns DynamoDB and SQS clients for endpoint with the SDK's
// standard retryer as deployed (3 attempts), without the client-side retry
// quota and with the backoff capped at faultproxy.MaxBackoff.
func awsClients(t testing.TB, endpoint string) (*dynamodb.Client, *sqs.Client) {
	t.Helper()
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
	cfg.BaseEndpoint = aws.String(endpoint)
	cfg = awshttp.Config(cfg) // as awsfn builds them
	return dynamodb.NewFromConfig(cfg), sqs.NewFromConfig(cfg)
}

// fencedLocker records, per runner, the token of the last table lease
// whose fence was checked (Check runs right before every manifest write).
// While its log is fair (during the load), a runner that has committed
// skips its turn (Acquire of the table lock reports ErrLockHeld without a
// request, as when another runner holds it) until every runner has
// committed once: the exclusion check always sees commits of both runners,
// however the machine's load and the faults schedule their passes.
type fencedLocker struct {
	lock.Locker
	log    *commitLog
	runner int
	mu     sync.Mutex
	tok    uint64
}

func (l *fencedLocker) Acquire(ctx context.Context, name string, opts lock.AcquireOptions) (*lock.Lease, error) {
	if name != "stats-writer" && l.log.yields(l.runner) {
		return nil, fmt.Errorf("%w: runner %d yields to a runner without commits", lock.ErrLockHeld, l.runner)
	}
	return l.Locker.Acquire(ctx, name, opts)
}

func (l *fencedLocker) Check(ctx context.Context, le *lock.Lease) error {
	err := l.Locker.Check(ctx, le)
	if err == nil && le.Name != "stats-writer" {
		l.mu.Lock()
		l.tok = le.Token
		l.mu.Unlock()
	}
	return err
}

func (l *fencedLocker) token() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.tok
}

// commitLog records every manifest a runner committed, with the runner's
// fenced token.
type commitLog struct {
	mu      sync.Mutex
	commits []fencedCommit
	runners int  // runners taking turns while fair
	fair    bool // see fencedLocker
}

// yields reports whether runner should skip a pass: the log is fair,
// runner has committed and another runner has not.
func (c *commitLog) yields(runner int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.fair {
		return false
	}
	n := make([]int, c.runners)
	for _, cm := range c.commits {
		n[cm.runner]++
	}
	return n[runner] > 0 && slices.Contains(n, 0)
}

// idle lists the runners without a commit.
func (c *commitLog) idle() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := make([]int, c.runners)
	for _, cm := range c.commits {
		n[cm.runner]++
	}
	var out []int
	for r, k := range n {
		if k == 0 {
			out = append(out, r)
		}
	}
	return out
}

func (c *commitLog) setFair(on bool) {
	c.mu.Lock()
	c.fair = on
	c.mu.Unlock()
}

type fencedCommit struct {
	version uint64
	runner  int
	token   uint64
}

type recordingStore struct {
	objstore.Store
	log    *commitLog
	locker *fencedLocker
	runner int
}

func (s *recordingStore) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	err := s.Store.PutIfAbsent(ctx, key, data)
	_, name, ok := strings.Cut(key, "/"+table.VersionsPrefix)
	if err == nil && ok {
		inv, perr := strconv.ParseUint(strings.TrimSuffix(name, ".manifest"), 10, 64)
		if perr == nil {
			s.log.mu.Lock()
			s.log.commits = append(s.log.commits, fencedCommit{^inv, s.runner, s.locker.token()})
			s.log.mu.Unlock()
		}
	}
	return err
}

// transientAWS: an error of a DynamoDB or SQS request (the retryer gave
// up), or a lease lost or expired.
func transientAWS(err error) bool {
	var oe *smithy.OperationError
	if errors.As(err, &oe) && (oe.ServiceID == "DynamoDB" || oe.ServiceID == "SQS") {
		return true
	}
	return errors.Is(err, lock.ErrLeaseLost) || errors.Is(err, lock.ErrLeaseExpired)
}

// TestFaultsOverAWS: the workload with the maintenance lock in DynamoDB
// and the cleanup queue in SQS (moto), both reached through a
// fault-injecting proxy (500, 503, timeouts, resets, before and after the
// server applied the request; ConditionalCheckFailedException after an
// applied UpdateItem, i.e. an acquire, renew or release that took effect
// but reads as refused). Two runners with DynamoLockers through the proxy
// maintain the table; ApplyPrune enqueues to SQS and cleaners drain it,
// all through the proxy; the table is in versitygw without faults. After
// the load, with faults off: final maintenance, drain, sweep, the model
// check, every retained version reads, no orphan older than grace, and
// the fenced commits of the runners never go back in token order.
func TestFaultsOverAWS(t *testing.T) {
	ctx := context.Background()
	direct := testenv.AWSEndpoint(t)
	ddbDirect, sqsDirect := awsClients(t, direct)
	name := testenv.BucketName(t)
	lockTable := name
	if err := lock.CreateLockTable(ctx, ddbDirect, lockTable); err != nil {
		t.Fatal(err)
	}
	qURL, dlqURL, err := queue.CreateQueueWithDLQ(ctx, sqsDirect, name, 5, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := faultproxy.Start(direct, faultproxy.Options{Seed: 6})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	ddb, sq := awsClients(t, proxy.URL())

	e := newWorkloadEnv(t, testenv.S3Store(t), loadPolicy())
	lostAcquire(t, proxy, lock.NewDynamoLocker(ddb, lockTable, e.clock), e.clock)

	// Faults by probability, and each kind also on a fixed matching
	// request early in the load (Nth: the 5th, 10th, ... request a rule
	// sees, the 3rd UpdateItem for ccf-after), so that every kind is
	// injected however few requests a loaded machine gets through.
	// As in TestFaultsOverS3: 8 rules at p each, so the SDK's retries run
	// out with probability ~(8p)^MaxAttempts a request; the Nth rules cover
	// every kind whatever p is.
	const p = 0.004
	var rules []faultproxy.Rule
	for i, f := range []faultproxy.Fault{faultproxy.InternalError, faultproxy.SlowDown, faultproxy.Timeout, faultproxy.Reset} {
		rules = append(rules,
			faultproxy.Rule{Fault: f, Prob: p, Nth: []int{5 + 10*i}, Hold: 200 * time.Millisecond},
			faultproxy.Rule{Fault: f, Prob: p, Nth: []int{10 + 10*i}, After: true, Hold: 200 * time.Millisecond})
	}
	rules = append(rules, faultproxy.Rule{Fault: faultproxy.ConditionalCheckFailed, Match: faultproxy.AWSTarget("UpdateItem"), Prob: 0.05, Nth: []int{3}, After: true})
	proxy.SetRules(rules)
	proxy.Enable(false)

	sqsQ := queue.NewSQS(sq, qURL, queue.SQSOptions{})
	runners := []*maintenance.Runner{e.runner}
	second := *e.runner
	runners = append(runners, &second)
	log := commitLog{runners: len(runners), fair: true}
	for i, r := range runners {
		fl := &fencedLocker{Locker: lock.NewDynamoLocker(ddb, lockTable, e.clock), log: &log, runner: i}
		r.Locker, r.Queue = fl, maintenance.QueueEnqueuer{Q: sqsQ}
		r.Store = &recordingStore{Store: e.faulty, log: &log, locker: fl, runner: i}
		r.Owner = fmt.Sprintf("runner-%d", i)
		// Longer than a writer's op and the lock waits (which advance the
		// fake clock), shorter than a clock step: a lease lost to a lost
		// response has expired by the next step.
		r.Lease = 20 * time.Minute
		r.LockWait = 2 * time.Second
	}
	e.clean.Requeue = maintenance.QueueEnqueuer{Q: sqsQ}

	// Cleaners hide each received batch for visibility (real time) and
	// handle it in sequence: a batch that outlives it on a loaded machine
	// is received again, and five receives dead-letter a message. 5 s is
	// ample for a batch; a message a tolerated error left hidden comes
	// back after it, which the final drain waits for (bounded by a minute).
	const visibility = 5 * time.Second
	finalDrain := func(t testing.TB) {
		deadline := time.Now().Add(time.Minute)
		for {
			st, err := queue.Drain(ctx, sqsQ, e.clean.Handle, queue.DrainOptions{Logger: discard, Visibility: visibility})
			if err != nil || st.DeadLettered > 0 {
				t.Fatalf("final drain: %+v: %v", st, err)
			}
			if n := testkit.QueueDepth(t, sqsDirect, qURL); n == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("final drain: queue not empty after a minute")
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	w := workload{
		Writers: 2, Cleaners: 2, Duration: loadDuration(t, 5*time.Second), MaintainEvery: 400 * time.Millisecond, KeySpace: 60, Seed: 6,
		AfterCreate: func() { proxy.Enable(true) },
		AfterLoad: func() {
			proxy.Enable(false)
			// On a machine loaded enough that the load ended before a
			// runner committed (the others yielding meanwhile), that
			// runner takes its turn now, on the compaction work the
			// yields left, after any lease a lost response left behind.
			for attempt := 0; attempt < 5 && len(log.idle()) > 0; attempt++ {
				e.clock.Advance(runners[0].Lease + time.Second)
				for _, r := range log.idle() {
					if _, err := runners[r].MaintainTable(ctx, e.ref); err != nil {
						t.Fatalf("runner %d after the load: %v", r, err)
					}
				}
			}
			log.setFair(false) // the final maintenance is runner 0's
		},
		Queue: sqsQ, Visibility: visibility, FinalDrain: finalDrain,
		Runners:    runners[1:],
		Tolerate:   transientAWS,
		WritePause: 20 * time.Millisecond,
	}
	rep := w.run(t, e)
	stats := proxy.Stats()
	t.Logf("AWS faults: %s", stats)
	t.Logf("AWS with faults: %s; %d errors tolerated", rep, rep.Tolerated)
	if n := testkit.QueueDepth(t, sqsDirect, dlqURL); n != 0 {
		t.Errorf("%d messages in the DLQ", n)
	}
	for _, kind := range []string{"500", "500-after", "503-slowdown", "503-slowdown-after", "timeout", "timeout-after", "reset", "reset-after", "ccf-after"} {
		if stats.Injected[kind] == 0 {
			t.Errorf("no %s fault was injected (%s)", kind, stats)
		}
	}

	// Mutual exclusion: in commit (version) order, the fencing token of
	// the committing runner never decreases, and each token belongs to one
	// runner (a lease is held by one owner).
	sort.Slice(log.commits, func(i, j int) bool { return log.commits[i].version < log.commits[j].version })
	owner := map[uint64]int{}
	perRunner := map[int]int{}
	for i, c := range log.commits {
		perRunner[c.runner]++
		if c.token == 0 {
			t.Errorf("runner %d committed v%d without a fenced lease", c.runner, c.version)
		}
		if o, ok := owner[c.token]; ok && o != c.runner {
			t.Errorf("token %d used by runners %d and %d", c.token, o, c.runner)
		}
		owner[c.token] = c.runner
		if i > 0 && c.token < log.commits[i-1].token {
			t.Errorf("v%d committed by runner %d under token %d after v%d under token %d (runner %d)",
				c.version, c.runner, c.token, log.commits[i-1].version, log.commits[i-1].token, log.commits[i-1].runner)
		}
	}
	t.Logf("fenced commits: %d (by runner: %v), %d leases", len(log.commits), perRunner, len(owner))
	if len(perRunner) < 2 {
		t.Errorf("only one runner committed (%v): the exclusion check saw no contention", perRunner)
	}
}

// lostAcquire: an Acquire whose UpdateItem was applied but answered with
// ConditionalCheckFailedException (the response lost) reports the lock as
// held. The item is then held by that owner, whose caller has no lease and
// so can commit nothing; nobody else can acquire until it expires, and
// the next acquisition gets a larger token.
func lostAcquire(t *testing.T, proxy *faultproxy.Proxy, lk *lock.DynamoLocker, clock *fakeClock) {
	t.Helper()
	ctx := context.Background()
	proxy.SetRules([]faultproxy.Rule{{Fault: faultproxy.ConditionalCheckFailed, Match: faultproxy.AWSTarget("UpdateItem"), Every: 1, After: true}})
	opts := func(owner string) lock.AcquireOptions {
		return lock.AcquireOptions{Owner: owner, Lease: time.Minute, MaxWait: -1}
	}
	if _, err := lk.Acquire(ctx, "lost-acquire", opts("a")); !errors.Is(err, lock.ErrLockHeld) {
		t.Fatalf("acquire answered CCF: %v, want ErrLockHeld", err)
	}
	proxy.SetRules(nil)
	if _, err := lk.Acquire(ctx, "lost-acquire", opts("b")); !errors.Is(err, lock.ErrLockHeld) || !strings.Contains(err.Error(), `owner "a" token 1`) {
		t.Fatalf("second owner, same instant: %v, want held by a token 1", err)
	}
	clock.Advance(time.Minute + time.Millisecond)
	l, err := lk.Acquire(ctx, "lost-acquire", opts("b"))
	if err != nil || l.Token != 2 {
		t.Fatalf("after expiry: %v, %v; want token 2", l, err)
	}
}
