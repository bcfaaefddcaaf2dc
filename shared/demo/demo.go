package demo

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/schollz/progressbar/v3"

	"github.com/tablekeep/tablekeep/shared/cli"
	"github.com/tablekeep/tablekeep/shared/dataset"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/table"
)

// Schema is the registry's shape: name (key), uri, created_at.
var Schema = arrow.NewSchema([]arrow.Field{
	{Name: "name", Type: arrow.BinaryTypes.String},
	{Name: "uri", Type: arrow.BinaryTypes.String},
	{Name: "created_at", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
}, nil)

// MaintainFunc is the step between churn and the final report.
type MaintainFunc func(ctx context.Context, d *Demo) error

// Config configures a demo run.
type Config struct {
	Dir      string // table directory; wiped at start
	Ops      int    // total writes (default 2000)
	Writers  int    // concurrent writers, each with its own table handle (default 4)
	Seed     uint64 // random seed (default 1)
	Out      io.Writer
	Progress bool // show a progress bar on ProgressOut (default Out)
	// ProgressOut is where the progress bar goes (tkdemo: stderr).
	ProgressOut io.Writer
	// Maintain, if set, runs after churn; the table is reported again after it.
	Maintain MaintainFunc
	// Options for every table handle (zero: defaults).
	Options table.Options
	// Latency is added to every request the churn and maintenance make
	// (objstore.ParseProfile("s3"), say); the reports' own reads do not pay it.
	Latency objstore.Profile
}

// Demo is one run's state. A MaintainFunc may use its exported fields and
// methods: Store counts every request, Churn runs more writes (e.g.
// concurrently with maintenance), Report prints the table's state.
type Demo struct {
	Cfg   Config
	Store *objstore.Counting // every handle goes through it (with Cfg.Latency)
	Root  string             // table root in Store: the table directory's name
	// Raw is the local store under Store, with no latency and no counting.
	Raw objstore.Store

	mu      sync.Mutex
	writers []*writer
	opsDone int
	phase   objstore.Counts // counts at the start of the current phase
	started time.Time
}

// Report is what one report printed.
type Report struct {
	Label       string
	Stats       dataset.Stats
	ModelRows   int // rows the writers' model says the table has
	ScannedRows int // live rows a full scan returned
	Objects     int // files under the table directory
	ObjectBytes int64
	Requests    objstore.Counts // during the phase being reported
	// OpenGet is an open + get by key of a live name under Cfg.Latency:
	// its requests and critical path (zero if the table has no rows).
	OpenGet     objstore.Counts
	OpenGetPath objstore.Path
	OpenGetTime time.Duration
}

// Result is what a run did.
type Result struct {
	Reports     []Report
	Ops         int
	Creates     int
	Deletes     int
	Retries     int // retried creates (upsert of a live name)
	CommitRetry int // commit attempts beyond the first, all writers
	Churn       time.Duration
	Elapsed     time.Duration
}

// Run performs a whole demo: setup, churn, report, maintain, report.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	d, err := Setup(ctx, cfg)
	if err != nil {
		return nil, err
	}
	res := &Result{}
	fmt.Fprintf(d.Cfg.Out, "registry table at %s (name utf8 key, uri utf8, created_at timestamp)\n", d.Cfg.Dir)
	if !d.Cfg.Latency.IsZero() {
		fmt.Fprintf(d.Cfg.Out, "latency: %s, added to every request of the churn and maintenance\n", d.Cfg.Latency)
	}
	fmt.Fprintf(d.Cfg.Out, "churn: %d ops by %d writers, each op one commit (upsert of a new name, delete of a live one, or a retried create)\n",
		d.Cfg.Ops, d.Cfg.Writers)
	start := time.Now()
	if err := d.Churn(ctx, d.Cfg.Ops); err != nil {
		return nil, err
	}
	res.Churn = time.Since(start)
	for _, w := range d.writers {
		res.Creates += w.creates
		res.Deletes += w.deletes
		res.Retries += w.retries
		res.CommitRetry += w.commitRetries
	}
	res.Ops = res.Creates + res.Deletes + res.Retries
	fmt.Fprintf(d.Cfg.Out, "churn done in %s: %d creates, %d deletes, %d retried creates, %.0f commits/s, %d commit retries after conflicts\n",
		res.Churn.Round(time.Millisecond), res.Creates, res.Deletes, res.Retries,
		float64(res.Ops)/res.Churn.Seconds(), res.CommitRetry)
	r, err := d.Report(ctx, "after churn")
	if err != nil {
		return nil, err
	}
	res.Reports = append(res.Reports, r)
	if d.Cfg.Maintain != nil {
		if err := d.Cfg.Maintain(ctx, d); err != nil {
			return nil, fmt.Errorf("maintain: %w", err)
		}
		if r, err = d.Report(ctx, "after maintain"); err != nil {
			return nil, err
		}
		res.Reports = append(res.Reports, r)
	}
	res.Elapsed = time.Since(d.started)
	fmt.Fprintf(d.Cfg.Out, "elapsed: %s\n", res.Elapsed.Round(time.Millisecond))
	return res, nil
}

