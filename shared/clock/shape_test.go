package clock_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOneClockShape: no non-test Go file outside shared/clock declares a
// field, parameter or type of a clock's old shapes, func() time.Time (a
// Now) or func(context.Context, time.Duration) error (a Sleep), nor an
// alias of clock.Clock (lock.Clock was one): time is read and waited on
// through a clock.Clock. A new such shape fails here; take a clock.Clock.
func TestOneClockShape(t *testing.T) {
	root := moduleRoot(t)
	var found []string
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			name := d.Name()
			if rel == "shared/clock" || name == "testdata" || name == "node_modules" || name == "vendor" ||
				(rel != "." && strings.HasPrefix(name, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			var typ ast.Expr
			switch n := n.(type) {
			case *ast.Field:
				typ = n.Type
			case *ast.TypeSpec:
				if n.Assign.IsValid() && isSel(n.Type, "clock", "Clock") {
					found = append(found, fset.Position(n.Pos()).String()+": an alias of clock.Clock")
					return true
				}
				typ = n.Type
			case *ast.ValueSpec:
				typ = n.Type
			default:
				return true
			}
			if shape := clockShape(typ); shape != "" {
				found = append(found, fset.Position(n.Pos()).String()+": "+shape)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		t.Errorf("%s: take a clock.Clock (shared/clock) instead", strings.TrimPrefix(f, root+string(filepath.Separator)))
	}
}

// clockShape names typ's shape if it is a bare Now or Sleep function type.
func clockShape(typ ast.Expr) string {
	ft, ok := typ.(*ast.FuncType)
	if !ok || ft.Results == nil || len(ft.Results.List) != 1 || len(ft.Results.List[0].Names) > 1 {
		return ""
	}
	var params []ast.Expr
	for _, p := range ft.Params.List {
		for range max(1, len(p.Names)) {
			params = append(params, p.Type)
		}
	}
	res := ft.Results.List[0].Type
	switch {
	case len(params) == 0 && isSel(res, "time", "Time"):
		return "func() time.Time"
	case len(params) == 2 && isSel(params[0], "context", "Context") && isSel(params[1], "time", "Duration") && isIdent(res, "error"):
		return "func(context.Context, time.Duration) error"
	}
	return ""
}

func isSel(e ast.Expr, pkg, name string) bool {
	s, ok := e.(*ast.SelectorExpr)
	return ok && isIdent(s.X, pkg) && s.Sel.Name == name
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}

func moduleRoot(t *testing.T) string {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}
