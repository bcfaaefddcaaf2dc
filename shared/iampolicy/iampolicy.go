package iampolicy

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/tablekeep/tablekeep/shared/awsfn"
)

// ErrTemplate marks a template the generator cannot read.
var ErrTemplate = errors.New("template")

// S3Statement is one statement of a function role's policy that grants S3
// actions, with its intrinsic functions resolved for one bucket and prefix.
// Non-S3 actions of the statement (logs, dynamodb, sqs, kms) are left out.
type S3Statement struct {
	Role      awsfn.Role
	RoleID    string // logical id of the AWS::IAM::Role
	Sid       string
	Actions   []string
	Resources []string
	Condition map[string]map[string][]string `json:",omitempty"`
}

// TemplateParams are the values the generator resolves intrinsics with: the
// deployment with an existing bucket (ExistingBucketName = Bucket,
// WarehousePrefix = Prefix), partition aws.
type TemplateParams struct {
	Bucket string
	Prefix string
}

// TemplateS3Statements reads the template and returns, for each function,
// the S3 statements of the role its function runs as (Properties.Role:
// !GetAtt <Role>.Arn), resolved with p.
func TemplateS3Statements(template []byte, p TemplateParams) ([]S3Statement, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(template, &doc); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrTemplate, err)
	}
	if len(doc.Content) == 0 {
		return nil, fmt.Errorf("%w: empty document", ErrTemplate)
	}
	res := ymap(doc.Content[0], "Resources")
	if res == nil {
		return nil, fmt.Errorf("%w: no Resources", ErrTemplate)
	}
	r := resolver{p: p}
	var out []S3Statement
	for _, role := range awsfn.Roles {
		fn := awsfn.FunctionLogicalID(role)
		roleRef := ymap(ymap(ymap(res, fn), "Properties"), "Role")
		if roleRef == nil {
			return nil, fmt.Errorf("%w: %s has no Properties.Role", ErrTemplate, fn)
		}
		roleID, err := getAttArn(roleRef)
		if err != nil {
			return nil, fmt.Errorf("%w: %s.Properties.Role: %v", ErrTemplate, fn, err)
		}
		pols := ymap(ymap(ymap(res, roleID), "Properties"), "Policies")
		if pols == nil {
			return nil, fmt.Errorf("%w: role %s of %s has no Policies", ErrTemplate, roleID, fn)
		}
		docs := append([]*yaml.Node{}, pols.Content...)
		docs = append(docs, attachedPolicies(res, roleID)...)
		for _, pol := range docs {
			stmts := ymap(ymap(pol, "PolicyDocument"), "Statement")
			if stmts == nil {
				return nil, fmt.Errorf("%w: %s: a policy without PolicyDocument.Statement", ErrTemplate, roleID)
			}
			for i, s := range stmts.Content {
				s, err := r.conditional(s)
				if err != nil {
					return nil, fmt.Errorf("%w: %s statement %d: %v", ErrTemplate, roleID, i, err)
				}
				if s == nil {
					continue // a statement whose condition is false here
				}
				st, ok, err := r.statement(s)
				if err != nil {
					return nil, fmt.Errorf("%w: %s statement %d: %v", ErrTemplate, roleID, i, err)
				}
				if ok {
					st.Role, st.RoleID = role, roleID
					out = append(out, st)
				}
			}
		}
	}
	return out, nil
}

// attachedPolicies returns the Properties of the AWS::IAM::Policy
// resources attached to roleID (Roles: [!Ref roleID]): their statements are
// the role's too.
func attachedPolicies(res *yaml.Node, roleID string) []*yaml.Node {
	var out []*yaml.Node
	for i := 0; i+1 < len(res.Content); i += 2 {
		r := res.Content[i+1]
		if t := ymap(r, "Type"); t == nil || t.Value != "AWS::IAM::Policy" {
			continue
		}
		props := ymap(r, "Properties")
		roles := ymap(props, "Roles")
		if roles == nil {
			continue
		}
		for _, ref := range roles.Content {
			if fn, arg, ok := intrinsic(ref); ok && fn == "Ref" && arg.Value == roleID {
				out = append(out, props)
			}
		}
	}
	return out
}

