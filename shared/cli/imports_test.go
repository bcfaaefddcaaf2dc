package cli

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

const modulePath = "github.com/tablekeep/tablekeep/shared/"

// TestCLIImportsNeitherAwsfnNorLance: the CLI reaches the functions'
// clients through shared/warehouse and Lance datasets through
// shared/formats. Its code imports neither shared/awsfn nor shared/lance
// (nor a package under it), does not depend on shared/awsfn at all (go
// list -deps), and never writes the process environment (os.Setenv,
// os.Unsetenv): the local stack's endpoints are passed to the clients.
func TestCLIImportsNeitherAwsfnNorLance(t *testing.T) {
	banned := func(path string) bool {
		return path == modulePath+"awsfn" || path == modulePath+"lance" || strings.HasPrefix(path, modulePath+"lance/")
	}
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	parsed := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		parsed++
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); banned(p) {
				t.Errorf("%s imports %s", fset.Position(imp.Pos()), p)
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == "os" && (sel.Sel.Name == "Setenv" || sel.Sel.Name == "Unsetenv") {
				t.Errorf("%s: os.%s in the CLI", fset.Position(sel.Pos()), sel.Sel.Name)
			}
			// The format registry is wired once, by the constructors
			// (formats.NewRunner, ..., formats.Status), never by hand.
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == "formats" && sel.Sel.Name == "Open" {
				t.Errorf("%s: formats.Open wired by hand in the CLI", fset.Position(sel.Pos()))
			}
			return true
		})
	}
	if parsed == 0 {
		t.Fatal("no Go files parsed")
	}

	gobin, err := exec.LookPath("go")
	if err != nil {
		gobin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	if _, err := os.Stat(gobin); err != nil {
		t.Fatalf("the go command is needed to list the CLI's dependencies: %v", err)
	}
	out, err := exec.Command(gobin, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if dep == modulePath+"awsfn" {
			t.Errorf("the CLI depends on %s", dep)
		}
	}
}