// Setup wipes Cfg.Dir and creates the empty registry table in it.
func Setup(ctx context.Context, cfg Config) (*Demo, error) {
	if cfg.Dir == "" {
		cfg.Dir = filepath.Join("demo-data", "registry")
	}
	if cfg.Ops <= 0 {
		cfg.Ops = 2000
	}
	if cfg.Writers <= 0 {
		cfg.Writers = 4
	}
	if cfg.Seed == 0 {
		cfg.Seed = 1
	}
	if cfg.Out == nil {
		cfg.Out = io.Discard
	}
	if err := wipe(cfg.Dir); err != nil {
		return nil, err
	}
	// The store is rooted at the table's parent, the warehouse, so that the
	// maintenance step can keep its catalog (_registry, _stats) beside the table.
	abs, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, err
	}
	disk, err := objstore.NewDisk(filepath.Dir(abs))
	if err != nil {
		return nil, err
	}
	d := &Demo{Cfg: cfg, Store: objstore.NewCounting(objstore.WithLatency(disk, cfg.Latency)), Raw: disk,
		Root: filepath.Base(abs), started: time.Now()}
	if _, err := table.Create(ctx, d.Store, d.Root, Schema, "name", cfg.Options); err != nil {
		return nil, err
	}
	for i := range cfg.Writers {
		d.writers = append(d.writers, &writer{
			id:   i + 1,
			rng:  rand.New(rand.NewPCG(cfg.Seed, uint64(i+1))),
			live: map[string]struct{}{},
		})
	}
	return d, nil
}

// wipe removes dir if it is empty or holds a tablekeep table (never any
// other directory: --dir / must not be a disaster).
func wipe(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if len(entries) > 0 {
		if st, err := os.Stat(filepath.Join(dir, strings.TrimSuffix(table.VersionsPrefix, "/"))); err != nil || !st.IsDir() {
			return fmt.Errorf("%s is not empty and holds no tablekeep table: refusing to wipe it", dir)
		}
	}
	return os.RemoveAll(dir)
}

// writer is one worker: its own table handle and the names it created.
// Names are per writer, so each writer's model is exact however commits
// interleave; the table's rows are the union of the writers' live sets.
type writer struct {
	id      int
	rng     *rand.Rand
	t       *table.Table
	seq     int
	live    map[string]struct{}
	names   []string // live names, for random picks
	creates int
	deletes int
	retries int

	commitRetries int
}