// BucketPolicy is the bucket policy granting each role's principal (an IAM
// user's access key id for versitygw's internal IAM, or an ARN) exactly its
// statements on bucket. Every role of stmts needs a principal.
func BucketPolicy(stmts []S3Statement, principals map[awsfn.Role]string) ([]byte, error) {
	type statement struct {
		Sid       string
		Effect    string
		Principal map[string][]string
		Action    []string
		Resource  []string
		Condition map[string]map[string][]string `json:",omitempty"`
	}
	doc := struct {
		Version   string
		Statement []statement
	}{Version: "2012-10-17"}
	for i, s := range stmts {
		pr := principals[s.Role]
		if pr == "" {
			return nil, fmt.Errorf("bucket policy: no principal for role %s", s.Role)
		}
		doc.Statement = append(doc.Statement, statement{
			Sid:    fmt.Sprintf("%s%s%d", s.RoleID, nonAlnum.ReplaceAllString(s.Sid, ""), i),
			Effect: "Allow", Principal: map[string][]string{"AWS": {pr}},
			Action: s.Actions, Resource: s.Resources, Condition: s.Condition,
		})
	}
	if len(doc.Statement) == 0 {
		return nil, errors.New("bucket policy: no S3 statements")
	}
	return json.Marshal(doc) // compact: versitygw keeps it in an xattr (4 KiB on ext4)
}

// resolver evaluates the intrinsic functions the role statements use.
type resolver struct{ p TemplateParams }

// conditional resolves a statement written as !If [cond, statement,
// !Ref AWS::NoValue]: the statement, or nil.
func (r resolver) conditional(s *yaml.Node) (*yaml.Node, error) {
	fn, arg, ok := intrinsic(s)
	if !ok {
		return s, nil
	}
	if fn != "If" || arg.Kind != yaml.SequenceNode || len(arg.Content) != 3 {
		return nil, fmt.Errorf("statement: only !If [condition, statement, statement or !Ref AWS::NoValue] is supported")
	}
	cond, err := r.condition(arg.Content[0].Value)
	if err != nil {
		return nil, err
	}
	pick := arg.Content[2]
	if cond {
		pick = arg.Content[1]
	}
	if f, a, ok := intrinsic(pick); ok && f == "Ref" && a.Value == "AWS::NoValue" {
		return nil, nil
	}
	return pick, nil
}

func (r resolver) statement(s *yaml.Node) (S3Statement, bool, error) {
	var st S3Statement
	if e := ymap(s, "Effect"); e == nil || e.Value != "Allow" {
		return st, false, fmt.Errorf("only Allow statements are supported")
	}
	for _, k := range []string{"NotAction", "NotResource", "Principal"} {
		if ymap(s, k) != nil {
			return st, false, fmt.Errorf("%s is not supported", k)
		}
	}
	if sid := ymap(s, "Sid"); sid != nil {
		st.Sid = sid.Value
	}
	acts, err := r.strings(ymap(s, "Action"))
	if err != nil {
		return st, false, fmt.Errorf("Action: %v", err)
	}
	for _, a := range acts {
		if strings.HasPrefix(strings.ToLower(a), "s3:") {
			st.Actions = append(st.Actions, a)
		}
	}
	if len(st.Actions) == 0 {
		return st, false, nil
	}
	if st.Resources, err = r.strings(ymap(s, "Resource")); err != nil {
		return st, false, fmt.Errorf("%s Resource: %v", st.Sid, err)
	}
	if c := ymap(s, "Condition"); c != nil {
		st.Condition = map[string]map[string][]string{}
		for i := 0; i+1 < len(c.Content); i += 2 {
			op, kv := c.Content[i].Value, c.Content[i+1]
			st.Condition[op] = map[string][]string{}
			for j := 0; j+1 < len(kv.Content); j += 2 {
				vals, err := r.strings(kv.Content[j+1])
				if err != nil {
					return st, false, fmt.Errorf("%s Condition %s %s: %v", st.Sid, op, kv.Content[j].Value, err)
				}
				st.Condition[op][kv.Content[j].Value] = vals
			}
		}
	}
	return st, true, nil
}

