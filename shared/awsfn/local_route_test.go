package awsfn_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"gopkg.in/yaml.v3"

	"github.com/tablekeep/tablekeep/shared/awsfn"
	"github.com/tablekeep/tablekeep/shared/internal/testkit"
)

// localStackDir is a STACK_DIR for the infra scripts over the running test
// stack, with its own resource names (so concurrent tests do not share a
// queue), after infra/aws-resources.sh made the resources, role accounts
// and the generated bucket policy.
func localStackDir(t *testing.T) (dir string, env []string) {
	t.Helper()
	dir = t.TempDir()
	var lines []string
	for _, k := range []string{"TABLEKEEP_S3_ENDPOINT", "TABLEKEEP_AWS_ENDPOINT", "TABLEKEEP_S3_ADMIN_ENDPOINT", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION"} {
		v := os.Getenv(k)
		if v == "" {
			t.Fatalf("%s is not set: run `make test` (it starts the local stack), or `make stack-up && source .stack/env`", k)
		}
		lines = append(lines, "export "+k+"="+v)
	}
	if err := os.WriteFile(filepath.Join(dir, "env"), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	name := randomName("tk")
	env = append(os.Environ(), "STACK_DIR="+dir, "TABLEKEEP_LOCAL_NAME="+name, "TABLEKEEP_LOCAL_BUCKET="+name+"-warehouse")
	cmd := exec.Command("infra/aws-resources.sh")
	cmd.Dir, cmd.Env = repoRoot(t), env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("infra/aws-resources.sh: %v\n%s", err, out)
	}
	return dir, env
}

// TestMakeInvokeAndDrain runs the documented local route (one
// infra/aws-resources.sh run serves both parts): infra/invoke.sh
// (make invoke FN=... EVENT=...) runs a function under aws-lambda-rie as its
// own role against the resources infra/aws-resources.sh made, and
// --drain (make drain) feeds the real queue's messages to the cleaner and
// deletes what it acknowledged, until the queue is empty.
func TestMakeInvokeAndDrain(t *testing.T) {
	dir, env := localStackDir(t)
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("infra/invoke.sh", args...)
		cmd.Dir, cmd.Env = repoRoot(t), env
		out, err := cmd.CombinedOutput()
		if err != nil {
			log, _ := os.ReadFile(filepath.Join(dir, "invoke-"+args[0]+".log"))
			t.Fatalf("infra/invoke.sh %s: %v\n%s\n--- function output:\n%s", strings.Join(args, " "), err, out, log)
		}
		return string(out)
	}
	out := run("compactor", "events/scheduled.json")
	if !strings.Contains(out, `"function":"compactor"`) || !strings.Contains(out, `"errors":0`) {
		t.Fatalf("compactor: %s", out)
	}
	// A message the cleaner drops (unknown table): acknowledged, deleted.
	awsEnv := map[string]string{}
	b, _ := os.ReadFile(filepath.Join(dir, "aws-env"))
	for _, l := range strings.Split(string(b), "\n") {
		for _, kv := range strings.Fields(strings.TrimPrefix(l, "export ")) {
			if k, v, ok := strings.Cut(kv, "="); ok {
				awsEnv[k] = v
			}
		}
	}
	q := awsEnv["TABLEKEEP_QUEUE_URL"]
	sqsc := testkit.SQSClient(t)
	for _, body := range []string{`{"v":1,"table":"nope","root":"warehouse/tables/nope/","from":1,"to":2}`, `garbage`} {
		if _, err := sqsc.SendMessage(t.Context(), &sqs.SendMessageInput{QueueUrl: aws.String(q), MessageBody: aws.String(body)}); err != nil {
			t.Fatal(err)
		}
	}
	out = run("cleaner", "--drain")
	if !strings.Contains(out, "2 messages in") || !strings.Contains(out, "2 acknowledged") {
		t.Errorf("drain: %s", out)
	}
	if n := testkit.QueueDepth(t, sqsc, q); n != 0 {
		t.Errorf("queue holds %d messages after make drain", n)
	}
	for _, fn := range []string{"compactor", "cleaner"} {
		if log, _ := os.ReadFile(filepath.Join(dir, "invoke-"+fn+".log")); strings.Contains(string(log), "AccessDenied") {
			t.Errorf("%s under its role was denied:\n%s", fn, log)
		}
	}
	t.Run("SAMEnvFileDeclared", func(t *testing.T) { samEnvFileDeclared(t, dir, env) })
}

