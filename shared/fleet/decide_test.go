package fleet

import (
	"math/rand/v2"
	"testing"
	"time"
)

// Wake is exact for Decide on an unchanged table: before it the
// table is not in need, at it (and after) it is. Random marks over the
// fields Decide reads; times on a minute grid.
func TestFleetMarkWakeMatchesDecideNeed(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func() time.Time { return t0.Add(time.Duration(rng.IntN(600)) * time.Minute) }
	root := "wh/t/"
	th := Thresholds{CompactMinFragments: 36, CompactMaxWait: time.Hour} // the default policy's
	for i := range 5000 {
		m := Mark{Root: root, Latest: uint64(10 + rng.IntN(5)), Due: at(), CompactFrags: rng.IntN(40)}
		if rng.IntN(2) == 0 {
			m.Seen = m.Latest + uint64(rng.IntN(40))
			if rng.IntN(5) == 0 {
				m.Seen = m.Latest - 1 - uint64(rng.IntN(5)) // recreated
			}
			if m.Seen != 0 && m.Seen != m.Latest {
				m.ChangedAt = at()
			}
		}
		if rng.IntN(4) == 0 {
			m.Failures, m.RetryAt = 1+rng.IntN(3), at()
		}
		if rng.IntN(3) == 0 {
			m.CompactFailures, m.CompactRetryAt = 1, at()
		}
		w := Wake(m, th)
		for _, now := range []time.Time{w.Add(-time.Minute), w, w.Add(time.Minute), t0.Add(-time.Minute), t0.Add(700 * time.Minute)} {
			if now.Before(t0.Add(-time.Hour)) {
				continue // before a zero wake: no such time
			}
			reasons, _, _ := Decide(root, m, true, LatestOf(m), nil, now, th)
			if got, want := len(reasons) > 0, !now.Before(w); got != want {
				t.Fatalf("mark %d %+v: wake %s, at %s in need %v %v", i, m, w, now, got, reasons)
			}
		}
	}
}
