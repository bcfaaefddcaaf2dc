package awsfn_test

import (
	"slices"
	"testing"

	"github.com/tablekeep/tablekeep/shared/awsfn"
	"github.com/tablekeep/tablekeep/shared/iampolicy"
	"github.com/tablekeep/tablekeep/shared/lance"
	"github.com/tablekeep/tablekeep/shared/table"
)

// TestTemplateCoversLeases: reader leases need nothing new deployed. The
// compactor's prune planner lists a table's lease directory (_leases/,
// and a Lance dataset's _tablekeep/leases/) and deletes stale names: its
// warehouse grants cover both. The cleaner and the sweeper never touch
// leases, and neither may write one (readers write leases, with their own
// credentials).
func TestTemplateCoversLeases(t *testing.T) {
	stmts, err := iampolicy.TemplateS3Statements(readTemplate(t), iampolicy.TemplateParams{Bucket: "bkt", Prefix: "wh"})
	if err != nil {
		t.Fatal(err)
	}
	allows := func(role awsfn.Role, action, resource, prefix string) bool {
		for _, s := range stmts {
			if s.Role != role || !slices.Contains(s.Actions, action) {
				continue
			}
			for _, r := range s.Resources {
				if !globAll(r, resource) {
					continue
				}
				if prefix == "" {
					return true
				}
				for _, p := range s.Condition["StringLike"]["s3:prefix"] {
					if globAll(p, prefix) {
						return true
					}
				}
			}
		}
		return false
	}
	for _, dir := range []string{"wh/t/" + table.LeasesPrefix, "wh/ds.lance/" + lance.LeasesDir} {
		key := "arn:aws:s3:::bkt/" + dir + "00000000000000000007-00000001893456000000-0123456789abcdef"
		if !allows(awsfn.RoleCompactor, "s3:ListBucket", "arn:aws:s3:::bkt", dir) {
			t.Errorf("compactor cannot list %s", dir)
		}
		if !allows(awsfn.RoleCompactor, "s3:DeleteObject", key, "") {
			t.Errorf("compactor cannot delete stale leases under %s", dir)
		}
		for _, r := range []awsfn.Role{awsfn.RoleCleaner, awsfn.RoleSweeper} {
			if allows(r, "s3:PutObject", key, "") {
				t.Errorf("%s may write a lease under %s", r, dir)
			}
		}
	}
}

// globAll matches pattern (with * spanning "/") against s.
func globAll(pattern, s string) bool {
	if pattern == "" {
		return s == ""
	}
	if pattern[0] == '*' {
		for i := 0; i <= len(s); i++ {
			if globAll(pattern[1:], s[i:]) {
				return true
			}
		}
		return false
	}
	return len(s) > 0 && (pattern[0] == s[0]) && globAll(pattern[1:], s[1:])
}
