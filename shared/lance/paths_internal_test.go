package lance

import "testing"

// TestDataFileName: the names tablekeep gives its data files are Lance's
// (24 binary digits, 26 hex digits, ".lance"), all distinct, and
// IsLanceDataFileName takes those, LanceDB's own and the older 32-hex
// names, and nothing else.
func TestDataFileName(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		n := newName() + ".lance"
		if len(n) != 56 || !IsLanceDataFileName(n) || seen[n] {
			t.Fatalf("newName() = %q (seen before: %v)", n, seen[n])
		}
		seen[n] = true
	}
	for name, want := range map[string]bool{
		"110110110001011000011100757b854613939b8e9ca31ed65a.lance": true, // LanceDB 0.39
		"0001001001001100100000006bc392446f8da92b8c7ae411dc.lance": true, // LanceDB 0.31
		"6bc392446f8da92b8c7ae411dc0123ab.lance":                   true, // 32 hex
		"110110110001011000011102757b854613939b8e9ca31ed65a.lance": false,
		"110110110001011000011100757B854613939b8e9ca31ed65a.lance": false,
		"110110110001011000011100757b854613939b8e9ca31ed65a":       false,
		"110110110001011000011100757b854613939b8e9ca31ed65.lance":  false,
		"x.lance": false,
		".lance":  false,
	} {
		if got := IsLanceDataFileName(name); got != want {
			t.Errorf("IsLanceDataFileName(%q) = %v, want %v", name, got, want)
		}
	}
}
