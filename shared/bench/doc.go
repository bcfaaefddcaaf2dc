// Package bench is the benchmark report generator behind `make bench`
// (cmd/tkbench): one run measures the table format and maintenance on local
// disk — the seed's registry churn with and without maintenance, a seed
// replay (churn, then one maintenance pass), compaction and cleanup
// throughput, open/commit requests at 10 / 1,000 / 20,000 versions,
// get-by-key before and after maintenance, maintenance at object-store
// latency (one pass under the none and s3 profiles, a cleanup backlog drained
// by 1 and 5 cleaners; latency.go) — each with object-store requests by kind,
// and writes docs/benchmarks.md, a PNG plot and a monthly cost
// estimate from the counted requests.
//
// Floor 9 of the layering (a package's floor is one above the highest floor
// it imports; floor 0 imports no tablekeep package). It owns the
// measurements and the report: fixtures, the fleet model and its cost
// estimate (fleet*.go, cost.go), latency profiles, heap sampling and the
// plot; it drives the real packages and counts their requests through
// objstore's counting wrapper. It must not import: shared/internal/testkit,
// shared/internal/testenv.
package bench
