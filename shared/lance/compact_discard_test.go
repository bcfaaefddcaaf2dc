package lance_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/tablekeep/tablekeep/shared/lance"
	"github.com/tablekeep/tablekeep/shared/lock"
	"github.com/tablekeep/tablekeep/shared/objstore"
)

// putRecorder is a Faulty store over dir's Disk that records every key
// the compaction puts (LanceDB, run by node, writes to dir directly).
type putRecorder struct {
	*objstore.Faulty
	mu   sync.Mutex
	keys []string
}

func newPutRecorder(t *testing.T, dir string) *putRecorder {
	t.Helper()
	disk, err := objstore.NewDisk(dir)
	if err != nil {
		t.Fatal(err)
	}
	return &putRecorder{Faulty: objstore.NewFaulty(disk)}
}

func (p *putRecorder) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	p.mu.Lock()
	p.keys = append(p.keys, key)
	p.mu.Unlock()
	return p.Faulty.PutIfAbsent(ctx, key, data)
}

// written returns the keys the compaction put but its manifests'.
func (p *putRecorder) written() []string {
	var out []string
	for _, k := range p.keys {
		if !strings.Contains(k, lance.VersionsDir) {
			out = append(out, k)
		}
	}
	return out
}

// left returns the keys the compaction wrote under data/, _deletions/ and
// _transactions/ that are still there.
func (p *putRecorder) left(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	for _, k := range p.keys {
		if !strings.Contains(k, lance.DataDir) && !strings.Contains(k, lance.DeletionsDir) && !strings.Contains(k, lance.TransactionsDir) {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, k)); err == nil {
			out = append(out, k)
		}
	}
	return out
}

// referenced is the keys (under root) the latest version references.
func referenced(t *testing.T, ds *lance.Dataset, root string) map[string]bool {
	t.Helper()
	ctx := context.Background()
	vs, err := ds.ListVersions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m, err := ds.ReadManifest(ctx, vs[len(vs)-1])
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, k := range m.Keys() {
		out[root+"/"+k] = true
	}
	return out
}

// TestCompactDiscardsWhatItLost: a Rewrite that loses deletes the files it
// wrote at once (lance#7207: Lance leaves them for 7 days). LanceDB commits
// a restore, or its own optimize() of the same fragments, right before the
// manifest PUT (every group conflicts), or the lease ends right before it:
// nothing the compaction wrote is left under data/, _deletions/ or
// _transactions/, and LanceDB reads the latest as its own commit left it.
// An append commits on the second attempt: only the first attempt's
// transaction and deletion files are deleted, and every file the committed version
// references is there (LanceDB verifies it).
func TestCompactDiscardsWhatItLost(t *testing.T) {
	ctx := context.Background()
	base, _ := mixedDataset(t, 12)
	before := dumpDataset(t, base)
	latest := before.Versions[len(before.Versions)-1]
	for _, tc := range []struct {
		op, arg   string // LanceDB's commit before the PUT ("" none)
		fence     bool   // the lease ends before the PUT
		committed int
	}{
		{op: "restore", arg: strconv.FormatUint(latest-3, 10)},
		{op: "optimize"},
		{fence: true},
		{op: "add", arg: "777", committed: 1},
	} {
		name := tc.op
		if tc.fence {
			name = "fence"
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			copyDir(t, base, dir)
			store := newPutRecorder(t, dir)
			var once sync.Once
			store.SetBefore(func(_ int64, op objstore.Op) error {
				if tc.op != "" && op.Kind == objstore.KindPut && strings.Contains(op.Key, lance.VersionsDir) {
					once.Do(func() { node(t, nil, "op", dir, "t", tc.op, tc.arg) })
				}
				return nil
			})
			opts := lance.CompactOptions{TargetRows: 10000}
			if tc.fence {
				opts.MaxGroups = 1
				calls := 0
				opts.Fence = func(context.Context) error {
					if calls++; calls == 2 { // 1: before the group; 2: before the PUT
						return lock.ErrLeaseExpired
					}
					return nil
				}
			}
			ds := lance.Open(store, "t.lance")
			rep, err := ds.Compact(ctx, opts)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Committed != tc.committed || rep.DiscardFailed != "" {
				t.Fatalf("committed %d, want %d: %+v", rep.Committed, tc.committed, rep)
			}
			ours := store.written()
			refs := referenced(t, ds, "t.lance")
			want := 0 // every file written that the latest does not reference
			for _, k := range ours {
				if !refs[k] {
					want++
				}
			}
			if rep.Discarded != want || want == 0 || (tc.committed == 0 && want != len(ours)) {
				t.Fatalf("discarded %d of %d files written, want %d", rep.Discarded, len(ours), want)
			}
			for _, k := range store.left(t, dir) {
				if !refs[k] {
					t.Errorf("left %s, which the latest does not reference", k)
				}
			}
			for k := range refs {
				if _, err := os.Stat(filepath.Join(dir, k)); err != nil && !strings.HasSuffix(k, "/") {
					t.Errorf("the latest references %s: %v", k, err)
				}
			}
			after := dumpDataset(t, dir)
			for _, v := range before.Versions {
				k := strconv.FormatUint(v, 10)
				if !slices.Equal(after.Rows[k], before.Rows[k]) {
					t.Fatalf("version %d changed", v)
				}
			}
			if tc.committed > 0 {
				verifyDataset(t, dir)
			}
		})
	}
}

// TestCompactLostResponseKeepsFiles: the manifest PUT lands but its
// response is lost. An unknown outcome (a transport error) deletes
// nothing, and LanceDB reads the version it committed exactly. A refusal
// that is really the compaction's own write (a retried PUT refused by the
// first one, without the read-back objstore.S3 does) is recognized by its
// transaction file in the manifest that won: committed, nothing deleted.
func TestCompactLostResponseKeepsFiles(t *testing.T) {
	ctx := context.Background()
	base, _ := mixedDataset(t, 12)
	before := dumpDataset(t, base)
	latest := before.Versions[len(before.Versions)-1]
	for _, tc := range []struct {
		name    string
		err     error
		wantErr bool
	}{
		{"unknown", errors.New("connection reset after the body was sent"), true},
		{"refused-by-itself", fmt.Errorf("put-if-absent: %w", objstore.ErrExists), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			copyDir(t, base, dir)
			store := newPutRecorder(t, dir)
			var once sync.Once
			store.SetAfter(func(_ int64, op objstore.Op) (err error) {
				if op.Kind == objstore.KindPut && strings.Contains(op.Key, lance.VersionsDir) {
					once.Do(func() { err = tc.err })
				}
				return err
			})
			ds := lance.Open(store, "t.lance")
			rep, err := ds.Compact(ctx, lance.CompactOptions{TargetRows: 10000})
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v: %+v", err, rep)
			}
			if !tc.wantErr && (rep.Committed != 1 || rep.Version != latest+1) {
				t.Fatalf("the landed PUT is not reported committed: %+v", rep)
			}
			if rep.Discarded != 0 || rep.Attempts != 1 {
				t.Fatalf("discarded %d files after %d PUTs", rep.Discarded, rep.Attempts)
			}
			ours := store.written()
			if left := store.left(t, dir); !slices.Equal(left, ours) {
				t.Fatalf("left %v of %v", left, ours)
			}
			after := dumpDataset(t, dir)
			checkCompacted(t, before, after, latest+1)
			verifyDataset(t, dir)
		})
	}
}
