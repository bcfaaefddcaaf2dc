package cli

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestRegisterRefusesSecondNameSystemAndNestedRoots is issue 22 High 3
// (local): a root registered under another name, a system directory, a
// root inside a registered root or holding one are refused with one line;
// registering a name again at its own root still updates its policy.
func TestRegisterRefusesSecondNameSystemAndNestedRoots(t *testing.T) {
	for _, k := range []string{"TABLEKEEP_WAREHOUSE", "TABLEKEEP_LOCK_TABLE"} {
		t.Setenv(k, "")
	}
	dir := t.TempDir()
	for _, p := range []string{"t", "outer", "outer/inner", "box/x"} {
		ok(t, "", "create", "--table", filepath.Join(dir, p), "--schema", "name:utf8", "--key", "name")
	}
	w := "--warehouse=" + dir
	ok(t, "", "register", "prod", "t", w, "--keep-last", "10")
	fails(t, 1, "t is already registered as prod", "", "register", "scratch", "t", w, "--keep-last", "2")
	fails(t, 1, "t is already registered as prod", "", "register", "scratch", "t/", w)
	for _, sys := range []string{"_registry", "_stats", "_locks", "_fleet", "_stats/x"} {
		fails(t, 2, "system table: "+sys+" is the warehouse's own", "", "register", "x", sys, w)
	}
	ok(t, "", "register", "outer", "outer", w)
	fails(t, 1, "nested table roots: outer/inner lies inside outer, registered as outer", "", "register", "inner", "outer/inner", w)
	ok(t, "", "register", "x", "box/x", w)
	ok(t, "", "unregister", "outer", w)
	fails(t, 1, "nested table roots: box holds box/x, registered as x", "", "register", "y", "box", w)
	// prod again at t: allowed, the policy changes.
	if out := ok(t, "", "register", "prod", "t", w, "--keep-last", "5"); !strings.Contains(out, "keep-last 5") {
		t.Fatalf("re-register: %s", out)
	}
	out := ok(t, "", "tables", w)
	if strings.Contains(out, "scratch") || strings.Contains(out, "inner") || !regexpMatch(`(?m)^prod +tablekeep +t/ +5 `, out) {
		t.Fatalf("tables:\n%s", out)
	}
}
