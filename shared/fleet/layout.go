package fleet

import (
	"fmt"
	"hash/fnv"
	"math"
	"strconv"
	"strings"
)

// The layout of _fleet/ under a warehouse root, in one place (docs/format.md
// 2.6): every key this package reads or writes is built or parsed here, and
// no other package writes under _fleet/ (TestOnlyFleetWritesFleetKeys).
//
//	_fleet/index/{shard, 2 hex}/{2^64-1-seq, 20 digits}.json   index shards, generation 0 (256 shards)
//	_fleet/index/g{gen, 20 digits}-{n}/{shard, 2 hex}/{2^64-1-seq, 20 digits}.json   index shards, generation gen (n shards)
//	_fleet/index/g{gen, 20 digits}-{n}/sealed.json             generation gen is complete
//	_fleet/{2^64-1-seq, 20 digits}.json                         single-object index of earlier releases
//	_fleet/scan.json                                            the safety-net scan's state
//	_fleet/retry/{table}                                        retry markers (AWS fan-out)
//	_fleet/inline-run/{start ns, 20 digits}-{id}.json          inline run records (AWS fan-out)
//	_fleet/inline-run.json                                      the inline run record of earlier releases

// Dir is the folder of the fleet index under the warehouse root
// (docs/format.md "Fleet index"). The catalog refuses a table there.
const Dir = "_fleet/"

// IndexDir is the folder of the index shards under Dir.
const IndexDir = Dir + "index/"

// The fan-out's objects under Dir: a retry marker
// per table in retry, RetryDir + name, and an inline run record per
// scheduled run working inline, InlineRunPrefix + "/" + id + ".json"
// (InlineRunPrefix + ".json" in earlier releases).
const (
	RetryDir        = Dir + "retry/"
	InlineRunPrefix = Dir + "inline-run"
)

// InlineRunDir is the folder of the inline run records.
const InlineRunDir = InlineRunPrefix + "/"

// ScanStateKey is the safety-net scan's state (state.go).
const ScanStateKey = Dir + "scan.json"

// Shards is the most shards the fleet index has, and the fixed number of
// the layout of earlier releases (generation 0): a table's mark lives in
// shard ShardOf(name, n) of its layout's n shards, so one maintenance
// rewrites the marks of about 1/n of the fleet, and a scan reads at most n
// objects (one GET per shard holding a mark).
const Shards = 256

// ShardsPerLevel is the step between the layouts' shard counts: 1, 16, 256.
const ShardsPerLevel = 16

// MarksPerShard is how many marks a shard holds at most before the index
// grows to the next level (TargetShards); it shrinks only below half.
const MarksPerShard = 512

// TargetShards is the number of shards an index of cur shards (0: none
// yet) should have for a fleet of tables: the smallest level (1, 16, 256)
// holding at most MarksPerShard per shard when growing; when shrinking,
// the smallest level holding at most MarksPerShard/2 per shard, if below
// cur (hysteresis: 16 shards become 1 below 257 tables, 1 becomes 16 above
// 512; 256 become 16 below 4,097, 16 become 256 above 8,192).
func TargetShards(tables, cur int) int {
	level := func(per int) int {
		n := 1
		for n < Shards && tables > per*n {
			n *= ShardsPerLevel
		}
		return n
	}
	up := level(MarksPerShard)
	if cur <= 0 || up >= cur {
		return up
	}
	return min(cur, level(MarksPerShard/2))
}

// ShardOf is the index shard of a table's mark in a layout of n shards:
// FNV-1a 32 of its registered name, modulo n.
func ShardOf(name string, n int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(name))
	return int(h.Sum32() % uint32(max(n, 1)))
}

// Layout is one generation of the index: its number and its shard count.
// Generation 0 is the layout of earlier releases, 256 shards directly
// under IndexDir; a generation g > 0 lives under IndexDir + "g{g, 20
// digits}-{n}/" and counts only once its seal object is written.
type Layout struct {
	Gen uint64
	N   int
}

// Legacy256 is the layout of earlier releases.
var Legacy256 = Layout{Gen: 0, N: Shards}

// validN reports whether n is a shard count a layout may have.
func validN(n int) bool { return n == 1 || n == ShardsPerLevel || n == Shards }

// Prefix is the layout's folder.
func (l Layout) Prefix(root string) string {
	if l.Gen == 0 {
		return root + IndexDir
	}
	return fmt.Sprintf("%s%sg%020d-%d/", root, IndexDir, l.Gen, l.N)
}

