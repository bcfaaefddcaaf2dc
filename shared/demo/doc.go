// Package demo reproduces the registry churn of the seed incident on a
// local table with no services: concurrent writers upsert new names and
// delete old ones, one commit each, and the report shows what that does to
// the table (versions, fragments, manifest bytes) and to the request count.
//
// Run is: setup, churn, report, then (if Config.Maintain is set) the
// maintenance step and a second report. The maintenance engineer plugs
// compaction and cleanup in through Config.Maintain (Maintain, in maintain.go).
//
// Floor 8 of the layering (a package's floor is one above the highest floor
// it imports; floor 0 imports no tablekeep package). It owns the churn
// workload and its report; maintenance comes from shared/embedded. It must
// not import: shared/awsfn, shared/bench.
package demo
