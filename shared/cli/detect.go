package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/tablekeep/tablekeep/shared/lance"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/table"
)

// lanceFooter ends every Lance manifest file (and data file).
var lanceFooter = []byte("LANC")

// isLanceDataset reports whether root holds a Lance dataset: its first
// manifest under _versions/ ends with Lance's "LANC" footer (one LIST of
// one key and one GET). Only called once opening a tablekeep table failed.
// Both formats name manifests alike, so only the content tells.
func isLanceDataset(ctx context.Context, store objstore.Store, root string) bool {
	root = table.NormalizeRoot(root)
	p, err := store.List(ctx, objstore.ListOptions{Prefix: root + lance.VersionsDir, MaxKeys: 1})
	if err != nil || len(p.Objects) == 0 {
		return false
	}
	b, err := store.Get(ctx, p.Objects[0].Key)
	return err == nil && bytes.HasSuffix(b, lanceFooter)
}

// isTablekeepTable reports whether root holds a tablekeep table (it opens).
func isTablekeepTable(ctx context.Context, store objstore.Store, root string) bool {
	_, err := table.Open(ctx, store, root, table.Options{})
	return err == nil
}

// ErrWrongFormat: a table command on a Lance dataset, or a registration
// with the other format than the dataset's.
var ErrWrongFormat = errors.New("wrong format")

// lanceNotTable is the error of a table command (or a tablekeep
// registration) on a Lance dataset at path.
func lanceNotTable(path string) error {
	return fmt.Errorf("%s is a Lance dataset: register it with --format lance; table commands read tablekeep tables (use LanceDB)%w", path, quiet{ErrWrongFormat})
}

// tableNotLance is its mirror: --format lance on a tablekeep table.
func tableNotLance(path string) error {
	return fmt.Errorf("%s is a tablekeep table, not a Lance dataset: register it without --format lance (--format tablekeep)%w", path, quiet{ErrWrongFormat})
}

// quiet wraps a sentinel so that it matches errors.Is without adding to
// the message.
type quiet struct{ err error }

func (q quiet) Error() string { return "" }
func (q quiet) Unwrap() error { return q.err }
