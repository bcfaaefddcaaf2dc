package awsfn

import (
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/tablekeep/tablekeep/shared/objstore"
)

// EnvCrashAfter is FOR TESTS ONLY: "N[:KIND[:SUBSTRING]]" makes the process
// exit with status 137 (as if SIGKILLed) right after the Nth object-store
// request of KIND (GET, HEAD, PUT, LIST, DELETE; any if empty) whose key
// contains SUBSTRING was applied by the server, before its answer is used.
// It models a function killed mid-invocation. Refused unless
// TABLEKEEP_ALLOW_CLOCK_OFFSET=test.
const EnvCrashAfter = "TABLEKEEP_TEST_CRASH_AFTER_REQUESTS"

// CrashPoint is a parsed EnvCrashAfter.
type CrashPoint struct {
	N         int64
	Kind      objstore.Kind // "" matches every kind
	KeySubstr string        // "" matches every key
}

func (c *CrashPoint) String() string {
	return fmt.Sprintf("%d:%s:%s", c.N, c.Kind, c.KeySubstr)
}

// ParseCrashPoint parses an EnvCrashAfter value.
func ParseCrashPoint(v string) (*CrashPoint, error) {
	parts := strings.SplitN(v, ":", 3)
	n, err := strconv.ParseInt(parts[0], 10, 64)
	if err != nil || n < 1 {
		return nil, fmt.Errorf("%s=%q: want N[:KIND[:KEY-SUBSTRING]] with N >= 1", EnvCrashAfter, v)
	}
	c := &CrashPoint{N: n}
	if len(parts) > 1 && parts[1] != "" {
		switch k := objstore.Kind(strings.ToUpper(parts[1])); k {
		case objstore.KindGet, objstore.KindHead, objstore.KindPut, objstore.KindList, objstore.KindDelete:
			c.Kind = k
		default:
			return nil, fmt.Errorf("%s=%q: kind %q is not GET, HEAD, PUT, LIST or DELETE", EnvCrashAfter, v, parts[1])
		}
	}
	if len(parts) > 2 {
		c.KeySubstr = parts[2]
	}
	return c, nil
}

func (c *CrashPoint) matches(op objstore.Op) bool {
	if c.Kind != "" && op.Kind != c.Kind {
		return false
	}
	if c.KeySubstr == "" {
		return true
	}
	if strings.Contains(op.Key, c.KeySubstr) {
		return true
	}
	for _, k := range op.Keys {
		if strings.Contains(k, c.KeySubstr) {
			return true
		}
	}
	return false
}

// crashingStore wraps st so the process exits at c (see EnvCrashAfter).
func crashingStore(st objstore.Store, c *CrashPoint, logger *slog.Logger) objstore.Store {
	f := objstore.NewFaulty(st)
	var seen atomic.Int64
	f.SetAfter(func(n int64, op objstore.Op) error {
		if c.matches(op) && seen.Add(1) == c.N {
			logger.Error("TEST ONLY: crashing after an object-store request", "request", n, "kind", string(op.Kind),
				"key", op.Key, "keys", len(op.Keys), "crash_point", c.String())
			os.Exit(137)
		}
		return nil
	})
	return f
}
