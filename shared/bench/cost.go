package bench

import "github.com/tablekeep/tablekeep/shared/objstore"

// S3 Standard list prices (us-east-1) used by the cost estimate.
const (
	PricesDate        = "2026-11-30" // when these list prices were recorded here
	PricePutPer1000   = 0.005        // PUT, COPY, POST, LIST
	PriceGetPer1000   = 0.0004       // GET, HEAD (and other reads)
	PriceStorageGBMon = 0.023        // first 50 TB per month
	// DELETE requests are free on S3; they are counted but not priced.

	// WritesPerMonth is the seed's write rate, one a minute, for 30 days.
	WritesPerMonth = 30 * 24 * 60
)

// requestCost is the list price of the requests c, in dollars.
func requestCost(c objstore.Counts) float64 {
	return float64(c.Put+c.List)*PricePutPer1000/1000 + float64(c.Get+c.Head)*PriceGetPer1000/1000
}

// scaleCounts returns c * f, field by field (requests per write times writes).
func scaleCounts(c objstore.Counts, f float64) objstore.Counts {
	m := func(v int64) int64 { return int64(float64(v)*f + 0.5) }
	return objstore.Counts{Get: m(c.Get), Head: m(c.Head), Put: m(c.Put), List: m(c.List),
		DeleteRequests: m(c.DeleteRequests), DeleteKeys: m(c.DeleteKeys)}
}

// Cost is the monthly estimate for one table.
type Cost struct {
	WriteRequests     objstore.Counts // per month
	MaintRequests     objstore.Counts // per month
	RequestDollars    float64
	StorageGBMonth1   float64 // mean GB stored during the first month
	StorageGBMonth12  float64 // mean GB stored during the twelfth
	StorageDollars1   float64
	StorageDollars12  float64
	ManifestBytesUsed float64 // per write (without maintenance: the model's manifest)
}

// costs estimates the monthly cost of one registry table at one write a
// minute. Requests: the churn's measured requests per write (and, with
// maintenance, the maintenance requests per write) times the writes in a
// month. Storage without maintenance: every write leaves a manifest of
// rows x bytes-per-fragment (one fragment per row, as in the seed) plus the
// churn's measured other bytes per version; nothing is ever deleted, so the
// mean stored in month m is (m - 1/2) months of writes. With maintenance:
// the maintained churn's bytes on disk at its end (bounded: keep-last,
// grace window, one compacted fragment).
func costs(r *Results, rows int) (without, with Cost) {
	w := float64(WritesPerMonth)
	without.WriteRequests = scaleCounts(r.Without.Writes.C, w/float64(r.Without.Ops))
	without.RequestDollars = requestCost(without.WriteRequests)
	manifest := float64(rows) * r.Growth.BytesPerFragment
	other := float64(r.Without.ObjectBytes-r.Without.Final.ManifestBytes) / float64(max(r.Without.Final.Versions, 1))
	perWrite := manifest + other
	without.ManifestBytesUsed = manifest
	gb := func(b float64) float64 { return b / 1e9 }
	without.StorageGBMonth1 = gb(0.5 * w * perWrite)
	without.StorageGBMonth12 = gb(11.5 * w * perWrite)
	without.StorageDollars1 = without.StorageGBMonth1 * PriceStorageGBMon
	without.StorageDollars12 = without.StorageGBMonth12 * PriceStorageGBMon

	with.WriteRequests = scaleCounts(r.With.Writes.C, w/float64(r.With.Ops))
	with.MaintRequests = scaleCounts(r.With.Maint.C, w/float64(r.With.Ops))
	with.RequestDollars = requestCost(with.WriteRequests) + requestCost(with.MaintRequests)
	with.StorageGBMonth1 = gb(float64(r.With.ObjectBytes))
	with.StorageGBMonth12 = with.StorageGBMonth1
	with.StorageDollars1 = with.StorageGBMonth1 * PriceStorageGBMon
	with.StorageDollars12 = with.StorageDollars1
	return without, with
}
