package maintenance_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tablekeep/tablekeep/shared/maintenance"
)

// fuzzMessageSeeds are the checked-in seeds of FuzzDecodeRangeMessage
// (rewrite them with TABLEKEEP_WRITE_FUZZ_SEEDS=1 go test -run TestWriteRangeMessageSeeds).
var fuzzMessageSeeds = map[string]string{
	"valid-0":          `{"v":1,"table":"tbl","root":"wh/tbl/","from":1,"to":2}`,
	"valid-cursor":     `{"v":1,"table":"tbl","root":"wh/tbl/","from":10,"to":20,"cursor":15}`,
	"valid-max-range":  `{"v":1,"table":"t","root":"r/","from":1,"to":100000}`,
	"invalid-negative": `{"v":1,"table":"tbl","root":"wh/tbl/","from":-1,"to":2}`,
	"invalid-huge":     `{"v":1,"table":"tbl","root":"wh/tbl/","from":1,"to":18446744073709551615}`,
	"invalid-unknown":  `{"v":1,"table":"tbl","root":"wh/tbl/","from":1,"to":2,"bucket":"x"}`,
	"invalid-trailing": `{"v":1,"table":"tbl","root":"wh/tbl/","from":1,"to":2}{}`,
	"invalid-not-json": `hello`,
	"invalid-cursor":   `{"v":1,"table":"tbl","root":"wh/tbl/","from":1,"to":2,"cursor":9}`,
	"invalid-escapes":  `{"v":1,"table":"\u003c\u003e","root":"` + strings.Repeat(`<`, 700) + `","from":1,"to":2}`,
}

// FuzzDecodeRangeMessage: DecodeRangeMessage never panics; every error
// wraps ErrInvalidMessage; an accepted message re-encodes (Encode, as a
// cleaner's continuation does) to a body that decodes to the same message.
func FuzzDecodeRangeMessage(f *testing.F) {
	for _, s := range fuzzMessageSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		m, err := maintenance.DecodeRangeMessage(body)
		if err != nil {
			if !errors.Is(err, maintenance.ErrInvalidMessage) {
				t.Fatalf("error %v does not wrap ErrInvalidMessage", err)
			}
			return
		}
		if m.V != 1 || m.Table == "" || m.From == 0 || m.To < m.From || m.To-m.From >= 100000 {
			t.Fatalf("accepted an invalid message: %+v", m)
		}
		enc := m.Encode()
		m2, err := maintenance.DecodeRangeMessage(enc)
		if err != nil {
			t.Fatalf("accepted %.200q, but its re-encoding %.200q is refused: %v", body, enc, err)
		}
		if m2 != m {
			t.Fatalf("decode(encode(m)) = %+v, want %+v", m2, m)
		}
		if string(m2.Encode()) != string(enc) {
			t.Fatalf("re-encoding is not stable")
		}
		// A continuation (cursor inside the range) must also be accepted.
		cont := m
		cont.Cursor = m.To
		if _, err := maintenance.DecodeRangeMessage(cont.Encode()); err != nil {
			t.Fatalf("continuation of accepted %+v refused: %v", m, err)
		}
	})
}

func TestWriteRangeMessageSeeds(t *testing.T) {
	if os.Getenv("TABLEKEEP_WRITE_FUZZ_SEEDS") == "" {
		t.Log("set TABLEKEEP_WRITE_FUZZ_SEEDS=1 to rewrite testdata/fuzz seeds")
		return
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzDecodeRangeMessage")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, s := range fuzzMessageSeeds {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", s)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
