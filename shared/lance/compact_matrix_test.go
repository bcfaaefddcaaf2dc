package lance_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tablekeep/tablekeep/shared/internal/testkit"
	"github.com/tablekeep/tablekeep/shared/lance"
)

// readAll is the fixture's `readall`: per table, per listed version, the
// rows LanceDB reads (raw JSON, sorted by id) or the error it gives.
func readAll(t testing.TB, dir string, names []string) map[string]map[string]json.RawMessage {
	t.Helper()
	out := map[string]map[string]json.RawMessage{}
	node(t, &out, "readall", dir, strings.Join(names, ","))
	return out
}

// matrixRefused are the tables of the type matrix whose group tablekeep
// refuses, each with the sentinel its refusal wraps; every other table
// must be compacted. None today: every type LanceDB 0.31's Node client
// writes, in every storage version, is compacted (2.0 lists too, since
// the splicer's row check follows the schema's levels). A refusal must
// commit nothing: every version LanceDB read before still reads the same.
var matrixRefused = map[string]error{}

// TestCompactTypeMatrix: a table per Arrow type LanceDB stores (every
// integer width signed and unsigned, float32/64, bool, date, timestamp;
// strings short and over 256 bytes, binary, fixed-size binary,
// FixedSizeList<Float32> vectors, List, List<Struct>, nested lists, lists
// of one item a row, Struct, Struct of lists, dictionary, all-null and
// all-empty columns; nulls among the values) x storage version 2.0, 2.1
// and 2.2: 90 tables built by LanceDB in one node run (3 rows, 4 adds of 2
// rows, a delete: 5 fragments, one with a deletion file). tablekeep
// compacts each; LanceDB then reads every version of every table (one node
// run): the versions before read exactly as before, and the compacted one
// reads the rows of the version it compacted. The tables refused are
// exactly matrixRefused (with their typed reasons) and commit nothing.
// Failed before the fix on struct_20: LanceDB answers "Panic in async
// function" for the compacted version (lance-encoding's check_simple_struct:
// "Due to schema we expected a struct column but we received a column with
// 5 pages and right now we only support struct columns with 1 page").
// LargeUtf8 and LargeBinary are missing: LanceDB 0.31's Node client cannot
// write them ("Unable to sanitize type").
func TestCompactTypeMatrix(t *testing.T) {
	base := t.TempDir()
	var m struct {
		Names []string `json:"names"`
	}
	node(t, &m, "matrix", base)
	before := readAll(t, base, m.Names)
	for _, mode := range []struct {
		name string
		drop float64
	}{{"drop", 0.1}, {"carry", 0}} {
		t.Run(mode.name, func(t *testing.T) {
			dir := base // the last mode compacts base itself
			if mode.drop > 0 {
				dir = t.TempDir()
				if err := os.CopyFS(dir, os.DirFS(base)); err != nil {
					t.Fatal(err)
				}
			}
			compactMatrix(t, dir, m.Names, before, lance.CompactOptions{DropDeletedAt: mode.drop})
		})
	}
}

// compactMatrix compacts every table of the matrix under dir with opts
// and checks what LanceDB reads after against before.
func compactMatrix(t *testing.T, dir string, names []string, before map[string]map[string]json.RawMessage, opts lance.CompactOptions) {
	ctx := context.Background()
	store := testkit.DiskStoreAt(t, dir)
	committed := map[string]uint64{}
	var dropped, kept []string
	for _, name := range names {
		rep, err := lance.Open(store, name+".lance").Compact(ctx, opts)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(rep.Groups) != 1 || len(rep.Groups[0].Fragments) != 5 {
			t.Fatalf("%s: groups %v", name, rep.Groups)
		}
		g := rep.Groups[0]
		want, refuse := matrixRefused[name]
		switch {
		case refuse && (rep.Refused != 1 || !errors.Is(g.Refusal, want)):
			t.Errorf("%s: want refused (%v), got %s (%v)", name, want, g.Outcome, g.Refusal)
		case !refuse && rep.Committed != 1:
			t.Errorf("%s: want compacted, got %s", name, g)
		case !refuse:
			committed[name] = rep.Version
		}
		if g.DroppedRows > 0 {
			dropped = append(dropped, name)
		} else if g.DropRefused != "" {
			kept = append(kept, name)
		}
	}
	after := readAll(t, dir, names)
	for _, name := range names {
		b, a := before[name], after[name]
		var vs []int
		for k := range b {
			v, err := strconv.Atoi(k)
			if err != nil {
				t.Fatalf("%s: %s: %s", name, k, b[k])
			}
			vs = append(vs, v)
		}
		slices.Sort(vs)
		latest := strconv.Itoa(vs[len(vs)-1])
		for _, v := range vs {
			k := strconv.Itoa(v)
			if strings.HasPrefix(string(b[k]), `"error`) {
				t.Fatalf("%s version %s: LanceDB cannot read what it wrote: %s", name, k, b[k])
			}
			if string(a[k]) != string(b[k]) {
				t.Errorf("%s version %s: reads %s, before %s", name, k, a[k], b[k])
			}
		}
		nv, ok := committed[name]
		if !ok {
			if len(a) != len(b) {
				t.Errorf("%s: refused, yet %d versions after, %d before", name, len(a), len(b))
			}
			continue
		}
		k := strconv.FormatUint(nv, 10)
		if got := string(a[k]); got != string(b[latest]) {
			t.Errorf("%s: the compacted version %s reads %s, want %s (version %s)", name, k, got, b[latest], latest)
		}
	}
	t.Logf("%d tables, %d compacted, %d refused; deleted rows dropped in %d, kept (a column lanceenc does not filter) in %v",
		len(names), len(committed), len(names)-len(committed), len(dropped), kept)
}
