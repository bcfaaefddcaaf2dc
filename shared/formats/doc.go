// Package formats is the format registry: it opens every registered
// dataset (maintenance.TableRef.Format) as a maintenance.Source, a
// tablekeep table's maintenance.TableSource or a Lance dataset's
// lance.Source: the one place that knows both the maintenance pipeline and
// the Lance reader, so that neither learns the other. shared/warehouse's
// constructors wire Open into the runner, the cleaner and the sweep once,
// for the Lambda functions, the CLI and the embedded warehouse alike, so
// that a caller cannot forget it (a Lance dataset would fail with
// maintenance.ErrUnknownFormat); lance.go is what the CLI reads of a Lance
// dataset.
//
// Floor 4 of the layering (a package's floor is one above the highest floor
// it imports; floor 0 imports no tablekeep package). It owns the format
// registry (Open) and the bridge from a Lance dataset's report to
// maintenance's, nothing else. It must not import: shared/awsfn,
// shared/catalog, shared/cli, shared/embedded.
package formats
