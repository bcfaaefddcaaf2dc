package awsfn_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tablekeep/tablekeep/shared/awsfn"
)

// TestSAMBuildOnce: sam build is cheap. The three functions run one
// bootstrap (functions/tablekeep), each with TABLEKEEP_FUNCTION naming its
// role; their Makefile targets run the same build command (the second and
// third are Go build-cache hits), and samconfig.toml builds in the source
// tree, so nothing of the repository (bin/, .stack/, demo data) is copied.
func TestSAMBuildOnce(t *testing.T) {
	doc := samTemplate(t)
	root := repoRoot(t)
	var cmds []string
	for _, role := range awsfn.Roles {
		fn := awsfn.FunctionLogicalID(role)
		f := obj(doc, "Resources", fn)
		if obj(f, "Metadata", "BuildMethod") != "makefile" {
			t.Errorf("%s: BuildMethod %v", fn, obj(f, "Metadata", "BuildMethod"))
		}
		if v := obj(f, "Properties", "Environment", "Variables", awsfn.EnvFunction); v != string(role) {
			t.Errorf("%s: %s = %v, want %s", fn, awsfn.EnvFunction, v, role)
		}
		cmd := exec.Command("make", "-s", "-n", "build-"+fn, "ARTIFACTS_DIR=/artifacts")
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("make -n build-%s: %v\n%s", fn, err, out)
		}
		cmds = append(cmds, string(out))
	}
	if cmds[0] != cmds[1] || cmds[1] != cmds[2] || !strings.Contains(cmds[0], "./functions/tablekeep") {
		t.Errorf("the build targets differ or do not build the one bootstrap:\n%s", strings.Join(cmds, "---\n"))
	}
	b, err := os.ReadFile(filepath.Join(root, "samconfig.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "build_in_source = true") {
		t.Errorf("samconfig.toml does not build in source:\n%s", b)
	}
}

// TestBootstrapImportsNoYAML: the Lambda bootstrap does not link a YAML
// parser. Reading template.yaml is for tests and tools (shared/iampolicy);
// `go list -deps ./functions/tablekeep | grep yaml` is empty.
func TestBootstrapImportsNoYAML(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "./functions/tablekeep")
	cmd.Dir = repoRoot(t)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps ./functions/tablekeep: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.Contains(dep, "yaml") || strings.HasSuffix(dep, "/iampolicy") {
			t.Errorf("functions/tablekeep depends on %s", dep)
		}
	}
}
