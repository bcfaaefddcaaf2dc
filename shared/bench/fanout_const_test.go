package bench

import (
	"os"
	"regexp"
	"strconv"
	"testing"
)

// TestFanoutConcurrencyIsTheTemplateDefault: the fleet report models the
// fan-out with the template's CompactionMaxConcurrency default.
func TestFanoutConcurrencyIsTheTemplateDefault(t *testing.T) {
	b, err := os.ReadFile("../../template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^  CompactionMaxConcurrency:\n(?:    .*\n)*?    Default: (\d+)`).FindSubmatch(b)
	if m == nil {
		t.Fatal("template.yaml: no CompactionMaxConcurrency default")
	}
	if d, _ := strconv.Atoi(string(m[1])); d != FanoutConcurrency {
		t.Fatalf("template default %d, FanoutConcurrency %d", d, FanoutConcurrency)
	}
}
