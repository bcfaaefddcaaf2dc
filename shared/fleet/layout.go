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
//	_fleet/index/{shard, 2 hex}/{2^64-1-seq, 20 digits}.json   index shards
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

// Shards is the number of shards of the fleet index: a table's mark
// lives in shard ShardOf(name), so one maintenance rewrites the marks
// of about 1/Shards of the fleet, and a scan reads at most
// Shards objects (one GET per shard holding a mark) whatever the
// number of tables.
const Shards = 256

// ShardOf is the index shard of a table's mark: FNV-1a 32 of its
// registered name, modulo Shards.
func ShardOf(name string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(name))
	return int(h.Sum32() % Shards)
}

func ShardPrefix(root string, shard int) string {
	return fmt.Sprintf("%s%s%02x/", root, IndexDir, shard)
}

func ShardKey(root string, shard int, seq uint64) string {
	return fmt.Sprintf("%s%020d.json", ShardPrefix(root, shard), math.MaxUint64-seq)
}

// ParseShardKey parses {root}_fleet/index/{2 hex}/{20 digits}.json;
// anything else under the folder (a console folder marker, a key sorting
// before the digits) is a stray, stepped over.
func ParseShardKey(root, key string) (shard int, seq uint64, ok bool) {
	rel, ok := strings.CutPrefix(key, root+IndexDir)
	if !ok || len(rel) != 3+25 || rel[2] != '/' || !strings.HasSuffix(rel, ".json") {
		return 0, 0, false
	}
	sh, err := strconv.ParseUint(rel[:2], 16, 8)
	if err != nil || strings.ToLower(rel[:2]) != rel[:2] || int(sh) >= Shards {
		return 0, 0, false
	}
	digits := rel[3:23]
	if strings.Trim(digits, "0123456789") != "" {
		return 0, 0, false
	}
	inv, err := strconv.ParseUint(digits, 10, 64)
	if err != nil || inv == math.MaxUint64 || math.MaxUint64-inv > MaxSeq {
		return 0, 0, false // seq 0, or beyond any a writer reaches: a stray
	}
	return int(sh), math.MaxUint64 - inv, true
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
