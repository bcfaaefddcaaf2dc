package awsfn_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"gopkg.in/yaml.v3"

	"github.com/tablekeep/tablekeep/shared/awsfn"
	"github.com/tablekeep/tablekeep/shared/iampolicy"
	"github.com/tablekeep/tablekeep/shared/internal/testenv"
	"github.com/tablekeep/tablekeep/shared/objstore"
)

// roleKeys are the S3 credentials of one function role: a versitygw IAM
// account with role "user", which may do only what the bucket policy grants.
type roleKeys struct{ Access, Secret string }

// createRoleAccounts creates one versitygw IAM account per function role
// (fresh random keys, removed when the test ends) through the stack's admin
// API (TABLEKEEP_S3_ADMIN_ENDPOINT, which infra/stack-up.sh starts).
func createRoleAccounts(t *testing.T) map[awsfn.Role]roleKeys {
	t.Helper()
	admin := os.Getenv("TABLEKEEP_S3_ADMIN_ENDPOINT")
	if admin == "" {
		t.Fatal("TABLEKEEP_S3_ADMIN_ENDPOINT is not set: the local stack must run versitygw with IAM accounts " +
			"(infra/stack-up.sh does; run `make test`, or restart it with `make stack-down stack-up && source .stack/env`)")
	}
	bin := versitygwBinary(t)
	rootAccess, rootSecret := os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY")
	adminCmd := func(args ...string) error {
		cmd := exec.Command(bin, append([]string{"admin", "--access", rootAccess, "--secret", rootSecret,
			"--endpoint-url", admin}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("versitygw admin %s: %v: %s", args[0], err, out)
		}
		return nil
	}
	keys := map[awsfn.Role]roleKeys{}
	for _, role := range awsfn.Roles {
		var b [6]byte
		_, _ = rand.Read(b[:])
		k := roleKeys{Access: "tk" + string(role) + hex.EncodeToString(b[:]), Secret: "secret-" + hex.EncodeToString(b[:]) + string(role)}
		if err := adminCmd("create-user", "--access", k.Access, "--secret", k.Secret, "--role", "user"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = adminCmd("delete-user", "--access", k.Access) })
		keys[role] = k
	}
	return keys
}

func principalsOf(keys map[awsfn.Role]roleKeys) map[awsfn.Role]string {
	p := map[awsfn.Role]string{}
	for r, k := range keys {
		p[r] = k.Access
	}
	return p
}