// Churn runs ops more writes across the writers.
func (d *Demo) Churn(ctx context.Context, ops int) error {
	var bar *progressbar.ProgressBar
	if d.Cfg.Progress {
		bar = progressbar.NewOptions(ops,
			progressbar.OptionSetWriter(cmp.Or[io.Writer](d.Cfg.ProgressOut, d.Cfg.Out)),
			progressbar.OptionSetDescription("churn"),
			progressbar.OptionShowCount(),
			progressbar.OptionShowIts(),
			progressbar.OptionSetItsString("commits"),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionClearOnFinish(),
		)
	}
	var next atomic.Int64
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, len(d.writers))
	var wg sync.WaitGroup
	for _, w := range d.writers {
		wg.Go(func() {
			if err := d.work(ctx, w, &next, int64(ops), bar); err != nil {
				errs <- fmt.Errorf("writer %d: %w", w.id, err)
				cancel()
			}
		})
	}
	wg.Wait()
	close(errs)
	if bar != nil {
		_ = bar.Finish()
	}
	if err := <-errs; err != nil {
		return err
	}
	d.mu.Lock()
	d.opsDone += ops
	d.mu.Unlock()
	return nil
}

func (d *Demo) work(ctx context.Context, w *writer, next *atomic.Int64, ops int64, bar *progressbar.ProgressBar) error {
	if w.t == nil {
		// Each writer opens its own handle, as a separate worker process would.
		t, err := table.Open(ctx, d.Store, d.Root, d.Cfg.Options)
		if err != nil {
			return err
		}
		w.t = t
	}
	for next.Add(1) <= ops {
		p := w.rng.Float64()
		var res *table.CommitResult
		var err error
		switch {
		case len(w.names) == 0 || p < 0.55: // create: upsert of a new name
			w.seq++
			name := fmt.Sprintf("rollout-w%d-%06d", w.id, w.seq)
			res, err = w.upsert(ctx, name)
			if err == nil {
				w.add(name)
				w.creates++
			}
		case p < 0.90: // delete of a live name
			i := w.rng.IntN(len(w.names))
			name := w.names[i]
			res, err = w.t.Delete(ctx, name)
			if err == nil {
				if res.RowsDeleted != 1 {
					return fmt.Errorf("delete %q deleted %d rows, want 1", name, res.RowsDeleted)
				}
				w.remove(i)
				w.deletes++
			}
		default: // a client retried a create: upsert of a live name
			name := w.names[w.rng.IntN(len(w.names))]
			res, err = w.upsert(ctx, name)
			if err == nil {
				w.retries++
			}
		}
		if err != nil {
			return err
		}
		w.commitRetries += res.Attempts - 1
		if bar != nil {
			_ = bar.Add(1)
		}
	}
	return nil
}

func (w *writer) upsert(ctx context.Context, name string) (*table.CommitResult, error) {
	b := array.NewRecordBuilder(memory.DefaultAllocator, Schema)
	defer b.Release()
	b.Field(0).(*array.StringBuilder).Append(name)
	b.Field(1).(*array.StringBuilder).Append("s3://rollouts/" + name + ".lance")
	b.Field(2).(*array.TimestampBuilder).Append(arrow.Timestamp(time.Now().UnixMicro()))
	rec := b.NewRecordBatch()
	defer rec.Release()
	return w.t.Upsert(ctx, rec)
}

func (w *writer) add(name string) {
	w.live[name] = struct{}{}
	w.names = append(w.names, name)
}

func (w *writer) remove(i int) {
	delete(w.live, w.names[i])
	w.names[i] = w.names[len(w.names)-1]
	w.names = w.names[:len(w.names)-1]
}

// ModelRows is the number of rows the writers' models hold.
func (d *Demo) ModelRows() int {
	n := 0
	for _, w := range d.writers {
		n += len(w.live)
	}
	return n
}

