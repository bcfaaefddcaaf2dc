package catalog

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/tablekeep/tablekeep/shared/internal/testkit"
	"github.com/tablekeep/tablekeep/shared/maintenance"
	"github.com/tablekeep/tablekeep/shared/table"
)

// TestCheckRootAndThreshold: one root, one name; no system directory, no
// nesting; the deleted threshold is a number in [0.001, 1].
func TestCheckRootAndThreshold(t *testing.T) {
	ctx := context.Background()
	st := testkit.DiskStore(t)
	c := openCatalog(t, st)
	schema := arrow.NewSchema([]arrow.Field{{Name: "name", Type: arrow.BinaryTypes.String}}, nil)
	for _, rel := range []string{"t", "a/b", "x/y/z"} {
		if _, err := table.Create(ctx, st, c.TableRoot(rel), schema, "name", table.Options{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.RegisterTable(ctx, "prod", "t", maintenance.DefaultPolicy()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RegisterTable(ctx, "ab", "a/b", maintenance.DefaultPolicy()); err != nil {
		t.Fatal(err)
	}
	for _, c2 := range []struct {
		name, rel string
		want      error
	}{
		{"scratch", "t", ErrAlreadyRegistered}, {"scratch", "t/", ErrAlreadyRegistered},
		{"inner", "a/b/c", ErrNestedRoot}, {"outer", "a", ErrNestedRoot},
		{"x", "_registry", ErrSystemTable}, {"x", "_locks/t", ErrSystemTable}, {"x", "_fleet", ErrSystemTable},
		{"x", "_status", ErrSystemTable}, {"x", "_Status/t", ErrSystemTable},
	} {
		if err := c.CheckRoot(ctx, c2.name, c2.rel); !errors.Is(err, c2.want) {
			t.Errorf("CheckRoot(%s, %s): %v, want %v", c2.name, c2.rel, err, c2.want)
		}
	}
	if err := c.CheckRoot(ctx, "prod", "t"); err != nil {
		t.Errorf("re-registering prod at its own root: %v", err)
	}
	if err := c.CheckRoot(ctx, "xyz", "x/y/z"); err != nil {
		t.Errorf("a root beside the others: %v", err)
	}
	// RegisterBatch (the functions' and the fleet's path) refuses system
	// directories too, but the warehouse's own registrations.
	if err := c.Register(ctx, "x", "_stats", maintenance.DefaultPolicy()); !errors.Is(err, ErrSystemTable) {
		t.Errorf("Register x at _stats: %v", err)
	}
	for _, v := range []float64{math.NaN(), math.Inf(1), -0.5, 0, 1.5, 1e-300} {
		p := maintenance.DefaultPolicy()
		p.DeletedThreshold = v
		if err := ValidatePolicy(p); !errors.Is(err, maintenance.ErrInvalidPolicy) {
			t.Errorf("threshold %v accepted by ValidatePolicy", v)
		}
		if v <= 0 {
			continue // Register fills a zero or negative value with the default (WithDefaults)
		}
		if err := c.Register(ctx, "xyz", "x/y/z", p); !errors.Is(err, maintenance.ErrInvalidPolicy) {
			t.Errorf("threshold %v accepted by Register: %v", v, err)
		}
	}
}

// TestRegisterBatchOneRootOneName: the library's Register and RegisterBatch
// (embedded, the bench, any Go caller) refuse a second name on a root and
// nested roots as the CLI does, against the registry and within a batch;
// before, only the CLI's path checked (RegisterTable), so two names on one
// root went in through catalog.Register and the harshest policy won.
func TestRegisterBatchOneRootOneName(t *testing.T) {
	ctx := context.Background()
	c := openCatalog(t, testkit.DiskStore(t))
	p := maintenance.DefaultPolicy()
	if err := c.Register(ctx, "prod", "t", p); err != nil {
		t.Fatal(err)
	}
	if err := c.Register(ctx, "scratch", "t", p); !errors.Is(err, ErrAlreadyRegistered) {
		t.Fatalf("second name on t: %v, want ErrAlreadyRegistered", err)
	}
	if err := c.Register(ctx, "inner", "t/x", p); !errors.Is(err, ErrNestedRoot) {
		t.Fatalf("root inside t: %v, want ErrNestedRoot", err)
	}
	if err := c.Register(ctx, "prod", "t", p); err != nil {
		t.Fatalf("prod again at its own root: %v", err)
	}
	for _, regs := range [][]Registration{
		{{Name: "a", Rel: "u"}, {Name: "b", Rel: "u"}},
		{{Name: "a", Rel: "u"}, {Name: "v", Rel: "v"}, {Name: "b", Rel: "u/w"}},
	} {
		if err := c.RegisterBatch(ctx, regs); !errors.Is(err, ErrAlreadyRegistered) && !errors.Is(err, ErrNestedRoot) {
			t.Fatalf("batch %v: %v, want a refusal", regs, err)
		}
	}
	if err := c.RegisterBatch(ctx, []Registration{{Name: "a", Rel: "u"}, {Name: "b", Rel: "u2"}}); err != nil {
		t.Fatalf("batch of distinct roots (u, u2: not nested): %v", err)
	}
	refs, err := c.Tables(ctx)
	if err != nil {
		t.Fatal(err)
	}
	roots := map[string]string{}
	for _, r := range refs {
		if other, dup := roots[r.Root]; dup {
			t.Fatalf("root %s registered as %s and %s", r.Root, other, r.Name)
		}
		roots[r.Root] = r.Name
	}
}
