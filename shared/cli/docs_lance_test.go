package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tablekeep/tablekeep/shared/internal/testenv"
	"github.com/tablekeep/tablekeep/shared/lance/lancetest"
)

// The quick start of docs/lance.md (and the README's): its section, its
// blocks, the commands they hold.
const (
	lanceQuickStart  = "## Quick start: a LanceDB dataset you already have"
	readmeQuickStart = "## Quick start for a LanceDB dataset"
	quickStartBucket = "my-bucket"
	quickStartLocks  = "tablekeep-locks"
)

// docSection is the text of file's section titled heading, up to the next
// "## " heading.
func docSection(t *testing.T, file, heading string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", file))
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("%s has no section %q", file, heading)
	}
	if i := strings.Index(sec, "\n## "); i >= 0 {
		sec = sec[:i]
	}
	return sec
}

// fenced returns the bodies of the section's blocks fenced as lang.
func fenced(sec, lang string) []string {
	var out []string
	for _, m := range regexp.MustCompile("(?s)```"+lang+"\n(.*?)```").FindAllStringSubmatch(sec, -1) {
		out = append(out, m[1])
	}
	return out
}

// shCommands are a sh block's lines without comments, trailing spaces and
// variable assignments (returned apart: name -> value).
func shCommands(block string) (cmds []string, vars map[string]string) {
	vars = map[string]string{}
	for _, line := range strings.Split(block, "\n") {
		line, _, _ = strings.Cut(line, "#")
		line = strings.Join(strings.Fields(line), " ")
		if line == "" {
			continue
		}
		if k, v, ok := strings.Cut(line, "="); ok && !strings.Contains(k, " ") {
			vars[k] = v
			continue
		}
		cmds = append(cmds, line)
	}
	return cmds, vars
}

