package awsfn_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// TestTemplateCfnLint runs cfn-lint on template.yaml (also `make cfn-lint`).
func TestTemplateCfnLint(t *testing.T) {
	bin, err := exec.LookPath("cfn-lint")
	if err != nil {
		t.Fatal("cfn-lint not found on PATH: pip install cfn-lint (it checks template.yaml offline)")
	}
	cmd := exec.Command(bin, "template.yaml")
	cmd.Dir = repoRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cfn-lint template.yaml: %v\n%s", err, out)
	}
}

// node helpers over the template's YAML (short-form intrinsics are tags).
func child(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

func path(n *yaml.Node, keys ...string) *yaml.Node {
	for _, k := range keys {
		n = child(n, k)
	}
	return n
}

func scalars(n *yaml.Node) []string {
	if n == nil {
		return nil
	}
	if n.Kind == yaml.ScalarNode {
		return []string{n.Value}
	}
	var out []string
	for _, c := range n.Content {
		out = append(out, scalars(c)...)
	}
	return out
}

// TestTemplatePolicies checks what cfn-lint does not: the queue/timeout
// ratio, redrive, builds, and least privilege per function.
func TestTemplatePolicies(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "template.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	res := path(doc.Content[0], "Resources")
	num := func(n *yaml.Node) int {
		v, err := strconv.Atoi(n.Value)
		if err != nil {
			t.Fatalf("not a number: %v", n.Value)
		}
		return v
	}
	vis := num(path(res, "CleanupQueue", "Properties", "VisibilityTimeout"))
	cleanerTimeout := num(path(res, "CleanerFunction", "Properties", "Timeout"))
	if vis < 6*cleanerTimeout {
		t.Errorf("queue visibility %d s < 6 x cleaner timeout %d s", vis, cleanerTimeout)
	}
	if v := path(res, "CleanupQueue", "Properties", "RedrivePolicy", "maxReceiveCount"); v == nil || v.Value != "5" {
		t.Errorf("redrive maxReceiveCount: %v", v)
	}
	ev := path(res, "CleanerFunction", "Properties", "Events", "Cleanup", "Properties")
	if !strings.Contains(strings.Join(scalars(child(ev, "FunctionResponseTypes")), ","), "ReportBatchItemFailures") ||
		path(ev, "ScalingConfig", "MaximumConcurrency").Value != "CleanerMaxConcurrency" {
		t.Errorf("cleaner event source: %v", scalars(ev))
	}
	glob := path(doc.Content[0], "Globals", "Function")
	if child(glob, "Runtime").Value != "provided.al2023" || strings.Join(scalars(child(glob, "Architectures")), ",") != "arm64" {
		t.Errorf("runtime/architecture: %v", scalars(glob))
	}
	if v := path(res, "LockTable", "Properties", "BillingMode"); v == nil || v.Value != "PAY_PER_REQUEST" ||
		path(res, "LockTable", "Properties", "TimeToLiveSpecification", "AttributeName").Value != "ttl" {
		t.Errorf("lock table billing/TTL")
	}
	for _, fn := range []string{"Compactor", "Cleaner", "Sweeper"} {
		if v := path(res, fn+"Function", "Metadata", "BuildMethod"); v == nil || v.Value != "makefile" {
			t.Errorf("%sFunction: BuildMethod %v, want makefile", fn, v)
		}
		if v := path(res, fn+"Function", "Properties", "Role"); v == nil || !strings.Contains(strings.Join(scalars(v), ""), fn+"Role") {
			t.Errorf("%sFunction does not use its own role", fn)
		}
		stmts := path(res, fn+"Role", "Properties", "Policies").Content[0]
		stmts = path(stmts, "PolicyDocument", "Statement")
		for _, s := range stmts.Content {
			actions := scalars(child(s, "Action"))
			resources := strings.Join(scalars(child(s, "Resource")), " ")
			for _, a := range actions {
				if strings.Contains(a, "*") {
					t.Errorf("%sRole: wildcard action %q", fn, a)
				}
				if strings.HasPrefix(a, "dynamodb:") && fn != "Compactor" {
					t.Errorf("%sRole may use the lock table (%s)", fn, a)
				}
				if a == "s3:DeleteObject" && !strings.Contains(resources, "${WarehousePrefix}/*") {
					t.Errorf("%sRole deletes outside the warehouse prefix: %s", fn, resources)
				}
			}
			if strings.TrimSpace(resources) == "*" {
				t.Errorf("%sRole: statement %v on every resource", fn, actions)
			}
		}
	}
	for _, a := range []string{"DeadLetterAlarm", "CompactorErrorsAlarm", "CleanerErrorsAlarm", "SweeperErrorsAlarm", "BacklogAlarm", "RejectedMessagesAlarm"} {
		if child(res, a) == nil {
			t.Errorf("alarm %s missing", a)
		}
	}
}
