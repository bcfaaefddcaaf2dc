package table

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/internal/fakeclock"
	"github.com/tablekeep/tablekeep/shared/internal/testkit"
	"github.com/tablekeep/tablekeep/shared/objstore"
)

// TestFloorProof (issue 29 item 4): which floor read is trusted for
// deletion (docs/format.md 2.4, "Which floor is trusted"): the highest
// marker's only when it is stamped with the stamp its version's manifest
// is listed with; the legacy object and unstamped markers never (floor 0,
// their value Unproven); a stamped marker whose version is listed with
// another stamp, or an unstamped one older than its manifest by more than
// MaxClockSkew, is another history's (Other). Malformed stamped names are
// strays.
func TestFloorProof(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	man := map[uint64]ManifestStamp{} // the listing: version -> stamp
	modAt := map[uint64]time.Time{}
	list := func(v uint64, size int64, at time.Time) { man[v], modAt[v] = stampAt(size, at), at }
	list(20, 500, t0.Add(700*time.Millisecond))
	list(25, 600, t0.Add(time.Minute))
	listed := func(v uint64) (int64, time.Time, bool) {
		s, ok := man[v]
		return s.Size, modAt[v], ok
	}
	marker := func(key string, at time.Time) objstore.ObjectInfo {
		return objstore.ObjectInfo{Key: "t/" + key, LastModified: at}
	}
	stamped := func(f uint64, s ManifestStamp) string { return stampedMarkerKey(f, s) }
	cases := []struct {
		name    string
		read    FloorRead
		floor   uint64
		unprov  uint64
		other   bool
		readers uint64
	}{
		{name: "none"},
		{name: "legacy only", read: FloorRead{legacy: true, legacyFloor: 25}, unprov: 25},
		{name: "unstamped, within skew", read: FloorRead{markers: []objstore.ObjectInfo{marker(floorMarkerKey(25), t0.Add(time.Minute-3*time.Second))}}, unprov: 25},
		{name: "unstamped, older than its manifest", read: FloorRead{markers: []objstore.ObjectInfo{marker(floorMarkerKey(25), t0)}}, unprov: 25, other: true},
		{name: "stamped", read: FloorRead{markers: []objstore.ObjectInfo{marker(stamped(20, man[20]), t0.Add(time.Hour))}}, floor: 20},
		{name: "stamped, another manifest", read: FloorRead{markers: []objstore.ObjectInfo{marker(stamped(25, ManifestStamp{Size: 600, Unix: t0.Unix()}), t0)}}, other: true},
		{name: "stamped, not listed", read: FloorRead{markers: []objstore.ObjectInfo{marker(stamped(30, man[25]), t0)}}, unprov: 30},
		{name: "unstamped above stamped, legacy below", read: FloorRead{legacy: true, legacyFloor: 18, markers: []objstore.ObjectInfo{
			marker(floorMarkerKey(25), t0.Add(time.Hour)), marker(stamped(20, man[20]), t0.Add(time.Hour))}}, floor: 20, unprov: 25},
	}
	for _, c := range cases {
		p := c.read.Prove(listed)
		if p.Floor != c.floor || p.Unproven != c.unprov || (p.Other != "") != c.other {
			t.Errorf("%s: %+v, want floor %d, unproven %d, other %v", c.name, p, c.floor, c.unprov, c.other)
		}
	}
	// docs/format.md 2.4's example.
	ex := StampOf(objstore.ObjectInfo{Size: 567, LastModified: time.Date(2026, 12, 4, 20, 55, 5, 4e8, time.UTC)})
	if k := stampedMarkerKey(25, ex); k != "_refs/floor/18446744073709551590-567-1796417705" {
		t.Errorf("example marker %s", k)
	}
	// Names: the stamp's numbers are canonical decimals; anything else is
	// not a marker (a stray, 2.4).
	for name, ok := range map[string]bool{
		floorMarkerKey(7): true, stampedMarkerKey(7, ManifestStamp{0, 0}): true, stampedMarkerKey(7, ManifestStamp{512, 1796400000}): true,
		floorMarkerKey(7) + "-": false, floorMarkerKey(7) + "-1": false, floorMarkerKey(7) + "-01-2": false, floorMarkerKey(7) + "-1-+2": false,
		floorMarkerKey(7) + "-1-2-3": false, floorMarkerKey(7) + ".json": false, floorMarkerKey(7) + "-1--2": false,
	} {
		m, got := parseMarkerName(name)
		if got != ok || ok && m.floor != 7 {
			t.Errorf("parse %q: %+v %v, want %v", name, m, got, ok)
		}
	}
}

