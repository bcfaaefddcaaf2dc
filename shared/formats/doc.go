// Package formats opens the registered datasets whose format is not
// tablekeep's (maintenance.TableRef.Format) as maintenance.Source values:
// the one place that knows both the maintenance pipeline and the Lance
// reader, so that neither learns the other. shared/warehouse's
// constructors pass Open as Runner.Sources, Cleaner.Sources and
// SweepOptions.Sources, for the Lambda functions, the CLI and the embedded
// warehouse alike; lance.go is what the CLI reads of a Lance dataset.
//
// Floor 4 of the layering (a package's floor is one above the highest floor
// it imports; floor 0 imports no tablekeep package). It owns the format
// registry (Open) and the bridge from a Lance dataset's report to
// maintenance's, nothing else. It must not import: shared/awsfn,
// shared/catalog, shared/cli, shared/embedded.
package formats