// putTemplatePolicy generates the bucket policy from template (the role
// statements, resolved for st's bucket and prefix) and puts it on the
// bucket as root.
func putTemplatePolicy(t *testing.T, st *objstore.S3, template []byte, prefix string, keys map[awsfn.Role]roleKeys) {
	t.Helper()
	stmts, err := iampolicy.TemplateS3Statements(template, iampolicy.TemplateParams{Bucket: st.Bucket(), Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	pol, err := iampolicy.BucketPolicy(stmts, principalsOf(keys))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Client().PutBucketPolicy(context.Background(), &s3.PutBucketPolicyInput{
		Bucket: aws.String(st.Bucket()), Policy: aws.String(string(pol))}); err != nil {
		t.Fatalf("put bucket policy: %v\n%s", err, pol)
	}
}

func readTemplate(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "template.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// s3Request is one S3 request a function made, as the recorder saw it.
type s3Request struct {
	Requester string // access key id of the signature
	Operation string // GetObject, HeadObject, PutObject, DeleteObjects, ListObjectsV2, ...
	Key       string // object key; the list prefix for ListObjectsV2
	Status    int
	Denied    []string // keys (or "" for the request) answered AccessDenied
}

// Action is the IAM action the request is authorized as.
func (r s3Request) Action() string { return iampolicy.S3ActionOf(r.Operation) }

func (r s3Request) String() string {
	return fmt.Sprintf("%s %s (%s)", r.Operation, r.Key, r.Action())
}

// s3Recorder is a pass-through HTTP proxy in front of versitygw that records
// every request (who signed it, what it did, and what versitygw answered,
// including per-key AccessDenied inside a DeleteObjects answer). It decides
// nothing: versitygw enforces the policy; the recorder only names what was
// denied, so a test failure says which action on which key was missing.
type s3Recorder struct {
	srv    *httptest.Server
	target *url.URL
	mu     sync.Mutex
	reqs   []s3Request
}

var credentialRE = regexp.MustCompile(`Credential=([^/]+)/`)

func newS3Recorder(t *testing.T, endpoint string) *s3Recorder {
	t.Helper()
	u, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	rec := &s3Recorder{target: u}
	client := &http.Client{Transport: &http.Transport{}, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	rec.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		out, err := http.NewRequestWithContext(r.Context(), r.Method, u.Scheme+"://"+u.Host+r.URL.RequestURI(), bytes.NewReader(body))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		out.Header = r.Header.Clone()
		out.Host = r.Host // the signature covers the host the client addressed
		out.ContentLength = int64(len(body))
		if len(r.TransferEncoding) > 0 {
			out.TransferEncoding = r.TransferEncoding
		}
		resp, err := client.Do(out)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		respBody, _ := io.ReadAll(resp.Body)
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(respBody)
		rec.record(r, body, resp.StatusCode, respBody)
	}))
	t.Cleanup(rec.srv.Close)
	return rec
}

// URL is the endpoint the functions use (AWS_ENDPOINT_URL_S3).
func (rec *s3Recorder) URL() string { return rec.srv.URL }

func (rec *s3Recorder) record(r *http.Request, body []byte, status int, respBody []byte) {
	req := s3Request{Status: status}
	if m := credentialRE.FindStringSubmatch(r.Header.Get("Authorization")); m != nil {
		req.Requester = m[1]
	}
	_, key, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	q := r.URL.Query()
	switch {
	case r.Method == http.MethodPost && q.Has("delete"):
		req.Operation = "DeleteObjects"
		var d struct {
			Objects []struct{ Key string } `xml:"Object"`
		}
		_ = xml.Unmarshal(body, &d)
		var keys []string
		for _, o := range d.Objects {
			keys = append(keys, o.Key)
		}
		req.Key = strings.Join(keys, ",")
		var res struct {
			Errors []struct{ Key, Code string } `xml:"Error"`
		}
		if xml.Unmarshal(respBody, &res) == nil {
			for _, e := range res.Errors {
				if e.Code == "AccessDenied" {
					req.Denied = append(req.Denied, e.Key)
				}
			}
		}
	case key == "" && r.Method == http.MethodGet && q.Has("versioning"):
		req.Operation = "GetBucketVersioning"
	case key == "" && r.Method == http.MethodGet && q.Has("lifecycle"):
		req.Operation = "GetBucketLifecycleConfiguration"
	case key == "" && r.Method == http.MethodGet && q.Has("notification"):
		req.Operation = "GetBucketNotificationConfiguration"
	case key == "" && r.Method == http.MethodGet:
		req.Operation, req.Key = "ListObjectsV2", q.Get("prefix")
	case key == "" && r.Method == http.MethodHead:
		req.Operation = "HeadBucket"
	case r.Method == http.MethodGet:
		req.Operation, req.Key = "GetObject", key
	case r.Method == http.MethodHead:
		req.Operation, req.Key = "HeadObject", key
	case r.Method == http.MethodPut:
		req.Operation, req.Key = "PutObject", key
	case r.Method == http.MethodDelete:
		req.Operation, req.Key = "DeleteObject", key
	default:
		req.Operation, req.Key = r.Method, key
	}
	if status == http.StatusForbidden {
		req.Denied = append(req.Denied, req.Key)
	}
	rec.mu.Lock()
	rec.reqs = append(rec.reqs, req)
	rec.mu.Unlock()
}

// Requests returns what requester did, in order.
func (rec *s3Recorder) Requests(requester string) []s3Request {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var out []s3Request
	for _, r := range rec.reqs {
		if r.Requester == requester {
			out = append(out, r)
		}
	}
	return out
}

// denials describes every request of reqs that versitygw denied.
func denials(role awsfn.Role, reqs []s3Request) []string {
	var out []string
	for _, r := range reqs {
		for _, k := range r.Denied {
			out = append(out, fmt.Sprintf("%s role: AccessDenied on %s %s (needs %s)", role, r.Operation, k, r.Action()))
		}
	}
	return out
}

// keyShape folds numbers and hex ids out of a key, so one request per kind
// of object stands for all (…/_versions/00000012.json -> …/_versions/#.json).
var keyShapeRE = regexp.MustCompile(`[0-9a-f]{8,}|[0-9]+`)

// representatives keeps one request per (operation, key shape), splitting
// DeleteObjects into one request per key, in a stable order.
func representatives(reqs []s3Request) []s3Request {
	seen := map[string]bool{}
	var out []s3Request
	add := func(r s3Request) {
		id := r.Operation + " " + keyShapeRE.ReplaceAllString(r.Key, "#")
		if !seen[id] {
			seen[id] = true
			out = append(out, r)
		}
	}
	for _, r := range reqs {
		if r.Operation == "DeleteObjects" {
			for _, k := range strings.Split(r.Key, ",") {
				one := r
				one.Key = k
				add(one)
			}
			continue
		}
		add(r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// replay sends r again, as keys, to bucket at endpoint (root of the key
// space unchanged) and returns whether versitygw denied it. Replays are
// harmless on a scratch bucket: a read of a missing key is a 404, a write
// writes a tiny object, a delete of a missing key succeeds.
func replay(ctx context.Context, t *testing.T, c *s3.Client, bucket string, r s3Request) bool {
	t.Helper()
	var err error
	b := aws.String(bucket)
	switch r.Operation {
	case "GetObject":
		var out *s3.GetObjectOutput
		if out, err = c.GetObject(ctx, &s3.GetObjectInput{Bucket: b, Key: aws.String(r.Key)}); err == nil {
			out.Body.Close()
		}
	case "HeadObject":
		_, err = c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: b, Key: aws.String(r.Key)})
	case "PutObject":
		_, err = c.PutObject(ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String(r.Key), Body: strings.NewReader("replay")})
	case "DeleteObjects", "DeleteObject":
		var out *s3.DeleteObjectsOutput
		out, err = c.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: b, Delete: &s3types.Delete{
			Objects: []s3types.ObjectIdentifier{{Key: aws.String(r.Key)}}, Quiet: aws.Bool(true)}})
		if err == nil {
			for _, e := range out.Errors {
				if aws.ToString(e.Code) == "AccessDenied" {
					return true
				}
			}
		}
	case "ListObjectsV2":
		in := &s3.ListObjectsV2Input{Bucket: b, MaxKeys: aws.Int32(1)}
		if r.Key != "" {
			in.Prefix = aws.String(r.Key)
		}
		_, err = c.ListObjectsV2(ctx, in)
	case "HeadBucket":
		_, err = c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: b})
	case "GetBucketVersioning":
		_, err = c.GetBucketVersioning(ctx, &s3.GetBucketVersioningInput{Bucket: b})
	case "GetBucketNotificationConfiguration":
		_, err = c.GetBucketNotificationConfiguration(ctx, &s3.GetBucketNotificationConfigurationInput{Bucket: b})
	default:
		t.Fatalf("replay: unsupported operation %s", r)
	}
	if err == nil {
		return false
	}
	var ae smithy.APIError
	if errors.As(err, &ae) && (ae.ErrorCode() == "AccessDenied" || ae.ErrorCode() == "Forbidden") {
		return true
	}
	var nf *s3types.NotFound
	var nsk *s3types.NoSuchKey
	if errors.As(err, &nf) || errors.As(err, &nsk) || (errors.As(err, &ae) && ae.ErrorCode() == "NotFound") {
		return false
	}
	t.Fatalf("replay %s: %v", r, err)
	return false
}

