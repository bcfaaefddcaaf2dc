package statuspage

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"
)

var now = time.Date(2026, 12, 4, 18, 0, 0, 0, time.UTC)

func history(n int) []Point {
	h := make([]Point, n)
	for i := range h {
		h[i] = Point{At: now.Add(time.Duration(i-n) * 15 * time.Minute), Versions: 10 + i%7, Fragments: 3 + i%5,
			ManifestBytes: int64(1000 + 100*i), Unreclaimed: i % 3}
	}
	return h
}

// TestPageBoundAt10000Tables: 10,000 tables, every one failing with a
// long name and error and a long history, and 10,000 healthy ones: the page
// stays under MaxBytes, shows DefaultMaxDetail in detail and counts the
// rest.
func TestPageBoundAt10000Tables(t *testing.T) {
	for _, h := range []Health{Failing, Healthy} {
		long := history(500)
		p := Page{Warehouse: "s3://bucket/warehouse", Generated: now, Source: "the compactor's pass"}
		for i := range 10_000 {
			p.Tables = append(p.Tables, Table{Name: fmt.Sprintf("%s-%06d", strings.Repeat("n", 120), i), Format: "tablekeep",
				Health: h, Reason: strings.Repeat("reason ", 200), LastError: strings.Repeat("<err> ", 500),
				LeaseHold: strings.Repeat("lease ", 100), LastOutcome: "failed", LastMaintained: now.Add(-time.Duration(i) * time.Minute),
				Versions: 1 << 40, Fragments: 1 << 40, History: long})
		}
		var b bytes.Buffer
		if err := Write(&b, p); err != nil {
			t.Fatal(err)
		}
		if b.Len() > MaxBytes {
			t.Fatalf("%s: %d bytes, want at most %d", h, b.Len(), MaxBytes)
		}
		s := b.String()
		if n := strings.Count(s, `<tr class="`+string(h)+`" id=`); n != DefaultMaxDetail {
			t.Fatalf("%s: %d detail rows, want %d", h, n, DefaultMaxDetail)
		}
		if !strings.Contains(s, "<b>10,000</b><span>"+string(h)+"</span>") || !strings.Contains(s, "Not shown in detail: ") {
			t.Fatalf("%s: counts missing", h)
		}
		// The most recently maintained are the ones shown.
		if !strings.Contains(s, "-000000") || !strings.Contains(s, fmt.Sprintf("-%06d", DefaultMaxDetail-1)) || strings.Contains(s, fmt.Sprintf("-%06d", DefaultMaxDetail)) {
			t.Fatalf("%s: wrong tables in detail", h)
		}
		t.Logf("%s: %d bytes", h, b.Len())
	}
}

// TestPageOrderAndEscaping: failing, then behind, then healthy, each
// with a text label; names and errors are escaped; no script and no
// external reference.
func TestPageOrderAndEscaping(t *testing.T) {
	p := Page{Warehouse: "file:///w", Generated: now, Tables: []Table{
		{Name: "ok1", Health: Healthy, Format: "tablekeep", LastMaintained: now.Add(-time.Hour), History: history(5)},
		{Name: "late", Health: Behind, Format: "lance", Reason: "16 versions prunable since 2026-12-04T10:00:00Z"},
		{Name: "bad<script>alert(1)</script>", Health: Failing, LastError: `<img src=x onerror="x">`, LastOutcome: "failed"},
	}, Notes: []string{"versioned <bucket>"}}
	var b bytes.Buffer
	if err := Write(&b, p); err != nil {
		t.Fatal(err)
	}
	s := b.String()
	iFail, iBehind, iOK := strings.Index(s, "FAILING</span>"), strings.Index(s, "BEHIND</span>"), strings.Index(s, "HEALTHY</span>")
	if iFail < 0 || iBehind < iFail || iOK < iBehind {
		t.Fatalf("order: failing %d behind %d healthy %d", iFail, iBehind, iOK)
	}
	for _, bad := range []string{"<script", "<img", "http://", "https://", "@import", "url("} {
		if strings.Contains(s, bad) {
			t.Fatalf("page contains %q", bad)
		}
	}
	for _, want := range []string{"&lt;script&gt;", "&lt;img src=x", "Why:</b> 16 versions prunable", "versioned &lt;bucket&gt;", "<svg", "<polyline points=\""} {
		if !strings.Contains(s, want) {
			t.Fatalf("page lacks %q", want)
		}
	}
}
