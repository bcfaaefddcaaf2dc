package lance

import (
	"encoding/hex"
	"strings"
)

// dataFileStem names a new data file (relative to data/, without
// ".lance") as Lance names its own (generate_random_filename in
// rust/lance/src/dataset/fragment/write.rs), which LanceDB 0.31 and 0.39
// write: a random UUID v4's first 3 bytes as 24 binary digits, its other
// 13 as 26 hex digits. The binary prefix spreads the keys
// of data/ over S3's partitions from the first character on.
func dataFileStem() string {
	b := randomBytes(16)
	b[6] = b[6]&0x0f | 0x40 // version 4
	b[8] = b[8]&0x3f | 0x80 // RFC 4122 variant
	var sb strings.Builder
	sb.Grow(24 + 26)
	for _, c := range b[:3] {
		for i := 7; i >= 0; i-- {
			sb.WriteByte('0' + c>>i&1)
		}
	}
	sb.WriteString(hex.EncodeToString(b[3:]))
	return sb.String()
}

// IsLanceDataFileName reports whether name (relative to data/) is a data
// file name Lance writes: the binary-prefixed names above, or the 32 hex
// digits (a UUID without dashes) of older Lance releases and of
// tablekeep before it named files as Lance does. The sweep and the
// cleaners do not depend on it (they take any data/{name}.lance a manifest
// may name); tests use it to check what LanceDB and tablekeep write.
func IsLanceDataFileName(name string) bool {
	stem, ok := strings.CutSuffix(name, ".lance")
	if !ok {
		return false
	}
	isHex := func(s string) bool {
		_, err := hex.DecodeString(s)
		return err == nil && strings.ToLower(s) == s
	}
	switch len(stem) {
	case 50:
		return strings.Trim(stem[:24], "01") == "" && isHex(stem[24:])
	case 32:
		return isHex(stem)
	}
	return false
}