// TestDocsLanceQuickStart: docs/lance.md's quick start runs as written,
// output and all, on a dataset LanceDB wrote (./lancedb/items.lance), and
// LanceDB then reads every version as before and the compaction's as its
// latest. The README's quick start is the same commands; the S3 block is
// them with the S3 warehouse (and maintain's lock table); the Lambda
// deployment's parameters exist and name that bucket and prefix.
func TestDocsLanceQuickStart(t *testing.T) {
	sec := docSection(t, "docs/lance.md", lanceQuickStart)
	readme := fenced(docSection(t, "README.md", readmeQuickStart), "sh")
	tmpl, err := os.ReadFile(filepath.Join("..", "..", "template.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	consoles := fenced(sec, "console")
	if len(consoles) != 1 {
		t.Fatalf("%d console blocks in the quick start, want 1", len(consoles))
	}
	dir := t.TempDir()
	db := filepath.Join(dir, "lancedb")
	lancetest.Node(t, nil, nil, "mixed", db, "items", "8")
	before := lancetest.Dump(t, db, "items")
	t.Chdir(dir)
	var local []string
	for _, c := range splitCommands(consoles[0]) {
		local = append(local, c.cmd)
		checkDocCommand(t, "docs/lance.md", c.cmd, c.want)
	}
	if len(local) != 4 {
		t.Fatalf("the quick start runs %d commands, want register, status, maintain --dry-run, maintain", len(local))
	}
	after := lancetest.Dump(t, db, "items")
	latest := before.Versions[len(before.Versions)-1]
	for _, v := range before.Versions {
		if k := strconv.FormatUint(v, 10); !slices.Equal(after.Rows[k], before.Rows[k]) {
			t.Fatalf("LanceDB reads version %d differently after maintain", v)
		}
	}
	if got := after.Versions[len(after.Versions)-1]; got != latest+1 || !slices.Equal(after.Rows[strconv.FormatUint(got, 10)], before.Rows[strconv.FormatUint(latest, 10)]) {
		t.Fatalf("LanceDB's latest after maintain: version %d, want %d with the rows of %d", got, latest+1, latest)
	}

	if len(readme) != 1 {
		t.Fatalf("%d sh blocks in the README's quick start, want 1", len(readme))
	}
	if cmds, _ := shCommands(readme[0]); !slices.Equal(cmds, local) {
		t.Fatalf("the README's quick start:\n%s\ndocs/lance.md's:\n%s", strings.Join(cmds, "\n"), strings.Join(local, "\n"))
	}

	sh := fenced(sec, "sh")
	if len(sh) != 2 {
		t.Fatalf("%d sh blocks in the quick start, want 2 (S3, then the deployment)", len(sh))
	}
	s3, vars := shCommands(sh[0])
	w := vars["W"]
	if w != "s3://"+quickStartBucket+"/lancedb" {
		t.Fatalf("the S3 block's W=%q", w)
	}
	var asLocal []string
	for _, c := range s3 {
		c = strings.ReplaceAll(c, "$W", "./lancedb")
		asLocal = append(asLocal, strings.ReplaceAll(c, " --lock-table "+quickStartLocks, ""))
	}
	if !slices.Equal(asLocal, local) {
		t.Fatalf("the S3 block is not the local one on S3:\n%s", strings.Join(s3, "\n"))
	}
	deploy, _ := shCommands(sh[1])
	if len(deploy) != 1 || !strings.HasPrefix(deploy[0], "sam build && sam deploy --guided --parameter-overrides ") {
		t.Fatalf("the deployment block: %q", deploy)
	}
	params := map[string]string{}
	for _, kv := range strings.Fields(strings.SplitN(deploy[0], "--parameter-overrides ", 2)[1]) {
		k, v, _ := strings.Cut(kv, "=")
		params[k] = v
		if !strings.Contains(string(tmpl), "\n  "+k+":\n") {
			t.Errorf("template.yaml has no parameter %s", k)
		}
	}
	if "s3://"+params["ExistingBucketName"]+"/"+params["WarehousePrefix"] != w {
		t.Fatalf("the deployment's bucket and prefix %v are not W=%s", params, w)
	}
}

// TestDocsLanceQuickStartOnS3: the quick start's S3 block, run as written
// on versitygw and moto (the bucket and the lock table replaced by the
// test's), on a dataset LanceDB wrote and copied there: it registers with
// the 7-day grace, the dry run plans the group, maintain folds it.
func TestDocsLanceQuickStartOnS3(t *testing.T) {
	stackEnv(t)
	st := testenv.S3Store(t)
	locks := lockTable(t)
	sec := docSection(t, "docs/lance.md", lanceQuickStart)
	sh := fenced(sec, "sh")
	if len(sh) < 1 {
		t.Fatal("no S3 block in the quick start")
	}
	cmds, vars := shCommands(sh[0])
	w := strings.Replace(vars["W"], "s3://"+quickStartBucket+"/", "s3://"+st.Bucket()+"/", 1)
	db := filepath.Join(t.TempDir(), "lancedb")
	lancetest.Node(t, nil, nil, "mixed", db, "items", "8")
	uploadNew(t, st, filepath.Join(db, "items.lance"), "lancedb/items.lance", map[string]bool{})
	want := []string{
		"as a lance dataset (12 versions, latest 12, 0 tags; keep-last 10, grace 168h,",
		"items  lance   ok      12",
		"compact group 1: fragments 1..6 (5): 7 rows (1 deleted), 4605 bytes",
		"lance: 5 fragments folded",
	}
	for i, c := range cmds {
		c = strings.ReplaceAll(strings.ReplaceAll(c, "$W", w), quickStartLocks, locks)
		words := shellWords(c)
		if words[0] != "tablekeep" {
			t.Fatalf("the S3 block runs %q", c)
		}
		if out := ok(t, "", words[1:]...); !strings.Contains(out, want[i]) {
			t.Fatalf("$ %s\n%s\nwant %q", c, out, want[i])
		}
	}
}
