package iampolicy_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tablekeep/tablekeep/shared/awsfn"
	"github.com/tablekeep/tablekeep/shared/iampolicy"
)

// TestTemplateS3Statements: the generator reads every role's S3 statements
// from template.yaml, resolves them for a bucket and prefix, and refuses what
// it cannot resolve (no services needed; TestLambdaEndToEnd has versitygw
// enforce the result).
func TestTemplateS3Statements(t *testing.T) {
	stmts, err := iampolicy.TemplateS3Statements(readTemplate(t), iampolicy.TemplateParams{Bucket: "bkt", Prefix: "wh"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range stmts {
		for _, a := range s.Actions {
			for _, r := range s.Resources {
				got = append(got, string(s.Role)+" "+a+" "+r)
			}
		}
	}
	want := []string{
		"compactor s3:ListBucket arn:aws:s3:::bkt",
		"compactor s3:PutObject arn:aws:s3:::bkt/wh/*",
		"cleaner s3:DeleteObject arn:aws:s3:::bkt/wh/*",
		"cleaner s3:PutObject arn:aws:s3:::bkt/wh/*/_maintenance/cleanup-state.json",
		"sweeper s3:GetObject arn:aws:s3:::bkt/wh/*",
	}
	all := strings.Join(got, "\n")
	for _, w := range want {
		if !strings.Contains(all, w) {
			t.Errorf("missing %q in\n%s", w, all)
		}
	}
	if strings.Contains(all, "sweeper s3:PutObject") {
		t.Errorf("sweeper may write:\n%s", all)
	}
	for _, s := range stmts {
		if s.Actions[0] == "s3:ListBucket" {
			if p := s.Condition["StringLike"]["s3:prefix"]; strings.Join(p, ",") != "wh,wh/*" {
				t.Errorf("%s ListBucket condition %v", s.Role, s.Condition)
			}
		}
	}
	pol, err := iampolicy.BucketPolicy(stmts, map[awsfn.Role]string{"compactor": "K1", "cleaner": "K2", "sweeper": "K3"})
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Statement []struct{ Principal map[string][]string }
	}
	if err := json.Unmarshal(pol, &doc); err != nil || len(doc.Statement) != len(stmts) {
		t.Fatalf("policy %s: %v", pol, err)
	}
	if _, err := iampolicy.BucketPolicy(stmts, map[awsfn.Role]string{"compactor": "K1"}); err == nil {
		t.Error("a role without a principal was accepted")
	}
	bad := strings.Replace(string(readTemplate(t)), `"arn:${AWS::Partition}:s3:::${Bucket}/${WarehousePrefix}/*"`, `"arn:${AWS::Partition}:s3:::${Bucket}/${Unknown}/*"`, 1)
	if _, err := iampolicy.TemplateS3Statements([]byte(bad), iampolicy.TemplateParams{Bucket: "bkt", Prefix: "wh"}); !errors.Is(err, iampolicy.ErrTemplate) || !strings.Contains(err.Error(), "Unknown") {
		t.Errorf("unresolvable reference: %v", err)
	}
}

func readTemplate(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "template.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