// strings resolves a scalar, a sequence or an intrinsic to strings.
func (r resolver) strings(n *yaml.Node) ([]string, error) {
	if n == nil {
		return nil, errors.New("missing")
	}
	if n.Kind == yaml.SequenceNode && !isIntrinsic(n) {
		var out []string
		for _, c := range n.Content {
			v, err := r.value(c)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	}
	v, err := r.value(n)
	if err != nil {
		return nil, err
	}
	return []string{v}, nil
}

func isIntrinsic(n *yaml.Node) bool {
	return strings.HasPrefix(n.Tag, "!") && !strings.HasPrefix(n.Tag, "!!")
}

// intrinsic returns the function name and argument of a short-form tag
// (!Sub x) or a long-form mapping ({Fn::Sub: x}, {Ref: x}).
func intrinsic(n *yaml.Node) (string, *yaml.Node, bool) {
	if isIntrinsic(n) {
		arg := *n
		arg.Tag = ""
		return n.Tag[1:], &arg, true
	}
	if n.Kind == yaml.MappingNode && len(n.Content) == 2 {
		k := n.Content[0].Value
		if k == "Ref" || strings.HasPrefix(k, "Fn::") {
			return strings.TrimPrefix(k, "Fn::"), n.Content[1], true
		}
	}
	return "", nil, false
}

var (
	subVar   = regexp.MustCompile(`\$\{([^}!][^}]*)\}`)
	nonAlnum = regexp.MustCompile(`[^A-Za-z0-9]`)
)

func (r resolver) value(n *yaml.Node) (string, error) {
	fn, arg, ok := intrinsic(n)
	if !ok {
		if n.Kind != yaml.ScalarNode {
			return "", fmt.Errorf("unsupported value at line %d", n.Line)
		}
		return n.Value, nil
	}
	switch fn {
	case "Ref":
		return r.ref(arg.Value)
	case "If":
		if arg.Kind != yaml.SequenceNode || len(arg.Content) != 3 {
			return "", fmt.Errorf("!If at line %d: want [condition, then, else]", n.Line)
		}
		cond, err := r.condition(arg.Content[0].Value)
		if err != nil {
			return "", err
		}
		if cond {
			return r.value(arg.Content[1])
		}
		return r.value(arg.Content[2])
	case "Sub":
		format, vars := arg, map[string]string{}
		if arg.Kind == yaml.SequenceNode {
			if len(arg.Content) != 2 {
				return "", fmt.Errorf("!Sub at line %d: want [format, vars]", n.Line)
			}
			format = arg.Content[0]
			m := arg.Content[1]
			for i := 0; i+1 < len(m.Content); i += 2 {
				v, err := r.value(m.Content[i+1])
				if err != nil {
					return "", err
				}
				vars[m.Content[i].Value] = v
			}
		}
		var ferr error
		out := subVar.ReplaceAllStringFunc(format.Value, func(m string) string {
			name := m[2 : len(m)-1]
			if v, ok := vars[name]; ok {
				return v
			}
			v, err := r.ref(name)
			if err != nil && ferr == nil {
				ferr = err
			}
			return v
		})
		return out, ferr
	}
	return "", fmt.Errorf("intrinsic %s at line %d is not supported in S3 statements", fn, n.Line)
}

// ref resolves a parameter or pseudo parameter for an existing-bucket deployment.
func (r resolver) ref(name string) (string, error) {
	switch name {
	case "ExistingBucketName", "WarehouseBucket":
		return r.p.Bucket, nil
	case "WarehousePrefix":
		return r.p.Prefix, nil
	case "AWS::Partition":
		return "aws", nil
	}
	return "", fmt.Errorf("reference %q is not supported in S3 statements", name)
}

func (r resolver) condition(name string) (bool, error) {
	switch name {
	case "CreateBucket":
		return false, nil // the bucket exists (the local stack made it)
	case "HasKmsKey":
		return false, nil // the local stack has no KMS (its statements grant no S3 action anyway)
	}
	return false, fmt.Errorf("condition %q is not supported in S3 statements", name)
}

// getAttArn reads !GetAtt X.Arn (or [X, Arn]) and returns X.
func getAttArn(n *yaml.Node) (string, error) {
	fn, arg, ok := intrinsic(n)
	if !ok || fn != "GetAtt" {
		return "", fmt.Errorf("want !GetAtt <Role>.Arn")
	}
	if arg.Kind == yaml.SequenceNode && len(arg.Content) == 2 && arg.Content[1].Value == "Arn" {
		return arg.Content[0].Value, nil
	}
	if id, ok := strings.CutSuffix(arg.Value, ".Arn"); ok && id != "" {
		return id, nil
	}
	return "", fmt.Errorf("want !GetAtt <Role>.Arn, got %q", arg.Value)
}

// ymap is the value of key in a mapping node (nil if absent).
func ymap(n *yaml.Node, key string) *yaml.Node {
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

// S3ActionOf is the IAM action an S3 API operation (GetObject, or
// versitygw's s3_GetObject) is authorized as, for messages naming what a
// denied request needed.
func S3ActionOf(operation string) string {
	op := strings.TrimPrefix(operation, "s3_")
	switch op {
	case "GetObject", "HeadObject":
		return "s3:GetObject"
	case "PutObject":
		return "s3:PutObject"
	case "DeleteObject", "DeleteObjects":
		return "s3:DeleteObject"
	case "ListObjectsV2", "ListObjects", "HeadBucket":
		return "s3:ListBucket"
	case "GetBucketVersioning":
		return "s3:GetBucketVersioning"
	case "GetBucketLifecycleConfiguration":
		return "s3:GetLifecycleConfiguration"
	case "GetBucketNotificationConfiguration":
		return "s3:GetBucketNotification"
	}
	if op == "" {
		return "?"
	}
	return "s3:" + op
}