// Report prints the table's state and the requests since the last report
// (or setup), and checks a full scan against the writers' model.
func (d *Demo) Report(ctx context.Context, label string) (Report, error) {
	r := Report{Label: label, ModelRows: d.ModelRows()}
	now := d.Store.Counts()
	d.mu.Lock()
	r.Requests, d.phase = now.Sub(d.phase), now
	d.mu.Unlock()

	// A fresh handle on the raw disk store: the report's own reads are not
	// counted as the phase's requests.
	t, err := table.Open(ctx, d.Raw, d.Root, d.Cfg.Options)
	if err != nil {
		return r, err
	}
	if r.Stats, err = t.Stats(ctx); err != nil {
		return r, err
	}
	snap, err := t.Checkout(ctx, r.Stats.Version)
	if err != nil {
		return r, err
	}
	seen := map[string]bool{}
	var dup string
	err = snap.Scan(ctx, table.ScanOptions{Columns: []string{"name"}}, func(rec arrow.RecordBatch) error {
		names := rec.Column(0).(*array.String)
		for i := range names.Len() {
			if seen[names.Value(i)] {
				dup = names.Value(i)
			}
			seen[names.Value(i)] = true
		}
		return nil
	})
	if err != nil {
		return r, err
	}
	r.ScannedRows = len(seen)
	r.Objects, r.ObjectBytes, err = objstore.DirUsage(d.Cfg.Dir)
	if err != nil {
		return r, err
	}
	byDir, _ := duByDir(d.Cfg.Dir)

	out := d.Cfg.Out
	fmt.Fprintf(out, "\n== %s ==\n", label)
	lines := cli.StatsLines(r.Stats)
	lines = append(lines,
		[2]string{"objects on disk", fmt.Sprintf("%d files, %s (%s)", r.Objects, cli.HumanBytes(r.ObjectBytes), byDir)},
		[2]string{"requests", r.Requests.String()},
	)
	if err := d.openGet(ctx, &r); err != nil {
		return r, err
	}
	if r.OpenGetPath.RoundTrips() > 0 {
		lines = append(lines, [2]string{"open + get by key", fmt.Sprintf("%s; %s, took %s",
			r.OpenGet, r.OpenGetPath, r.OpenGetTime.Round(time.Millisecond))})
	}
	check := "OK"
	switch {
	case dup != "":
		check = fmt.Sprintf("MISMATCH: key %q appears twice", dup)
	case r.ScannedRows != r.ModelRows:
		check = "MISMATCH"
	}
	lines = append(lines, [2]string{"rows check", fmt.Sprintf("scan %d, model %d: %s", r.ScannedRows, r.ModelRows, check)})
	if err := cli.PrintKV(out, lines); err != nil {
		return r, err
	}
	if check != "OK" {
		return r, fmt.Errorf("%s: rows check failed: %s", label, check)
	}
	// Every model name must be live.
	for _, w := range d.writers {
		for name := range w.live {
			if !seen[name] {
				return r, fmt.Errorf("%s: row %q missing from the table", label, name)
			}
		}
	}
	return r, nil
}

// openGet opens the table and gets one live name, as a reader would, with
// the run's latency but apart from Store's counts.
func (d *Demo) openGet(ctx context.Context, r *Report) error {
	var name string
	for _, w := range d.writers {
		if len(w.names) > 0 {
			name = w.names[0]
			break
		}
	}
	if name == "" {
		return nil
	}
	cnt := objstore.NewCounting(d.Raw)
	tr := objstore.NewPathTracker(objstore.WithLatency(cnt, d.Cfg.Latency), d.Cfg.Latency)
	start := time.Now()
	t, err := table.Open(ctx, tr, d.Root, d.Cfg.Options)
	if err != nil {
		return err
	}
	rec, err := t.Snapshot().Get(ctx, name)
	if err != nil {
		return fmt.Errorf("get %q: %w", name, err)
	}
	rec.Release()
	r.OpenGetTime, r.OpenGet, r.OpenGetPath = time.Since(start), cnt.Counts(), tr.Path()
	return nil
}

// duByDir renders file counts per top-level directory.
func duByDir(dir string) (string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	var parts []string
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		n, _, err := objstore.DirUsage(filepath.Join(dir, e.Name()))
		if err != nil {
			return "", err
		}
		parts = append(parts, fmt.Sprintf("%s %d", e.Name(), n))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", "), nil
}