// TestSetFloorStamps: SetFloor stamps its marker with the manifest of its
// version as listed (one LIST more) once that manifest is older than
// FloorStampAge, and writes an unstamped marker (honoured by readers,
// trusted by no planner) for a version not stored or too new.
func TestSetFloorStamps(t *testing.T) {
	ctx := context.Background()
	clk := fakeclock.New(time.Now())
	st := fakeclock.NewStore(testkit.DiskStore(t), clk)
	tb := must(Create(ctx, st, "t", regSchema, "name", Options{Clock: clk}))
	for range 3 {
		clk.Advance(time.Minute)
		upsertRows(t, tb, regRow(1))
	}
	clk.Advance(FloorStampAge) // version 4 is exactly FloorStampAge old: too new
	c := objstore.NewCounting(st)
	h := must(Open(ctx, c, "t", Options{Clock: clk}))
	c.Reset()
	noErr(t, h.SetFloor(ctx, 2))
	if got := c.Counts(); got.List != 2 || got.Put != 1 {
		t.Fatalf("SetFloor: %s, want 2 LISTs (the floor, the manifest) and 1 PUT", got)
	}
	noErr(t, h.SetFloor(ctx, 4))
	noErr(t, h.SetFloor(ctx, 9))
	var names []string
	_ = objstore.ListAll(ctx, st, "t/"+floorDir, "", func(o objstore.ObjectInfo) error {
		names = append(names, strings.TrimPrefix(o.Key, "t/"))
		return nil
	})
	m2 := must(st.Head(ctx, "t/"+manifestKey(2)))
	want := []string{floorMarkerKey(9), floorMarkerKey(4), stampedMarkerKey(2, StampOf(m2))}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Fatalf("markers %v, want %v", names, want)
	}
	r := must(h.ReadFloor(ctx))
	p := r.Prove(func(v uint64) (int64, time.Time, bool) {
		o, err := st.Head(ctx, "t/"+manifestKey(v))
		return o.Size, o.LastModified, err == nil
	})
	if r.Floor != 9 || p.Floor != 2 || p.Unproven != 9 {
		t.Fatalf("readers' floor %d, proof %+v; want 9, trusted 2, unproven 9", r.Floor, p)
	}
}

// TestFloorStampListAndHead: a manifest's stamp is the same from a LIST
// (the planner's) and from a HEAD (the cleaner's), on disk and on S3
// (versitygw: a LIST may date objects below the second, a HEAD to the
// second; the stamp truncates both), so a stamped marker SetFloor wrote
// is trusted by either.
func TestFloorStampListAndHead(t *testing.T) {
	storeKinds(t, func(t *testing.T, newStore func(*testing.T) objstore.Store) {
		ctx := context.Background()
		st := newStore(t)
		clk := fakeclock.New(time.Now())
		tb := must(Create(ctx, st, "t", regSchema, "name", Options{Clock: clk}))
		upsertRows(t, tb, regRow(1))
		clk.Advance(time.Minute) // the manifests are FloorStampAge old by the writer's clock
		noErr(t, tb.SetFloor(ctx, 2))
		r := must(tb.ReadFloor(ctx))
		head := must(ManifestInfoAt(ctx, st, "t", 2))
		p := r.Prove(func(v uint64) (int64, time.Time, bool) { return head.Size, head.LastModified, v == 2 })
		vs := must(tb.Versions(ctx))
		if p.Floor != 2 || p.Other != "" || StampOf(head) != StampOfListed(vs[1].ManifestBytes, vs[1].Time) {
			t.Fatalf("proof %+v; HEAD %v, LIST %v", p, head, vs[1])
		}
	})
}
