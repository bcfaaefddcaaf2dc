package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDocsCLIExamples runs every ```console block of docs/cli.md, in order,
// in one empty directory, and checks each command's output (stdout and
// stderr, as a terminal shows them) against the document. Conventions:
//
//   - `$ tablekeep ARGS` runs the CLI (in-process); `$T` is `--table=./reg`;
//     `echo 'TEXT' | tablekeep ...` and `tablekeep ... < FILE` feed stdin.
//   - `$ cat FILE` followed by lines: the lines are FILE's content (the
//     test writes it).
//   - a line `...` in the expected output stands for any lines.
//   - timestamps, durations, byte sizes and runs of spaces are compared
//     loosely (they vary from run to run, and with them column widths).
func TestDocsCLIExamples(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "cli.md"))
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir())
	blocks := regexp.MustCompile("(?s)```console\n(.*?)```").FindAllStringSubmatch(string(doc), -1)
	if len(blocks) < 10 {
		t.Fatalf("only %d console blocks in docs/cli.md", len(blocks))
	}
	n := 0
	for _, b := range blocks {
		for _, c := range splitCommands(b[1]) {
			n++
			checkDocCommand(t, "docs/cli.md", c.cmd, c.want)
		}
	}
	t.Logf("%d commands of docs/cli.md checked", n)
}

type docCommand struct {
	cmd  string
	want []string
}

func splitCommands(block string) []docCommand {
	var out []docCommand
	for _, line := range strings.Split(strings.TrimSuffix(block, "\n"), "\n") {
		if cmd, ok := strings.CutPrefix(line, "$ "); ok {
			out = append(out, docCommand{cmd: cmd})
			continue
		}
		if len(out) > 0 {
			out[len(out)-1].want = append(out[len(out)-1].want, line)
		}
	}
	return out
}

// shellWords splits a command line as a POSIX shell would for the simple
// quoting the document uses ('...', "...").
func shellWords(s string) []string {
	var words []string
	var cur strings.Builder
	in, quote := false, rune(0)
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, in = r, true
		case r == ' ':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if in {
		words = append(words, cur.String())
	}
	return words
}

var docLoose = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`), "<TIME>"},
	{regexp.MustCompile(`took [0-9.]+[µmn]?s`), "took <D>"},
	{regexp.MustCompile(`\d+(\.\d+)? (B|KiB|MiB|GiB)\b`), "<SIZE>"},
	{regexp.MustCompile(`\(\d+ bytes\)`), "(<N> bytes)"},
	{regexp.MustCompile(`"(\w*bytes\w*|elapsed_ms)":\d+`), `"$1":<N>`},
	{regexp.MustCompile(`/tmp/\S+`), "<TMP>"},
	{regexp.MustCompile(`\b[0-9a-f]{16}\b`), "<ID>"},
	{regexp.MustCompile(` +`), " "},
}

func loosen(s string) string {
	for _, l := range docLoose {
		s = l.re.ReplaceAllString(s, l.with)
	}
	return strings.TrimRight(s, " ")
}

// checkDocCommand runs one command of doc's console blocks and checks its
// output.
func checkDocCommand(t *testing.T, doc, cmd string, want []string) {
	t.Helper()
	words := shellWords(strings.ReplaceAll(cmd, "$T", "--table=./reg"))
	var stdin string
	switch {
	case len(words) >= 1 && words[0] == "cat":
		if err := os.WriteFile(words[1], []byte(strings.Join(want, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	case len(words) >= 4 && words[0] == "echo" && words[2] == "|":
		stdin, words = words[1]+"\n", words[3:]
	}
	if len(words) >= 2 && words[len(words)-2] == "<" {
		b, err := os.ReadFile(words[len(words)-1])
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		stdin, words = string(b), words[:len(words)-2]
	}
	if len(words) == 0 || words[0] != "tablekeep" {
		t.Fatalf("%s: unsupported command %q in a console block", doc, cmd)
	}
	var out bytes.Buffer
	Run(context.Background(), words[1:], strings.NewReader(stdin), &out, &out)
	got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if out.Len() == 0 {
		got = nil
	}
	if !matchLines(got, want) {
		t.Errorf("%s: $ %s\ngot:\n%s\nthe document says:\n%s", doc, cmd, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// matchLines matches got against want, where a want line "..." stands for
// any number of lines.
func matchLines(got, want []string) bool {
	if len(want) == 0 {
		return len(got) == 0
	}
	if want[0] == "..." {
		for i := 0; i <= len(got); i++ {
			if matchLines(got[i:], want[1:]) {
				return true
			}
		}
		return false
	}
	return len(got) > 0 && loosen(got[0]) == loosen(want[0]) && matchLines(got[1:], want[1:])
}
