package fleet

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

// TestOnlyFleetWritesFleetKeys: exactly one package, this one, builds keys
// under _fleet/ (issue 20 point 2). In every non-test Go file of the
// module outside shared/fleet: no string literal (but prose) names _fleet, and no
// code refers to this package's key builders or folder constants (other
// packages call this package's readers and writers, and may use Dir only
// to refuse a table there).
func TestOnlyFleetWritesFleetKeys(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not found from shared/fleet: %v", err)
	}
	builders := map[string]bool{"ShardKey": true, "ShardPrefix": true, "ParseShardKey": true, "IndexDir": true,
		"RetryDir": true, "RetryKey": true, "RetryPrefix": true, "InlineRunPrefix": true, "InlineRunDir": true,
		"InlineRunKey": true, "InlineRunsPrefix": true, "ScanStateKey": true, "SealKey": true, "ParseIndexKey": true}
	own := filepath.Join(root, "shared", "fleet") + string(filepath.Separator)
	files := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || strings.HasPrefix(path, own) {
			return nil
		}
		files++
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		fleetName := ""
		for _, im := range f.Imports {
			if im.Path.Value == `"github.com/tablekeep/tablekeep/shared/fleet"` {
				fleetName = "fleet"
				if im.Name != nil {
					fleetName = im.Name.Name
				}
			}
		}
		rel, _ := filepath.Rel(root, path)
		ast.Inspect(f, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.BasicLit:
				// A key, not prose (help texts may name the reserved folder).
				if x.Kind == token.STRING && strings.Contains(x.Value, "_fleet") && !strings.ContainsAny(x.Value, " \n") {
					t.Errorf("%s: string literal %s: keys under _fleet/ are built only in shared/fleet (layout.go)", rel, x.Value)
				}
			case *ast.SelectorExpr:
				if id, ok := x.X.(*ast.Ident); ok && fleetName != "" && id.Name == fleetName && builders[x.Sel.Name] {
					t.Errorf("%s: uses fleet.%s: only shared/fleet builds keys under _fleet/", rel, x.Sel.Name)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 50 {
		t.Fatalf("checked only %d files: the walk missed the module", files)
	}
}
