package catalog

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/tablekeep/tablekeep/shared/dataset"
	"github.com/tablekeep/tablekeep/shared/internal/testkit"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/table"
)

func openCatalog(t *testing.T, st objstore.Store) *Catalog {
	t.Helper()
	c, err := Open(context.Background(), st, "wh", table.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// registryVersion is _registry's latest version and whether it has the
// format column.
func registryVersion(t *testing.T, c *Catalog) (uint64, bool) {
	t.Helper()
	m, err := c.registry.Refresh(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return m.Version, m.Schema.HasField(FormatField.Name)
}

// formats resolves every name, checks Tables agrees, and returns the formats.
func formats(t *testing.T, c *Catalog, names ...string) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	for _, n := range names {
		ref, err := c.Resolve(ctx, n)
		if err != nil {
			t.Fatalf("resolve %s: %v", n, err)
		}
		out[n] = ref.Format
	}
	refs, err := c.Tables(ctx)
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]string{}
	for _, r := range refs {
		listed[r.Name] = r.Format
	}
	for n, f := range out {
		if lf, ok := listed[n]; !ok || lf != f {
			t.Fatalf("Tables lists %s as %q (listed %v), Resolve as %q", n, lf, ok, f)
		}
	}
	return out
}

func sameFormats(t *testing.T, got, want map[string]string) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("formats %v, want %v", got, want)
	}
}

// TestRegisterFormatFresh: on a fresh warehouse the first Lance
// registration adds the format column (one commit more); both formats
// resolve; the system tables stay tablekeep's.
func TestRegisterFormatFresh(t *testing.T) {
	ctx := context.Background()
	c := openCatalog(t, testkit.DiskStore(t))
	v0, has := registryVersion(t, c)
	if has {
		t.Fatal("a fresh registry has the format column")
	}
	if err := c.RegisterFormat(ctx, "ds", "lance/ds", maintenance.DefaultPolicy(), "lance"); err != nil {
		t.Fatal(err)
	}
	v1, has := registryVersion(t, c)
	if !has || v1 != v0+2 {
		t.Fatalf("after the first lance registration: version %d (was %d), format column %v; want +2 (add-columns, upsert) and the column", v1, v0, has)
	}
	if err := c.Register(ctx, "tk", "tables/tk", maintenance.DefaultPolicy()); err != nil {
		t.Fatal(err)
	}
	if err := c.RegisterFormat(ctx, "ds2", "lance/ds2", maintenance.DefaultPolicy(), "LANCE"); err != nil {
		t.Fatal(err)
	}
	if err := c.RegisterFormat(ctx, "tk2", "tables/tk2", maintenance.DefaultPolicy(), "tablekeep"); err != nil {
		t.Fatal(err)
	}
	if v2, _ := registryVersion(t, c); v2 != v1+3 {
		t.Fatalf("three more registrations: version %d, want %d (one commit each)", v2, v1+3)
	}
	sameFormats(t, formats(t, c, "ds", "ds2", "tk", "tk2", RegistryName, StatsName),
		map[string]string{"ds": "lance", "ds2": "lance", "tk": "", "tk2": "", RegistryName: "", StatsName: ""})
	ref, _ := c.Resolve(ctx, "ds")
	if ref.Root != "wh/lance/ds/" {
		t.Fatalf("root %q", ref.Root)
	}
	// Another handle (a fresh process) reads the same.
	sameFormats(t, formats(t, openCatalog(t, c.store), "ds", "tk"), map[string]string{"ds": "lance", "tk": ""})
}

