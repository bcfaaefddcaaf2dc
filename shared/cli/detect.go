package cli

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/tablekeep/tablekeep/shared/dataset"
	"github.com/tablekeep/tablekeep/shared/formats"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/table"
)

// isLanceDataset reports whether root holds a Lance dataset
// (formats.IsLanceDataset: one LIST of one key and one GET). Only called
// once opening a tablekeep table failed.
func isLanceDataset(ctx context.Context, store objstore.Store, root string) bool {
	return formats.IsLanceDataset(ctx, store, root)
}

// isTablekeepTable reports whether root holds a tablekeep table (it opens).
func isTablekeepTable(ctx context.Context, store objstore.Store, root string) bool {
	_, err := table.Open(ctx, store, root, table.Options{})
	return err == nil
}

// ErrWrongFormat: a table command on a Lance dataset, or a registration
// with the other format than the dataset's.
var ErrWrongFormat = errors.New("wrong format")

// lanceNotTable is the error of a table command on a Lance dataset at
// path: what reads it, and what takes it.
func lanceNotTable(path string) error {
	return fmt.Errorf("%s is a Lance dataset: table commands read tablekeep tables; read it with LanceDB (describe, files and lease take it; register --table-format lance maintains it)%w", path, quiet{ErrWrongFormat})
}

// lanceNotRegistered is the error of a tablekeep registration of the Lance
// dataset at path.
func lanceNotRegistered(path string) error {
	return fmt.Errorf("%s is a Lance dataset: register it with --table-format lance%w", path, quiet{ErrWrongFormat})
}

// tableNotLance is its mirror: --format lance on a tablekeep table.
func tableNotLance(path string) error {
	return fmt.Errorf("%s is a tablekeep table, not a Lance dataset: register it without --table-format lance (--table-format tablekeep)%w", path, quiet{ErrWrongFormat})
}

// quiet wraps a sentinel so that it matches errors.Is without adding to
// the message.
type quiet struct{ err error }

func (q quiet) Error() string { return "" }
func (q quiet) Unwrap() error { return q.err }

// restoreRe finds the version a Lance source refused as a restore or clone.
var restoreRe = regexp.MustCompile(`version (\d+) restores or clones`)

// restoreBlocked explains, when err is the Lance reader's refusal of a
// restore (or clone) commit, why the dataset at root is not pruned and what
// the user can do ("" otherwise). tablekeep cannot prune across a restore:
// the restored version references again files that older change records
// list as removed. LanceDB's own cleanup removes it; on a tagged dataset
// that cleanup refuses until the tags are deleted.
func restoreBlocked(ctx context.Context, store objstore.Store, root string, err error) string {
	// The error may come as text (a batch's report): match the sentinel's.
	if err == nil || (!errors.Is(err, formats.ErrUnsupported) && !strings.Contains(err.Error(), formats.ErrUnsupported.Error())) {
		return ""
	}
	m := restoreRe.FindStringSubmatch(err.Error())
	if m == nil {
		return ""
	}
	msg := fmt.Sprintf("version %s is a LanceDB restore (or clone), and tablekeep does not prune across one "+
		"(the restored version references files again); LanceDB's own cleanup (optimize with cleanupOlderThan, "+
		"or cleanup_old_versions) removes it once newer versions are older than its cut-off, then tablekeep resumes", m[1])
	tags, terr := formats.Tags(ctx, store, root)
	if terr == nil && len(tags) > 0 {
		names := slices.Sorted(maps.Keys(tags))
		msg += fmt.Sprintf("; the dataset has %s (%s), and LanceDB's cleanup refuses until they are deleted (table.tags().delete)",
			plural(len(names), "tag", "tags"), strings.Join(names, ", "))
	}
	return msg
}

// latestIsRestore reports whether the latest version of the Lance dataset
// at root was committed by a restore or clone (formats.LatestIsRestore).
func latestIsRestore(ctx context.Context, store objstore.Store, root string) (uint64, bool, error) {
	return formats.LatestIsRestore(ctx, store, root)
}

// plural is "1 tag", "2 tags".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

// lanceVersions lists the versions of the Lance dataset at --table (List
// requests only: COMMITTED is each manifest's object time) and its tags.
func lanceVersions(ctx context.Context, app *App) ([]dataset.VersionInfo, map[string]uint64, error) {
	store, root, err := app.OpenStore(ctx, true)
	if err != nil {
		return nil, nil, err
	}
	return formats.Versions(ctx, store, root)
}

// lanceFileJSON is one data file of a Lance dataset's version (`files` on
// a Lance dataset): its rows, and the deletion file masking some of them
// (Lance's own format: read the dataset with LanceDB).
type lanceFileJSON struct {
	Path         string `json:"path"`
	Fragment     uint64 `json:"fragment"`
	Rows         uint64 `json:"rows"`
	LiveRows     uint64 `json:"live_rows"`
	Deleted      uint64 `json:"deleted_rows"`
	DeletionFile string `json:"deletion_file,omitempty"`
}

// lanceFiles lists the data files of version v (0: the latest) of the
// Lance dataset at --table: the listing and one manifest, read-only.
func lanceFiles(ctx context.Context, app *App, v uint64) error {
	store, root, err := app.OpenStore(ctx, true)
	if err != nil {
		return err
	}
	fs, err := formats.Files(ctx, store, root, v)
	if err != nil {
		return fmt.Errorf("%s: %w", app.TableURI, err)
	}
	base := strings.TrimSuffix(app.TableURI, "/") + "/"
	var files []lanceFileJSON
	for _, f := range fs {
		dkey := ""
		if f.DeletionFile != "" {
			dkey = base + f.DeletionFile
		}
		files = append(files, lanceFileJSON{Path: base + f.Path, Fragment: f.Fragment, Rows: f.Rows,
			LiveRows: f.LiveRows, Deleted: f.Deleted, DeletionFile: dkey})
	}
	if app.JSON() {
		return printJSONLines(app.Stdout, files, func(f lanceFileJSON) any { return f })
	}
	var rows [][]string
	for _, f := range files {
		rows = append(rows, []string{f.Path, strconv.FormatUint(f.Fragment, 10), strconv.FormatUint(f.Rows, 10), strconv.FormatUint(f.LiveRows, 10), strconv.FormatUint(f.Deleted, 10)})
	}
	return printAligned(app.Stdout, []string{"PATH", "FRAGMENT", "ROWS", "LIVE", "DELETED"}, rows)
}
