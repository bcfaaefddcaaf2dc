// Package formats opens the registered datasets whose format is not
// tablekeep's (maintenance.TableRef.Format) as maintenance.Source values:
// the one place that knows both the maintenance pipeline and the Lance
// reader, so that neither learns the other. The Lambda functions, the CLI
// and the embedded warehouse pass Open as Runner.Sources and
// Cleaner.Sources.
package formats

import (
	"context"
	"fmt"

	"github.com/tablekeep/tablekeep/shared/lance"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
)

// Lance is the format of a Lance dataset (what LanceDB writes).
const Lance = "lance"

// Known reports whether format is one Open opens ("" is tablekeep's own).
func Known(format string) bool { return format == "" || format == Lance }

// Open is a maintenance.SourceOpener: a Lance dataset's lance.Source at the
// ref's root; any other format is maintenance.ErrUnknownFormat (nothing is
// read or deleted).
func Open(_ context.Context, store objstore.Store, ref maintenance.TableRef) (maintenance.Source, error) {
	switch ref.Format {
	case Lance:
		return lance.NewSource(store, ref.Root), nil
	}
	return nil, fmt.Errorf("%w: %q (known: %q)", maintenance.ErrUnknownFormat, ref.Format, Lance)
}

var (
	_ maintenance.SourceOpener  = Open
	_ maintenance.Source        = (*lance.Source)(nil)
	_ maintenance.LatestProber  = (*lance.Source)(nil)
	_ maintenance.LatestStatser = (*lance.Source)(nil)
)

var _ maintenance.SweepSource = (*lance.Source)(nil)