// TestRegisterFormatExistingWarehouse: a warehouse whose registry predates
// the column (tablekeep tables only) keeps RegistrySchema exactly until a
// Lance dataset is registered; its older rows then read as tablekeep.
func TestRegisterFormatExistingWarehouse(t *testing.T) {
	ctx := context.Background()
	st := testkit.DiskStore(t)
	c := openCatalog(t, st)
	regs := []Registration{
		{Name: "a", Rel: "tables/a", Policy: maintenance.DefaultPolicy()},
		{Name: "b", Rel: "tables/b", Policy: maintenance.DefaultPolicy(), Format: "tablekeep"},
	}
	if err := c.RegisterBatch(ctx, regs); err != nil {
		t.Fatal(err)
	}
	if err := c.Register(ctx, "c", "tables/c", maintenance.DefaultPolicy()); err != nil {
		t.Fatal(err)
	}
	m, err := c.registry.Refresh(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !m.Schema.Equal(RegistrySchema) {
		t.Fatalf("registry schema %s, want RegistrySchema (byte-identical to releases before the format column)", m.Schema)
	}
	before := m.Version
	// Re-registering a tablekeep table (a policy change) stays one commit.
	p := maintenance.DefaultPolicy()
	p.KeepLast = 3
	if err := c.Register(ctx, "a", "tables/a", p); err != nil {
		t.Fatal(err)
	}
	// A second handle opened before the column exists.
	old := openCatalog(t, st)
	if err := c.RegisterFormat(ctx, "ds", "lance/ds", maintenance.DefaultPolicy(), "lance"); err != nil {
		t.Fatal(err)
	}
	v, has := registryVersion(t, c)
	if !has || v != before+3 {
		t.Fatalf("version %d (column %v), want %d with the column", v, has, before+3)
	}
	sameFormats(t, formats(t, old, "a", "b", "c", "ds"), map[string]string{"a": "", "b": "", "c": "", "ds": "lance"})
	if ref, _ := old.Resolve(ctx, "a"); ref.Policy.KeepLast != 3 {
		t.Fatalf("a: keep last %d", ref.Policy.KeepLast)
	}
	// The handle whose cache predates the column registers on the new schema.
	if err := old.Register(ctx, "d", "tables/d", maintenance.DefaultPolicy()); err != nil {
		t.Fatal(err)
	}
	sameFormats(t, formats(t, c, "a", "d", "ds"), map[string]string{"a": "", "d": "", "ds": "lance"})
}

// TestRegisterFormatRefusals: unknown formats and format changes are typed
// errors and commit nothing; after Unregister the name may take the other
// format; a policy change that keeps the format is fine.
func TestRegisterFormatRefusals(t *testing.T) {
	ctx := context.Background()
	c := openCatalog(t, testkit.DiskStore(t))
	p := maintenance.DefaultPolicy()
	v0, _ := registryVersion(t, c)
	for _, f := range []string{"delta", "iceberg", "lance2"} {
		err := c.RegisterFormat(ctx, "x", "x", p, f)
		if !errors.Is(err, maintenance.ErrUnknownFormat) {
			t.Fatalf("format %q: %v, want ErrUnknownFormat", f, err)
		}
	}
	if err := c.RegisterFormat(ctx, RegistryName, RegistryName, p, "lance"); !errors.Is(err, ErrSystemTable) {
		t.Fatalf("lance _registry: %v, want ErrSystemTable", err)
	}
	if v, has := registryVersion(t, c); v != v0 || has {
		t.Fatalf("refusals committed: version %d (was %d), column %v", v, v0, has)
	}
	// Without the format column: a tablekeep table cannot become Lance.
	if err := c.Register(ctx, "tk", "tables/tk", p); err != nil {
		t.Fatal(err)
	}
	if err := c.RegisterFormat(ctx, "tk", "tables/tk", p, "lance"); !errors.Is(err, ErrFormatChange) {
		t.Fatalf("tablekeep -> lance: %v, want ErrFormatChange", err)
	}
	if err := c.RegisterFormat(ctx, "ds", "lance/ds", p, "lance"); err != nil {
		t.Fatal(err)
	}
	v1, _ := registryVersion(t, c)
	// With it: neither way, alone or in a batch (nothing of the batch lands).
	if err := c.RegisterFormat(ctx, "tk", "tables/tk", p, "lance"); !errors.Is(err, ErrFormatChange) {
		t.Fatalf("tablekeep -> lance: %v, want ErrFormatChange", err)
	}
	if err := c.Register(ctx, "ds", "lance/ds", p); !errors.Is(err, ErrFormatChange) {
		t.Fatalf("lance -> tablekeep: %v, want ErrFormatChange", err)
	}
	batch := []Registration{{Name: "new", Rel: "tables/new", Policy: p}, {Name: "ds", Rel: "lance/ds", Policy: p, Format: "tablekeep"}}
	if err := c.RegisterBatch(ctx, batch); !errors.Is(err, ErrFormatChange) {
		t.Fatalf("batch with a change: %v, want ErrFormatChange", err)
	}
	if v, _ := registryVersion(t, c); v != v1 {
		t.Fatalf("refused changes committed: version %d, want %d", v, v1)
	}
	// The same format again (a policy change) is accepted.
	p3 := p
	p3.KeepLast = 3
	if err := c.RegisterFormat(ctx, "ds", "lance/ds", p3, "lance"); err != nil {
		t.Fatal(err)
	}
	if ref, _ := c.Resolve(ctx, "ds"); ref.Policy.KeepLast != 3 || ref.Format != FormatLance {
		t.Fatalf("ds: %+v", ref)
	}
	// Unregistered first, the name may take the other format.
	if err := c.Unregister(ctx, "ds"); err != nil {
		t.Fatal(err)
	}
	if err := c.Register(ctx, "ds", "tables/ds", p); err != nil {
		t.Fatal(err)
	}
	sameFormats(t, formats(t, c, "ds", "tk"), map[string]string{"ds": "", "tk": ""})
}

// TestRegisterFormatManyNamesScan: a batch of more names than the registry
// has fragments checks formats with one scan and still refuses a change.
func TestRegisterFormatManyNamesScan(t *testing.T) {
	ctx := context.Background()
	c := openCatalog(t, testkit.DiskStore(t))
	p := maintenance.DefaultPolicy()
	if err := c.RegisterFormat(ctx, "ds", "lance/ds", p, "lance"); err != nil {
		t.Fatal(err)
	}
	var regs []Registration
	for i := range 20 {
		regs = append(regs, Registration{Name: fmt.Sprintf("t%02d", i), Rel: fmt.Sprintf("tables/t%02d", i), Policy: p})
	}
	if err := c.RegisterBatch(ctx, regs); err != nil {
		t.Fatal(err)
	}
	regs = append(regs, Registration{Name: "ds", Rel: "lance/ds", Policy: p})
	if err := c.RegisterBatch(ctx, regs); !errors.Is(err, ErrFormatChange) {
		t.Fatalf("%v, want ErrFormatChange", err)
	}
	got := formats(t, c, "ds", "t00", "t19")
	sameFormats(t, got, map[string]string{"ds": "lance", "t00": "", "t19": ""})
}

// TestRegisterFormatConcurrent: two catalogs on one store register
// different tables at once, one of them Lance datasets (which adds the
// column under the other's feet); every registration survives.
func TestRegisterFormatConcurrent(t *testing.T) {
	ctx := context.Background()
	st := testkit.DiskStore(t)
	c1 := openCatalog(t, st)
	c2 := openCatalog(t, st)
	const n = 6
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := range n {
			errs <- c1.Register(ctx, fmt.Sprintf("tk%d", i), fmt.Sprintf("tables/tk%d", i), maintenance.DefaultPolicy())
		}
	}()
	go func() {
		defer wg.Done()
		for i := range n {
			errs <- c2.RegisterFormat(ctx, fmt.Sprintf("ds%d", i), fmt.Sprintf("lance/ds%d", i), maintenance.DefaultPolicy(), "lance")
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]string{}
	var names []string
	for i := range n {
		want[fmt.Sprintf("tk%d", i)], want[fmt.Sprintf("ds%d", i)] = "", "lance"
		names = append(names, fmt.Sprintf("tk%d", i), fmt.Sprintf("ds%d", i))
	}
	sameFormats(t, formats(t, openCatalog(t, st), names...), want)
	// Exactly one add-columns commit.
	adds := 0
	vs, _ := c1.registry.Versions(ctx)
	for _, v := range vs {
		s, err := c1.registry.Checkout(ctx, v.Version)
		if err != nil {
			t.Fatal(err)
		}
		if s.Manifest().Op.Kind == dataset.OpAddColumns {
			adds++
		}
	}
	if adds != 1 {
		t.Fatalf("%d add-columns commits, want 1", adds)
	}
}

// TestRegisterFormatRaceDeterministic: a handle whose cache predates the
// column cannot add it twice (its AddColumns rebases and is refused), and
// registers on the column another handle added.
func TestRegisterFormatRaceDeterministic(t *testing.T) {
	ctx := context.Background()
	st := testkit.DiskStore(t)
	c1 := openCatalog(t, st)
	c2 := openCatalog(t, st)
	if err := c2.RegisterFormat(ctx, "ds", "lance/ds", maintenance.DefaultPolicy(), "lance"); err != nil {
		t.Fatal(err)
	}
	// c1's cache lacks the column: its AddColumns attempt would fail as a duplicate.
	if _, err := c1.registry.AddColumns(ctx, FormatField); !errors.Is(err, table.ErrInvalidSchema) {
		t.Fatalf("second add of the column: %v, want ErrInvalidSchema", err)
	}
	if err := c1.RegisterFormat(ctx, "ds2", "lance/ds2", maintenance.DefaultPolicy(), "lance"); err != nil {
		t.Fatal(err)
	}
	sameFormats(t, formats(t, c1, "ds", "ds2"), map[string]string{"ds": "lance", "ds2": "lance"})
}