// samEnvFileDeclared: the env file make sam-env writes for sam local invoke
// holds only variables the template declares for each function (sam local
// drops the others silently), each function's configuration loads from it,
// and it points at the local stack only.
func samEnvFileDeclared(t *testing.T, dir string, env []string) {
	cmd := exec.Command("infra/sam-env.sh")
	cmd.Dir, cmd.Env = repoRoot(t), env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("infra/sam-env.sh: %v\n%s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "sam-env.json"))
	if err != nil {
		t.Fatal(err)
	}
	var file map[string]map[string]string
	if err := json.Unmarshal(b, &file); err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(readTemplate(t), &doc); err != nil {
		t.Fatal(err)
	}
	globals := path(doc.Content[0], "Globals", "Function", "Environment", "Variables")
	for _, k := range []string{awsfn.EnvLocalS3Endpoint, awsfn.EnvLocalAWSEndpoint, awsfn.EnvLocalAccessKey, awsfn.EnvLocalSecretKey} {
		if v := child(globals, k); v == nil || v.Value != "" {
			t.Errorf("template: %s not declared empty in Globals (%v)", k, v)
		}
	}
	for _, role := range awsfn.Roles {
		fn := awsfn.FunctionLogicalID(role)
		vars, ok := file[fn]
		if !ok {
			t.Errorf("sam-env.json has no %s", fn)
			continue
		}
		own := path(doc.Content[0], "Resources", fn, "Properties", "Environment", "Variables")
		for k := range vars {
			if child(globals, k) == nil && child(own, k) == nil {
				t.Errorf("%s: %s is not declared in the template: sam local invoke would drop it", fn, k)
			}
		}
		// The environment as sam local builds it: the template's values
		// (Globals, then the function's own) resolved as sam resolves them
		// locally, then the env file's values for declared variables.
		env := map[string]string{}
		unresolved := map[string]string{}
		for _, decl := range []*yaml.Node{globals, own} {
			for i := 0; decl != nil && i+1 < len(decl.Content); i += 2 {
				k := decl.Content[i].Value
				env[k], unresolved[k] = samLocalValue(doc.Content[0], decl.Content[i+1])
				if unresolved[k] == "" {
					delete(unresolved, k)
				}
			}
		}
		for k, v := range vars {
			env[k] = v
			delete(unresolved, k)
		}
		for k, why := range unresolved {
			t.Errorf("%s: make sam-env does not set %s, whose template value sam local cannot resolve (%s): the function would read %q",
				fn, k, why, env[k])
		}
		c, err := awsfn.LoadConfig(role, func(k string) string {
			if k == awsfn.EnvSAMLocal {
				return "true"
			}
			return env[k]
		})
		if err != nil || c.Local == nil {
			t.Errorf("%s: configuration as sam local invoke builds it (template values, then sam-env.json): %v", fn, err)
		}
	}
}

// samLocalValue is a template environment value as sam local resolves it,
// and why it is not the deployed value ("" if it is): a scalar is itself;
// !Ref of a parameter is its default; !Ref of a resource is the resource's
// logical ID (sam local has no physical names), and any other intrinsic
// (!Sub, !GetAtt, !If, pseudo parameters) is not resolved to what AWS would
// pass.
func samLocalValue(root, v *yaml.Node) (val, unresolved string) {
	switch {
	case v.Tag == "!Ref" && v.Kind == yaml.ScalarNode:
		if p := path(root, "Parameters", v.Value); p != nil {
			if d := child(p, "Default"); d != nil {
				return d.Value, ""
			}
			return "", ""
		}
		if path(root, "Resources", v.Value) != nil {
			return v.Value, "!Ref " + v.Value + " is the logical ID locally"
		}
		return "", "!Ref " + v.Value
	case v.Kind == yaml.ScalarNode && (v.Tag == "" || strings.HasPrefix(v.Tag, "!!")): // plain (!!str, !!int)
		return v.Value, ""
	}
	return "", v.Tag + " is not resolved locally"
}
