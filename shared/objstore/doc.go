// Package objstore is the small object-store interface tablekeep is built on,
// with a local-directory implementation, an S3 implementation, and wrappers
// that count requests by kind, inject faults, add a remote store's latency
// by request kind (Latency, with named profiles) and measure critical paths;
// and the machinery callers send requests through: the AIMD rate limiter,
// the paced batch deleter (Deleter) and the dry-run overlay (Overlay).
// Pacing is a property of the store: S3, and the wrappers standing for it,
// say the per-prefix rates they take (Paced, RatesOf); a local disk is not
// paced.
//
// Keys are slash-separated and relative to the store's root (a directory on
// disk, a bucket on S3). Every method is exactly one request to the backing
// service, so the counting wrapper's numbers are the service's numbers.
//
// Floor 1 of the layering (a package's floor is one above the highest floor
// it imports; floor 0 imports no tablekeep package). It owns the Store
// interface and every store decorator: disk and S3 stores, request counting,
// faults, latency profiles, throttling and pacing, the rate limiter, the
// paced deleter and the dry-run overlay, and Open from a URL. It imports only shared/clock. It must not import: shared/table,
// shared/maintenance.
package objstore