// SealKey is the object that completes a generation g > 0.
func SealKey(root string, l Layout) string { return l.Prefix(root) + "sealed.json" }

func ShardPrefix(root string, l Layout, shard int) string {
	return fmt.Sprintf("%s%02x/", l.Prefix(root), shard)
}

func ShardKey(root string, l Layout, shard int, seq uint64) string {
	return fmt.Sprintf("%s%020d.json", ShardPrefix(root, l, shard), math.MaxUint64-seq)
}

// ParseIndexKey parses a key under {root}_fleet/index/: a shard object of
// generation 0 ({2 hex}/{20 digits}.json), of a generation g > 0
// (g{20 digits}-{n}/{2 hex}/{20 digits}.json), or a seal
// (g{20 digits}-{n}/sealed.json, seal true). Anything else (a console
// folder marker, a key sorting before the digits, a shard beyond n, an n
// that is not 1, 16 or 256, generation 0 spelled with a g) is a stray.
func ParseIndexKey(root, key string) (l Layout, shard int, seq uint64, seal, ok bool) {
	rel, ok := strings.CutPrefix(key, root+IndexDir)
	if !ok {
		return Layout{}, 0, 0, false, false
	}
	l = Legacy256
	if strings.HasPrefix(rel, "g") {
		dir, rest, found := strings.Cut(rel, "/")
		if !found || len(dir) < 23 || dir[21] != '-' || strings.Trim(dir[1:21], "0123456789") != "" {
			return Layout{}, 0, 0, false, false
		}
		gen, err := strconv.ParseUint(dir[1:21], 10, 64)
		n, nerr := strconv.Atoi(dir[22:])
		if err != nil || nerr != nil || gen == 0 || gen > MaxSeq || !validN(n) || strconv.Itoa(n) != dir[22:] {
			return Layout{}, 0, 0, false, false
		}
		l = Layout{Gen: gen, N: n}
		if rest == "sealed.json" {
			return l, 0, 0, true, true
		}
		rel = rest
	}
	if len(rel) != 3+25 || rel[2] != '/' || !strings.HasSuffix(rel, ".json") {
		return Layout{}, 0, 0, false, false
	}
	sh, err := strconv.ParseUint(rel[:2], 16, 8)
	if err != nil || strings.ToLower(rel[:2]) != rel[:2] || int(sh) >= l.N {
		return Layout{}, 0, 0, false, false
	}
	digits := rel[3:23]
	if strings.Trim(digits, "0123456789") != "" {
		return Layout{}, 0, 0, false, false
	}
	inv, err := strconv.ParseUint(digits, 10, 64)
	if err != nil || inv == math.MaxUint64 || math.MaxUint64-inv > MaxSeq {
		return Layout{}, 0, 0, false, false // seq 0, or beyond any a writer reaches: a stray
	}
	return l, int(sh), math.MaxUint64 - inv, false, true
}

// ParseShardKey parses a shard object's key of generation 0
// ({root}_fleet/index/{2 hex}/{20 digits}.json).
func ParseShardKey(root, key string) (shard int, seq uint64, ok bool) {
	l, sh, seq, seal, ok := ParseIndexKey(root, key)
	if !ok || seal || l.Gen != 0 {
		return 0, 0, false
	}
	return sh, seq, true
}

// MaxSeq bounds a shard's sequence numbers (a writer at 2^63-1 refuses
// to go on; keys naming more are strays): far beyond any real count of
// writes, and no sum near the integer limit.
const MaxSeq = 1<<63 - 1

// isLegacyKey reports whether key is an index object of earlier releases,
// {root}_fleet/{20 digits}.json.
func isLegacyKey(root, key string) bool {
	rel, ok := strings.CutPrefix(key, root+Dir)
	return ok && len(rel) == 25 && strings.HasSuffix(rel, ".json") && strings.Trim(rel[:20], "0123456789") == ""
}

// RetryKey is a table's retry marker.
func RetryKey(root, table string) string { return root + RetryDir + table }

// RetryPrefix is the folder of the retry markers.
func RetryPrefix(root string) string { return root + RetryDir }

// InlineRunKey is the record of a scheduled run started at startNs (Unix
// nanoseconds, clamped at 0) with invocation id.
func InlineRunKey(root string, startNs int64, id string) string {
	return fmt.Sprintf("%s%s%020d-%s.json", root, InlineRunDir, max(startNs, 0), id)
}

// InlineRunsPrefix is what a LIST of the inline run records asks for (the
// records and the single record of earlier releases).
func InlineRunsPrefix(root string) string { return root + InlineRunPrefix }
