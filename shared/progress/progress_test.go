package progress

import (
	"bytes"
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
