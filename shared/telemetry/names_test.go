package telemetry_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// metricNames are the values of the constants in names.go.
func metricNames(t *testing.T) map[string]bool {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "names.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
			v, err := strconv.Unquote(lit.Value)
			if err != nil {
				t.Fatal(err)
			}
			names[v] = true
		}
		return true
	})
	if len(names) < 29 {
		t.Fatalf("names.go defines %d metric names; want at least 29", len(names))
	}
	return names
}

// TestMetricNamesDefinedOnce: no Go source outside shared/telemetry (tests
// aside) spells a metric name as a string literal; it uses the constant.
func TestMetricNamesDefinedOnce(t *testing.T) {
	names := metricNames(t)
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	var found []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", ".stack", "testdata", "node_modules":
				return filepath.SkipDir
			}
			if path == filepath.Join(root, "shared", "telemetry") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if v, err := strconv.Unquote(lit.Value); err == nil && names[v] {
					found = append(found, fset.Position(lit.Pos()).String()+": "+lit.Value)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(found)
	for _, f := range found {
		t.Errorf("metric name literal outside shared/telemetry (use the telemetry constant): %s", f)
	}
}

// TestTemplateAlarmsNameKnownMetrics: every alarm of template.yaml on
// namespace tablekeep watches a metric the functions record.
func TestTemplateAlarmsNameKnownMetrics(t *testing.T) {
	names := metricNames(t)
	b, err := os.ReadFile(filepath.Join("..", "..", "template.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	var alarms int
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if n.Kind == yaml.MappingNode {
			var ns, metric string
			for i := 0; i+1 < len(n.Content); i += 2 {
				switch n.Content[i].Value {
				case "Namespace":
					ns = n.Content[i+1].Value
				case "MetricName":
					metric = n.Content[i+1].Value
				}
			}
			if ns == "tablekeep" {
				alarms++
				if !names[metric] {
					t.Errorf("template.yaml line %d: alarm on tablekeep metric %q, which no telemetry constant names", n.Line, metric)
				}
			}
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(&doc)
	if alarms == 0 {
		t.Fatal("no alarm on namespace tablekeep found in template.yaml")
	}
}
