package awsfn_test

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// render writes a template node in one line: tags (short-form intrinsics)
// as prefixes, sequences as [a,b], mappings as {k=v,...}.
func render(n *yaml.Node) string {
	if n == nil {
		return "<nil>"
	}
	tag := ""
	if strings.HasPrefix(n.Tag, "!") && !strings.HasPrefix(n.Tag, "!!") {
		tag = n.Tag[1:] + ":"
	}
	switch n.Kind {
	case yaml.ScalarNode:
		return tag + n.Value
	case yaml.SequenceNode:
		var parts []string
		for _, c := range n.Content {
			parts = append(parts, render(c))
		}
		return tag + "[" + strings.Join(parts, ",") + "]"
	case yaml.MappingNode:
		var parts []string
		for i := 0; i+1 < len(n.Content); i += 2 {
			parts = append(parts, n.Content[i].Value+"="+render(n.Content[i+1]))
		}
		return tag + "{" + strings.Join(parts, ",") + "}"
	}
	return tag + "?"
}

// TestTemplateLeastPrivilege parses template.yaml and asserts each
// function's IAM permissions are exactly what it needs: per role, the set
// of (action, resource, condition) grants must equal the expected set, so
// an extra action, a broader resource or a dropped condition fails. Also:
// no wildcard in any action, no NotAction/NotResource, only Allow, one
// inline policy and no managed policies per role, the role assumable by
// Lambda only, and no SAM Policies on the functions (they would add grants
// beside the role).
//
// Why each grant: the S3 SDK calls are GetObject/HeadObject (s3:GetObject),
// PutObject incl. If-None-Match (s3:PutObject), DeleteObjects
// (s3:DeleteObject), ListObjectsV2 (s3:ListBucket, limited by s3:prefix);
// the cleaner's one write is its cleanup state
// (<table>/_maintenance/cleanup-state.json, read by status); the lock uses
// GetItem and UpdateItem only (shared/lock DynamoAPI); the
// queue sends with SendMessage/SendMessageBatch (both sqs:SendMessage); the
// cleaner's SQS event source mapping needs ReceiveMessage, DeleteMessage and
// GetQueueAttributes (what AWSLambdaSQSQueueExecutionRole grants); logs go
// to the function's own group.
func TestTemplateLeastPrivilege(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "template.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	res := path(doc.Content[0], "Resources")

	const (
		bucketVars = "{Bucket=If:[CreateBucket,Ref:WarehouseBucket,Ref:ExistingBucketName]}"
		bucket     = "Sub:[arn:${AWS::Partition}:s3:::${Bucket}," + bucketVars + "]"
		objects    = "Sub:[arn:${AWS::Partition}:s3:::${Bucket}/${WarehousePrefix}/*," + bucketVars + "]"
		state      = "Sub:[arn:${AWS::Partition}:s3:::${Bucket}/${WarehousePrefix}/*/_maintenance/cleanup-state.json," + bucketVars + "]"
		prefixOnly = "{StringLike={s3:prefix=[Ref:WarehousePrefix,Sub:${WarehousePrefix}/*]}}"
		queue      = "GetAtt:CleanupQueue.Arn"
		jobs       = "GetAtt:CompactionQueue.Arn"
	)
	logs := func(fn string) []string {
		g := "Sub:${" + fn + "LogGroup.Arn}"
		return []string{"logs:CreateLogStream " + g, "logs:PutLogEvents " + g}
	}
	s3 := func(actions ...string) []string {
		out := []string{"s3:ListBucket " + bucket + " if " + prefixOnly,
			// the cold-start check of a versioned bucket (CheckBucket)
			"s3:GetBucketVersioning " + bucket, "s3:GetLifecycleConfiguration " + bucket}
		for _, a := range actions {
			out = append(out, a+" "+objects)
		}
		return out
	}
	const viaS3 = " if {StringEquals={kms:ViaService=Sub:s3.${AWS::Region}.amazonaws.com}} when HasKmsKey"
	kms := func(actions ...string) []string {
		var out []string
		for _, a := range actions {
			out = append(out, a+" Ref:KmsKeyArn"+viaS3)
		}
		return out
	}
	want := map[string][]string{
		"Compactor": append(append(logs("Compactor"), s3("s3:GetObject", "s3:PutObject", "s3:DeleteObject")...),
			// the compactor's cold-start check of the bucket's notifications
			// (checkNotifications); its PutObject covers _status/index.html.
			"s3:GetBucketNotification "+bucket,
			"dynamodb:GetItem GetAtt:LockTable.Arn", "dynamodb:UpdateItem GetAtt:LockTable.Arn",
			"sqs:SendMessage "+queue, kms("kms:Decrypt", "kms:GenerateDataKey")[0], kms("kms:Decrypt", "kms:GenerateDataKey")[1],
			// Fan-out (CompactorFanoutPolicy): the compaction queue's event
			// source mapping, and table jobs sent by the compactor.
			"sqs:ReceiveMessage "+jobs, "sqs:DeleteMessage "+jobs, "sqs:GetQueueAttributes "+jobs, "sqs:SendMessage "+jobs),
		"Cleaner": append(append(logs("Cleaner"), s3("s3:GetObject", "s3:DeleteObject")...),
			"s3:PutObject "+state, // its cleanup state, nothing else
			"sqs:ReceiveMessage "+queue, "sqs:DeleteMessage "+queue, "sqs:GetQueueAttributes "+queue,
			"sqs:SendMessage "+queue, kms("kms:Decrypt")[0], kms("kms:GenerateDataKey")[0]),
		"Sweeper": append(append(logs("Sweeper"), s3("s3:GetObject", "s3:DeleteObject")...), kms("kms:Decrypt")...), // it writes nothing
	}

	roles := map[string]bool{}
	// Standalone policies (AWS::IAM::Policy) by the role they attach to:
	// their statements count as the role's.
	extra := map[string][]*yaml.Node{}
	for i := 0; i+1 < len(res.Content); i += 2 {
		switch child(res.Content[i+1], "Type").Value {
		case "AWS::IAM::Role":
			roles[res.Content[i].Value] = true
		case "AWS::IAM::Policy", "AWS::IAM::ManagedPolicy", "AWS::IAM::RolePolicy":
			pr := path(res.Content[i+1], "Properties")
			attached := scalars(child(pr, "Roles"))
			if len(attached) != 1 || child(pr, "Users") != nil || child(pr, "Groups") != nil || child(res.Content[i+1], "Type").Value != "AWS::IAM::Policy" {
				t.Errorf("%s: want an AWS::IAM::Policy attached to exactly one role, got roles %v", res.Content[i].Value, attached)
				continue
			}
			extra[attached[0]] = append(extra[attached[0]], path(pr, "PolicyDocument", "Statement").Content...)
		}
	}
	for fn, exp := range want {
		role := fn + "Role"
		if !roles[role] {
			t.Errorf("%s missing", role)
			continue
		}
		delete(roles, role)
		props := path(res, role, "Properties")
		if a := render(path(props, "AssumeRolePolicyDocument", "Statement")); a != "[{Effect=Allow,Principal={Service=lambda.amazonaws.com},Action=sts:AssumeRole}]" {
			t.Errorf("%s: trust policy %s, want Lambda only", role, a)
		}
		for _, k := range []string{"ManagedPolicyArns", "PermissionsBoundary"} {
			if child(props, k) != nil {
				t.Errorf("%s: %s adds grants the test cannot see", role, k)
			}
		}
		if fp := path(res, fn+"Function", "Properties"); child(fp, "Policies") != nil || render(child(fp, "Role")) != "GetAtt:"+role+".Arn" {
			t.Errorf("%sFunction: role %s, Policies %v; want its own role and no SAM policies", fn, render(child(fp, "Role")), child(fp, "Policies") != nil)
		}
		pols := child(props, "Policies")
		if pols == nil || len(pols.Content) != 1 {
			t.Errorf("%s: want exactly one inline policy", role)
			continue
		}
		var got []string
		stmts := append(append([]*yaml.Node{}, path(pols.Content[0], "PolicyDocument", "Statement").Content...), extra[role]...)
		delete(extra, role)
		for _, s := range stmts {
			when := ""
			if s.Tag == "!If" {
				// !If [cond, statement, !Ref AWS::NoValue]: a grant only under cond.
				if len(s.Content) != 3 || render(s.Content[2]) != "Ref:AWS::NoValue" {
					t.Errorf("%s: conditional statement %s: want !If [condition, statement, !Ref AWS::NoValue]", role, render(s))
					continue
				}
				when, s = " when "+s.Content[0].Value, s.Content[1]
			}
			for i := 0; i+1 < len(s.Content); i += 2 {
				switch k := s.Content[i].Value; k {
				case "Sid", "Effect", "Action", "Resource", "Condition":
				default:
					t.Errorf("%s: statement key %s (only Sid, Effect, Action, Resource, Condition allowed)", role, k)
				}
			}
			if e := child(s, "Effect"); e == nil || e.Value != "Allow" {
				t.Errorf("%s: statement %s is not an Allow", role, render(s))
			}
			resources := []*yaml.Node{child(s, "Resource")}
			if r := resources[0]; r != nil && r.Kind == yaml.SequenceNode && r.Tag == "!!seq" {
				resources = r.Content
			}
			cond := ""
			if c := child(s, "Condition"); c != nil {
				cond = " if " + render(c)
			}
			for _, a := range scalars(child(s, "Action")) {
				if strings.ContainsAny(a, "*?") {
					t.Errorf("%s: wildcard action %q", role, a)
				}
				for _, r := range resources {
					rs := render(r)
					if strings.Contains(rs, "*") && rs != objects && rs != state {
						t.Errorf("%s: %s on a wildcard resource %s", role, a, rs)
					}
					got = append(got, a+" "+rs+cond+when)
				}
			}
		}
		sort.Strings(got)
		sort.Strings(exp)
		g, w := strings.Join(got, "\n"), strings.Join(exp, "\n")
		if g != w {
			gs, ws := map[string]bool{}, map[string]bool{}
			for _, x := range got {
				gs[x] = true
			}
			for _, x := range exp {
				ws[x] = true
			}
			for _, x := range got {
				if !ws[x] {
					t.Errorf("%s grants more than it needs: %s", role, x)
				}
			}
			for _, x := range exp {
				if !gs[x] {
					t.Errorf("%s lacks: %s", role, x)
				}
			}
			if len(got) != len(gs) {
				t.Errorf("%s: duplicate grants", role)
			}
		}
	}
	for r := range roles {
		t.Errorf("unexpected IAM role %s (a function's permissions must be listed here)", r)
	}
	for r := range extra {
		t.Errorf("an IAM policy attaches to %s, which is no function's role", r)
	}
}
