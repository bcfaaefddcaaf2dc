// Package iampolicy reads the S3 grants of template.yaml's function roles and
// turns them into a bucket policy, so a local S3 server that enforces IAM
// (versitygw with IAM accounts, one per role) checks exactly what AWS will
// check. On AWS the statements live in each role's identity policy; for S3
// authorization a bucket policy statement naming the role's principal with
// the same actions, resources and conditions decides the same way. Nothing is
// hand-copied: a grant removed from the template is removed from the
// generated policy.
//
// Floor 8 of the layering (a package's floor is one above the highest floor
// it imports; floor 0 imports no tablekeep package). It owns the template
// reader for role statements (TemplateS3Statements, resolving the intrinsics
// an existing-bucket deployment uses), the policy writer (BucketPolicy) and
// the S3 operation-to-action table (S3ActionOf). Its users are tests
// (shared/awsfn's end-to-end and least-privilege tests) and
// infra/bucketpolicy; shared/awsfn and every package a function runs must
// not import it, so gopkg.in/yaml.v3 stays out of functions/tablekeep
// (TestBootstrapImportsNoYAML). It must not import: shared/cli,
// shared/embedded, shared/maintenance.
package iampolicy
