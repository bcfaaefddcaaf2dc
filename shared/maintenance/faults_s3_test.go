package maintenance_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/internal/faultproxy"
	"github.com/tablekeep/tablekeep/shared/internal/testenv"
)

// s3Workload runs the workload over objstore.S3 through a fault-injecting
// proxy in front of versitygw (rules nil: no faults).
func s3Workload(t *testing.T, w workload, rules []faultproxy.Rule) (workloadReport, faultproxy.Stats) {
	direct := testenv.S3Store(t)
	proxy, err := faultproxy.Start(testenv.S3Endpoint(t), faultproxy.Options{Seed: w.Seed, Rules: rules})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	st, err := faultproxy.NewS3(context.Background(), proxy.URL(), direct.Bucket())
	if err != nil {
		t.Fatal(err)
	}
	// The verification reads go through the proxy with injection off.
	// Faults start once the table exists (a 412 on Create's first
	// manifest is, correctly, ErrTableExists); the final maintenance and
	// sweep run with faults, the verification reads without.
	proxy.Enable(false)
	w.AfterCreate = func() { proxy.Enable(true) }
	w.Quiet = func(quiet bool) { proxy.Enable(!quiet) }
	e := newWorkloadEnv(t, st, loadPolicy())
	rep := w.run(t, e)
	return rep, proxy.Stats()
}

// TestFaultsOverS3: commits, compaction, prune planning and cleanup run
// through objstore.S3 while the proxy injects 500s, 503 SlowDown, timeouts
// and connection resets (before the server sees the request, and after it
// applied it, so commits become ambiguous), and 412/409 on conditional
// PUTs. The SDK retryer (objstore.DefaultS3MaxAttempts) and the commit
// protocol absorb them: the model check of the workload passes.
func TestFaultsOverS3(t *testing.T) {
	// Each of the 8 rules below fires on a request with probability p, so a
	// request fails with probability ~8p, and the SDK gives up only after
	// DefaultS3MaxAttempts (6) failures in a row: (8p)^6. At p = 0.015 that
	// is 3e-6 a request, a few percent of a run's requests (a clean-clone
	// CI run failed on one: a data file's PutObject, 6 attempts, SlowDown);
	// at 0.004 it is 1e-9. Each kind is also injected at a fixed request
	// (Nth), so every kind is covered whatever p is.
	const p = 0.004
	var rules []faultproxy.Rule
	for i, f := range []faultproxy.Fault{faultproxy.InternalError, faultproxy.SlowDown, faultproxy.Timeout, faultproxy.Reset} {
		rules = append(rules,
			faultproxy.Rule{Fault: f, Prob: p, Nth: []int{5 + 10*i}, Hold: 200 * time.Millisecond},
			faultproxy.Rule{Fault: f, Prob: p, Nth: []int{10 + 10*i}, After: true, Hold: 200 * time.Millisecond})
	}
	// 412/409 on commits (conditional PUTs of manifests). Not on data files:
	// their names are fresh random ids, which S3 never answers with 412/409;
	// injected there after a retried attempt, PutIfAbsent rightly reports an
	// unknown outcome (the read-back finds nothing) and the write fails.
	commit := func(r *http.Request) bool {
		return faultproxy.IsConditionalPut(r) && strings.Contains(r.URL.Path, "/_versions/")
	}
	rules = append(rules,
		faultproxy.Rule{Fault: faultproxy.PreconditionFailed, Match: commit, Prob: 0.05, Nth: []int{2}},
		faultproxy.Rule{Fault: faultproxy.ConditionConflict, Match: commit, Prob: 0.05, Nth: []int{3}},
		// Every 7th delete request is applied and its answer lost.
		faultproxy.Rule{Fault: faultproxy.InternalError, Match: faultproxy.IsDelete, Every: 7, After: true})
	w := workload{Writers: 4, Cleaners: 2, Duration: loadDuration(t, 6*time.Second), MaintainEvery: time.Second, KeySpace: 60, Seed: 3}
	rep, stats := s3Workload(t, w, rules)
	t.Logf("faults: %s", stats)
	t.Logf("S3 with faults: %s", rep)
	for _, kind := range []string{"500", "500-after", "503-slowdown", "503-slowdown-after", "timeout", "timeout-after", "reset", "reset-after", "412", "409"} {
		if stats.Injected[kind] == 0 {
			t.Errorf("no %s fault was injected (%s): run longer", kind, stats)
		}
	}
}

// TestLoadS3: the short S3 variant of TestLoad (16 writers, maintenance
// every second, 4 cleaners) through the proxy without faults.
func TestLoadS3(t *testing.T) {
	w := workload{Writers: 16, Cleaners: 4, Duration: loadDuration(t, 4*time.Second), MaintainEvery: time.Second, KeySpace: 200, Seed: 2}
	rep, _ := s3Workload(t, w, nil)
	t.Logf("S3 load: %s", rep)
}
