package testkit_test

import (
	"encoding/json"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/tablekeep/tablekeep/"

type goPackage struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	Imports    []string
}

var (
	floorRE  = regexp.MustCompile(`Floor (\d+) of the layering`)
	forbidRE = regexp.MustCompile(`It must not import: ([^.]+)\.`)
)

// TestPackageDocs: every package under shared/, cmd/ and functions/ has a
// doc.go holding its package comment (and no other file has one), whose
// floor is the package's floor in the import graph and whose "must not
// import" list it does not import.
func TestPackageDocs(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "list", "-json", "./shared/...", "./cmd/...", "./functions/...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs := map[string]goPackage{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p goPackage
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		p.ImportPath = strings.TrimPrefix(p.ImportPath, module)
		var own []string
		for _, im := range p.Imports {
			if strings.HasPrefix(im, module) {
				own = append(own, strings.TrimPrefix(im, module))
			}
		}
		p.Imports = own
		pkgs[p.ImportPath] = p
	}
	floors := map[string]int{}
	var floor func(string) int
	floor = func(p string) int {
		if f, ok := floors[p]; ok {
			return f
		}
		f := 0
		for _, im := range pkgs[p].Imports {
			f = max(f, floor(im)+1)
		}
		floors[p] = f
		return f
	}
	for path, p := range pkgs {
		fset := token.NewFileSet()
		var doc string
		for _, name := range p.GoFiles {
			f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.ParseComments|parser.PackageClauseOnly)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case name == "doc.go" && f.Doc != nil:
				doc = f.Doc.Text()
			case f.Doc != nil:
				t.Errorf("%s/%s: package comment outside doc.go", path, name)
			}
		}
		if doc == "" {
			if _, err := os.Stat(filepath.Join(p.Dir, "doc.go")); err != nil {
				t.Errorf("%s: no doc.go", path)
			} else {
				t.Errorf("%s: doc.go has no package comment", path)
			}
			continue
		}
		doc = strings.Join(strings.Fields(doc), " ")
		m := floorRE.FindStringSubmatch(doc)
		if m == nil {
			t.Errorf("%s: doc.go names no floor (\"Floor N of the layering\")", path)
		} else if n, _ := strconv.Atoi(m[1]); n != floor(path) {
			t.Errorf("%s: doc.go says floor %d; its imports put it on floor %d", path, n, floor(path))
		}
		if m := forbidRE.FindStringSubmatch(doc); m != nil {
			for _, bad := range strings.Split(m[1], ", ") {
				for _, im := range p.Imports {
					if im == bad {
						t.Errorf("%s imports %s, which its doc.go forbids", path, bad)
					}
				}
			}
		} else if !strings.Contains(doc, "It must not import any tablekeep package.") {
			t.Errorf("%s: doc.go says nothing of what it must not import", path)
		} else if len(p.Imports) > 0 {
			t.Errorf("%s imports %v; its doc.go says it imports no tablekeep package", path, p.Imports)
		}
	}
}
