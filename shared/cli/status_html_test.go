package cli

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tablekeep/tablekeep/shared/lance/lancetest"
)

// EnvStatusScreenshot, set to a path, makes TestStatusHTMLInChromium copy
// its screenshot there (how docs/status-page.png is made).
const EnvStatusScreenshot = "TABLEKEEP_STATUS_SCREENSHOT"

// chromium runs headless Chromium on page with args (a private profile, no
// network, bounded in time) and returns its stdout. Missing Chromium fails
// the test: it is part of `make test`.
func chromium(t *testing.T, page string, args ...string) []byte {
	t.Helper()
	bin, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("chromium not found (%v): the status page test needs headless Chromium; install it with `make tools` "+
			"or `sudo apt-get install -y chromium` (Debian's package)", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=" + t.TempDir(),
		"--no-first-run", "--no-default-browser-check", "--disable-extensions", "--disable-sync",
		"--disable-background-networking", "--disable-component-update", "--disable-default-apps",
		"--host-resolver-rules=MAP * ~NOTFOUND", "--hide-scrollbars"}
	cmd := exec.CommandContext(ctx, bin, append(append(base, args...), "file://"+page)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Dir = t.TempDir()
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, stderr.String())
	}
	return stdout.Bytes()
}

var (
	tagRE   = regexp.MustCompile(`<[^>]*>`)
	spaceRE = regexp.MustCompile(`\s+`)
)

// visibleText is the text of an HTML fragment with tags dropped and
// spaces collapsed (entities as Chromium serialises them).
func visibleText(html string) string {
	html = regexp.MustCompile(`(?s)<(style|title)[^>]*>.*?</(style|title)>`).ReplaceAllString(html, " ")
	s := tagRE.ReplaceAllString(html, " ")
	s = strings.NewReplacer("&amp;", "&", "&lt;", "<", "&gt;", ">", "&nbsp;", " ").Replace(s)
	return strings.TrimSpace(spaceRE.ReplaceAllString(s, " "))
}

// rowText is the visible text of the page's row of table (and its reason
// row), from the rendered DOM.
func rowText(t *testing.T, dom, table string) string {
	t.Helper()
	i := strings.Index(dom, `id="t-`+table+`"`)
	if i < 0 {
		t.Fatalf("no row for %s in the rendered page", table)
	}
	rest := dom[i:]
	end := len(rest)
	if j := strings.Index(rest[1:], `id="t-`); j >= 0 {
		end = strings.LastIndex(rest[:j+1], "<tr")
	}
	if j := strings.Index(rest, "</tbody>"); j >= 0 && j < end {
		end = j
	}
	return visibleText(`<tr ` + rest[:end])
}