func roleClient(t *testing.T, k roleKeys) *s3.Client {
	t.Helper()
	return s3.New(s3.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(testenv.S3Endpoint(t)), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(k.Access, k.Secret, ""),
	})
}

// grant is one action (on one resource) of one statement of a role's
// policy in the template, and the template with only that removed.
type grant struct {
	Role     awsfn.Role
	Name     string // e.g. CleanerRole/ReadDeleteWarehouse: s3:PutObject on arn:...
	Template []byte
}

// templateGrantsRemoved returns, for every S3 action of every statement of
// every function role in template (and every resource of a statement with
// several), the template with that one grant removed: the action dropped
// from the statement's Action list (the statement dropped if it was the
// only one).
func templateGrantsRemoved(t *testing.T, template []byte) []grant {
	t.Helper()
	var doc yaml.Node
	if err := yaml.Unmarshal(template, &doc); err != nil {
		t.Fatal(err)
	}
	res := path(doc.Content[0], "Resources")
	// Standalone policies count for the generator too; removals below
	// cover inline policies only, so none may grant S3 actions.
	for i := 0; i+1 < len(res.Content); i += 2 {
		if r := res.Content[i+1]; child(r, "Type").Value == "AWS::IAM::Policy" && strings.Contains(render(path(r, "Properties", "PolicyDocument")), "s3:") {
			t.Fatalf("%s grants S3 actions outside a role's inline policy: extend templateGrantsRemoved to remove them too", res.Content[i].Value)
		}
	}
	var out []grant
	for _, role := range awsfn.Roles {
		roleID := strings.TrimSuffix(strings.TrimPrefix(render(path(res, awsfn.FunctionLogicalID(role), "Properties", "Role")), "GetAtt:"), ".Arn")
		pols := path(res, roleID, "Properties", "Policies")
		if pols == nil {
			t.Fatalf("%s has no Policies", roleID)
		}
		for pi, pol := range pols.Content {
			stmts := path(pol, "PolicyDocument", "Statement")
			for si, s := range stmts.Content {
				sid := render(child(s, "Sid"))
				actions := child(s, "Action")
				if actions == nil {
					continue // a conditional statement (!If: the KMS grants), no S3 action
				}
				var acts []*yaml.Node
				if actions.Kind == yaml.SequenceNode {
					acts = actions.Content
				} else {
					acts = []*yaml.Node{actions}
				}
				for ai, a := range acts {
					if !strings.HasPrefix(a.Value, "s3:") {
						continue
					}
					mutated := mutateTemplate(t, template, func(res *yaml.Node) {
						st := path(res, roleID, "Properties", "Policies").Content[pi]
						list := path(st, "PolicyDocument", "Statement")
						s := list.Content[si]
						act := child(s, "Action")
						if act.Kind == yaml.SequenceNode && len(act.Content) > 1 {
							act.Content = append(act.Content[:ai:ai], act.Content[ai+1:]...)
						} else {
							list.Content = append(list.Content[:si:si], list.Content[si+1:]...)
						}
					})
					out = append(out, grant{Role: role, Template: mutated,
						Name: fmt.Sprintf("%s/%s: %s on %s", roleID, sid, a.Value, shortResource(render(child(s, "Resource"))))})
				}
			}
		}
	}
	return out
}

// shortResource drops the bucket's !If from a rendered resource:
// Sub:[arn:${AWS::Partition}:s3:::${Bucket}/${WarehousePrefix}/*,{Bucket=...}]
// -> arn:${AWS::Partition}:s3:::${Bucket}/${WarehousePrefix}/*.
func shortResource(r string) string {
	if i := strings.Index(r, ",{Bucket="); i > 0 && strings.HasPrefix(r, "Sub:[") {
		return r[len("Sub:["):i]
	}
	return r
}

func mutateTemplate(t *testing.T, template []byte, f func(resources *yaml.Node)) []byte {
	t.Helper()
	var doc yaml.Node
	if err := yaml.Unmarshal(template, &doc); err != nil {
		t.Fatal(err)
	}
	f(path(doc.Content[0], "Resources"))
	b, err := yaml.Marshal(&doc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
