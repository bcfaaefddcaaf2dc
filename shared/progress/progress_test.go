package progress

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"testing"
)

func TestQuietWhenNotATerminal(t *testing.T) {
	var buf bytes.Buffer
	b := New(&buf, "x", 3)
	_ = b.Add(1)
	_ = b.Finish()
	if buf.Len() != 0 || For(&buf) != nil {
		t.Fatalf("wrote %q to a buffer", buf.String())
	}
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if IsTerminal(f) || For(f) != nil {
		t.Fatal("a regular file is not a terminal")
	}
}

func TestBarOnWriter(t *testing.T) {
	var buf bytes.Buffer
	b := newBar(&buf, "maintain", 2)
	_ = b.Add(1)
	_ = b.Add(1)
	_ = b.Finish()
	if !bytes.Contains(buf.Bytes(), []byte("maintain")) {
		t.Fatalf("bar output %q", buf.String())
	}
}

// TestPhases: Start draws a bar for a phase of at least MinTicked items
// with the step names of ctx, and nothing without bars or for a short phase.
func TestPhases(t *testing.T) {
	var descs []string
	bars := Func(func(desc string, total int) Bar {
		descs = append(descs, fmt.Sprintf("%s %d", desc, total))
		return none{}
	})
	ctx := Named(Named(WithBars(context.Background(), bars), "reg"), "sweep")
	Start(ctx, "reading manifests", 20001)
	Start(ctx, "short", MinTicked-1)
	Start(Named(context.Background(), "reg"), "no bars", 20001)
	if len(descs) != 1 || descs[0] != "reg: sweep: reading manifests 20001" {
		t.Fatalf("bars %q", descs)
	}
}