// TestStatusHTMLInChromium: a warehouse with a healthy table, a behind
// table (16 versions prunable for longer than --max-lag), a failing one
// (its latest manifest corrupt) and a Lance dataset; `status --html`
// writes one page that headless Chromium renders: each table's row says
// its state in words, the unhealthy first, the counts at the top; the page
// references nothing outside itself; the screenshot is not blank and
// shows the failing red and the behind amber.
func TestStatusHTMLInChromium(t *testing.T) {
	t.Setenv(EnvAllowClockAhead, "test")
	dir := t.TempDir()
	mk := func(name string, upserts int) {
		tbl := filepath.Join(dir, name)
		ok(t, "", "create", "--table", tbl, "--schema", "name:utf8,uri:utf8", "--key", "name")
		for i := range upserts {
			ok(t, fmt.Sprintf("{\"name\":\"k%d\",\"uri\":\"u%d\"}\n", i%6, i), "upsert", "--table", tbl, "--format", "jsonl")
		}
		ok(t, "", "register", name, name, "--warehouse", dir)
	}
	mk("orders", 1)
	mk("events", 3)
	mk("clicks", 3)
	lancetest.Create(t, filepath.Join(dir, "lance"), "vectors", 6, "")
	ok(t, "", "register", "vectors", "lance/vectors.lance", "--warehouse", dir, "--table-format", "lance", "--grace", "1h")
	// Four passes with writes between them: a history of a few _stats
	// points per table. events: more versions each time, prunable once
	// past their grace window (the clock 2 h ahead below).
	for pass := range 4 {
		ok(t, "", "maintain", "--warehouse", dir)
		for i := range 6 * (pass + 1) {
			ok(t, fmt.Sprintf("{\"name\":\"e%d\",\"uri\":\"u%d\"}\n", i%6, i), "upsert", "--table", filepath.Join(dir, "events"), "--format", "jsonl")
		}
		ok(t, fmt.Sprintf("{\"name\":\"z%d\",\"uri\":\"u\"}\n", pass), "upsert", "--table", filepath.Join(dir, "orders"), "--format", "jsonl")
	}
	ok(t, "", "maintain", "--warehouse", dir, "--table", "orders")
	// clicks: its latest manifest corrupt, and a pass that fails on it.
	vs, err := os.ReadDir(filepath.Join(dir, "clicks", "_versions"))
	if err != nil || len(vs) == 0 {
		t.Fatalf("clicks versions: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "clicks", "_versions", vs[0].Name()), []byte("not a manifest"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := run(t, "", "maintain", "--warehouse", dir, "--table", "clicks"); r.code != 1 {
		t.Fatalf("maintain of a corrupt table: exit %d, want 1 (%s)", r.code, r.err)
	}

	page := filepath.Join(t.TempDir(), "status.html")
	r := run(t, "", "status", "--warehouse", dir, "--html", page, "--clock-ahead", "2h", "--max-lag", "30m")
	if r.code != 1 || !strings.Contains(r.err, "unhealthy tables") {
		t.Fatalf("status: exit %d, stderr %q, want 1 (unhealthy)", r.code, r.err)
	}
	raw, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"<script", "http://", "https://", "@import", "url(", "<link"} {
		if bytes.Contains(raw, []byte(bad)) {
			t.Fatalf("the page is not self-contained: it has %q", bad)
		}
	}

	dom := string(chromium(t, page, "--dump-dom", "--virtual-time-budget=2000"))
	text := visibleText(dom)
	for _, want := range []string{"tablekeep status", "failing", "behind", "healthy", "tables"} {
		if !strings.Contains(text, want) {
			t.Fatalf("page text lacks %q:\n%s", want, text)
		}
	}
	if !regexp.MustCompile(`\b1 failing\b`).MatchString(text) || !regexp.MustCompile(`\b(\d+) behind\b`).MatchString(text) {
		t.Fatalf("counts at the top:\n%s", text)
	}
	rows := map[string]string{}
	for _, name := range []string{"orders", "events", "clicks", "vectors"} {
		rows[name] = rowText(t, dom, name)
		t.Logf("%s: %s", name, rows[name])
	}
	for name, want := range map[string][]string{
		"clicks":  {"FAILING", "counts unknown: the table could not be read", "Why: status could not read it", "corrupt manifest", "failed"},
		"events":  {"BEHIND", "prunable", "Why: behind:", "versions prunable since"},
		"orders":  {"HEALTHY", "tablekeep", "5 rows", "0 prunable", "0 compactable", "ok", "versions", "manifests"},
		"vectors": {"lance", "prunable", "compactable", "14.3%", "versions 11"},
	} {
		for _, w := range want {
			if !strings.Contains(rows[name], w) {
				t.Errorf("%s's row lacks %q: %s", name, w, rows[name])
			}
		}
	}
	// Unhealthy first: clicks (failing), then events (behind), orders last
	// of the tablekeep tables.
	pos := func(name string) int { return strings.Index(dom, `id="t-`+name+`"`) }
	if !(pos("clicks") < pos("events") && pos("events") < pos("orders")) {
		t.Errorf("order: clicks %d, events %d, orders %d", pos("clicks"), pos("events"), pos("orders"))
	}
	// orders has a chart: two _stats points at least.
	if !strings.Contains(dom[pos("orders"):], "<polyline") {
		t.Errorf("orders has no history chart")
	}

	shot := filepath.Join(t.TempDir(), "status.png")
	chromium(t, page, "--screenshot="+shot, "--window-size=1200,900", "--virtual-time-budget=2000")
	checkScreenshot(t, shot)
	if dst := os.Getenv(EnvStatusScreenshot); dst != "" {
		b, err := os.ReadFile(shot)
		if err == nil {
			err = os.WriteFile(dst, b, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// checkScreenshot: the PNG is 1200x900, not blank (many colours, a good
// share of pixels not white), and shows the failing red (#b42318) and the
// behind amber (#fdb022) of the badges.
func checkScreenshot(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	b := img.Bounds()
	if b.Dx() != 1200 || b.Dy() != 900 {
		t.Fatalf("screenshot is %dx%d, want 1200x900", b.Dx(), b.Dy())
	}
	colours := map[uint32]bool{}
	var nonWhite, red, amber int
	near := func(r, g, bl, R, G, B uint32) bool {
		d := func(a, b uint32) uint32 { return max(a, b) - min(a, b) }
		return d(r, R) < 12 && d(g, G) < 12 && d(bl, B) < 12
	}
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			r, g, bl = r>>8, g>>8, bl>>8
			colours[r<<16|g<<8|bl] = true
			if r < 240 || g < 240 || bl < 240 {
				nonWhite++
			}
			if near(r, g, bl, 0xb4, 0x23, 0x18) {
				red++
			}
			if near(r, g, bl, 0xfd, 0xb0, 0x22) {
				amber++
			}
		}
	}
	total := b.Dx() * b.Dy()
	keys := make([]uint32, 0, len(colours))
	for c := range colours {
		keys = append(keys, c)
	}
	slices.Sort(keys)
	t.Logf("screenshot: %d colours, %d%% not white, %d red and %d amber pixels", len(keys), nonWhite*100/total, red, amber)
	if len(keys) < 100 || nonWhite < total/20 {
		t.Fatalf("screenshot looks blank: %d colours, %d of %d pixels not white", len(keys), nonWhite, total)
	}
	if red < 200 || amber < 200 {
		t.Fatalf("screenshot lacks the failing red (%d pixels) or the behind amber (%d pixels)", red, amber)
	}
}
