package awsfn

import (
	"strings"
	"testing"

	"github.com/tablekeep/tablekeep/shared/objstore"
)

// The TEST-ONLY crash point is refused without TABLEKEEP_ALLOW_CLOCK_OFFSET=test
// and parsed strictly.
func TestCrashPointConfig(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	base := map[string]string{EnvWarehouse: "s3://tk-bucket/w", EnvCrashAfter: "3:delete:tables/"}
	if _, err := LoadConfig(RoleSweeper, env(base)); err == nil || !strings.Contains(err.Error(), EnvCrashAfter+" is for tests only") {
		t.Errorf("crash point without the test guard: %v", err)
	}
	base[EnvAllowOffset] = "test"
	c, err := LoadConfig(RoleSweeper, env(base))
	if err != nil || c.CrashAfter == nil || *c.CrashAfter != (CrashPoint{N: 3, Kind: objstore.KindDelete, KeySubstr: "tables/"}) {
		t.Fatalf("crash point: %+v %v", c.CrashAfter, err)
	}
	if !c.CrashAfter.matches(objstore.Op{Kind: objstore.KindDelete, Keys: []string{"w/a", "w/tables/x"}}) ||
		c.CrashAfter.matches(objstore.Op{Kind: objstore.KindPut, Key: "w/tables/x"}) ||
		c.CrashAfter.matches(objstore.Op{Kind: objstore.KindDelete, Keys: []string{"w/a"}}) {
		t.Error("matches")
	}
	for _, bad := range []string{"0", "-1", "x", "2:POST", "1.5"} {
		base[EnvCrashAfter] = bad
		if _, err := LoadConfig(RoleSweeper, env(base)); err == nil || !strings.Contains(err.Error(), EnvCrashAfter) {
			t.Errorf("%q accepted: %v", bad, err)
		}
	}
}
