package bench

import (
	"context"
	"math"
	"time"

	"github.com/tablekeep/tablekeep/shared/catalog"
	"github.com/tablekeep/tablekeep/shared/fleet"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
)

// NotifiedEvery is the safety-net cadence of the measurement (the
// template's SafetyScanEvery default).
const NotifiedEvery = 6 * time.Hour

// notifiedSettle is the passes with nothing written before the
// measurement: the tables written until then finish their pending work
// (12 h: past ReplanAfter, 6 h, twice, when their last tracked ranges are
// re-planned and dropped).
const notifiedSettle = 48

// FleetNotified is the fleet with S3 notifications on and nothing written
// (issue 23 point 4): the scheduled pass with the safety-net scan
// (fleet.Options.SafetyScanEvery = NotifiedEvery, the _stats table listed every
// pass as awsfn does), measured over one cadence.
type FleetNotified struct {
	Tables, Passes int
	Every          time.Duration
	// Requests is every request of the measured passes, of every class:
	// the tables' LISTs, the index, the scan state, _registry, _stats.
	Requests     objstore.Counts
	LockW, LockR int64
	Messages     int64
	Listed       int           // tables listed, summed over the passes
	Wall         time.Duration // modelled pass, mean
}

// PerPass is the requests of one idle table in one pass, everything
// amortized over the fleet.
func (r FleetNotified) PerPass() float64 {
	c := r.Requests
	d := float64(max(r.Tables, 1) * max(r.Passes, 1))
	return float64(c.Get+c.Head+c.Put+c.List+c.DeleteRequests+r.LockW+r.LockR+r.Messages) / d
}

// Cost is one idle table's month, every service: its share of every
// request, of the DynamoDB calls and of the scheduled invocation (one
// request and the modelled pass, 2,880 a month). No SQS message: an idle
// table is notified of nothing.
func (r FleetNotified) Cost() FleetCost {
	t := float64(max(r.Tables, 1))
	month := float64(PassesPerMonth) / float64(max(r.Passes, 1))
	req := scaleCounts(r.Requests, month/t)
	return FleetCost{
		Requests: req,
		S3:       requestCost(req),
		Lambda:   PassesPerMonth * (PriceLambdaPerMillion/1e6 + r.Wall.Seconds()*LambdaMemoryGB*PriceLambdaGBSecondArm) / t,
		SQS:      float64(r.Messages) * 3 * month / t * PriceSQSPerMillion / 1e6,
		Dynamo:   (float64(r.LockW)*PriceDynamoWRUMillion + float64(r.LockR)*PriceDynamoRRUMillion) * month / t / 1e6,
	}
}

// notifiedIdle switches the simulation's runner to the safety-net scan,
// stops the writes, lets notifiedSettle passes finish the pending work,
// then measures NotifiedEvery of passes.
func notifiedIdle(ctx context.Context, w *fleetWorld, cfg FleetConfig, logf func(string, ...any)) (FleetNotified, error) {
	defer func() { w.fleet = fleet.Options{} }()
	w.fleet = fleet.Options{SafetyScanEvery: NotifiedEvery,
		Unnotified: func(ref maintenance.TableRef) bool { return ref.Name == catalog.StatsName }}
	res := FleetNotified{Tables: cfg.Tables, Every: NotifiedEvery, Passes: int(NotifiedEvery / cfg.Period)}
	logf("fleet: notifications on, nothing written: %d settling passes, then %d measured", notifiedSettle, res.Passes)
	sum := func() (objstore.Counts, int64, int64, int64) {
		var c objstore.Counts
		for _, x := range w.cs.counts() {
			c = c.Add(x)
		}
		var lw, lr, m int64
		for i := range 4 {
			lw, lr, m = lw+w.locker.writes[i].Load(), lr+w.locker.reads[i].Load(), m+w.cq.msgs[i].Load()
		}
		return c, lw, lr, m
	}
	var c0 objstore.Counts
	var lw0, lr0, m0 int64
	var wall time.Duration
	for p := range notifiedSettle + res.Passes {
		if p == notifiedSettle {
			c0, lw0, lr0, m0 = sum()
		}
		w.clock.Advance(cfg.Period)
		before := w.cs.counts()
		rep, err := w.pass(ctx)
		if err != nil {
			return res, err
		}
		if p < notifiedSettle {
			continue
		}
		var pc objstore.Counts
		for i, x := range w.cs.counts() {
			pc = pc.Add(x.Sub(before[i]))
		}
		listed := rep.Scan.Listed()
		res.Listed += listed
		// The scan's LISTs ScanConcurrency at a time, the rest serially.
		rest := pc
		rest.List -= min(int64(listed), rest.List)
		wall += time.Duration(math.Ceil(float64(listed)/float64(fleet.DefaultScanConcurrency)))*cfg.Profile.List + cfg.Profile.Of(rest)
	}
	c1, lw1, lr1, m1 := sum()
	res.Requests, res.LockW, res.LockR, res.Messages = c1.Sub(c0), lw1-lw0, lr1-lr0, m1-m0
	res.Wall = wall / time.Duration(max(res.Passes, 1))
	return res, nil
}
