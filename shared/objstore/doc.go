// Package objstore is the small object-store interface tablekeep is built on,
// with a local-directory implementation, an S3 implementation, and wrappers
// that count requests by kind, inject faults, add a remote store's latency
// by request kind (Latency, with named profiles) and measure critical paths.
//
// Keys are slash-separated and relative to the store's root (a directory on
// disk, a bucket on S3). Every method is exactly one request to the backing
// service, so the counting wrapper's numbers are the service's numbers.
//
// Floor 0 of the layering (a package's floor is one above the highest floor
// it imports; floor 0 imports no tablekeep package). It owns the Store
// interface and every store decorator: disk and S3 stores, request counting,
// faults, latency profiles and throttling, and Open from a URL. It must not
// import any tablekeep package.
package objstore
