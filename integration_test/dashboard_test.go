package integration_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/w8y/w8y/internal/doctest"
	"github.com/w8y/w8y/internal/poll"
	"github.com/w8y/w8y/internal/redistest"
)

// chromium is Debian's Chromium, which scripts/ensure-chromium.sh installs.
const chromium = "/usr/bin/chromium"

// hostileItems are item names that would be markup, and run script, if the
// page pasted them in as HTML.
var hostileItems = []string{`<script>window.pwned=1</script>`, `"><img src=x onerror="window.pwned=1">`}

// screenshots is the folder that the browser tests write their PNGs to:
// $W8Y_SCREENSHOTS, or bin/screenshots.
func screenshots(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("W8Y_SCREENSHOTS")
	if dir == "" {
		dir = filepath.Join("..", "bin", "screenshots")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(dir)
	t.Logf("screenshots in %s", abs)
	return dir
}

// browser starts a headless Chromium of its own (a fresh profile, no
// background networking, which a machine without internet makes hang) and
// returns a tab's context, bounded by poll.Timeout times four.
func browser(t *testing.T) context.Context {
	t.Helper()
	if _, err := os.Stat(chromium); err != nil {
		t.Fatalf("the browser tests need %s: run scripts/ensure-chromium.sh (make test does)", chromium)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 800),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-default-browser-check", true),
	}
	ctx, cancelTimeout := context.WithTimeout(context.Background(), 4*poll.Timeout)
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	tab, cancelTab := chromedp.NewContext(alloc, chromedp.WithLogf(t.Logf))
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
		cancelTimeout()
	})
	if err := chromedp.Do(tab); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return tab
}

// act runs actions in the tab, failing the test with what if they fail.
func act(t *testing.T, tab context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(tab, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// click clicks the element that sel finds, as a person would. The page
// draws its tables again as the list changes: an element found and then
// replaced before the click lands is gone ("Could not find node with given
// id"), the click was never dispatched, and it is tried again on the
// element that replaced it.
func click(t *testing.T, tab context.Context, what, sel string) {
	t.Helper()
	var err error
	poll.Poll(poll.Timeout, func() bool {
		err = chromedp.Do(tab, chromedp.Click(sel))
		return err == nil || !strings.Contains(err.Error(), "node with given id")
	})
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// shows polls the page until the JavaScript expression cond is true.
func shows(t *testing.T, tab context.Context, what, cond string) {
	t.Helper()
	poll.WaitFor(t, "the page to show "+what, func() bool {
		ok, err := chromedp.Run(tab, chromedp.Evaluate[bool](cond))
		return err == nil && ok
	})
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](t *testing.T, tab context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(tab, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// screenshot saves the whole page as name.png.
func screenshot(t *testing.T, tab context.Context, dir, name string) {
	t.Helper()
	png, err := chromedp.Run(tab, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// colorScheme makes the page see the system's theme as scheme, light or
// dark.
func colorScheme(scheme string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}},
		})
		return err
	})
}

// filter sets the filter box to text, as typing would, and waits for the
// table to show only the items that hold it.
func filter(t *testing.T, tab context.Context, text string) {
	t.Helper()
	eval[bool](t, tab, fmt.Sprintf(`(() => { const f = document.getElementById("filter"); f.value = %q; f.dispatchEvent(new Event("input")); return true; })()`, text))
	shows(t, tab, fmt.Sprintf("only items with %q", text), fmt.Sprintf(`(() => { const n = %s; return n.length > 0 && n.every(i => i.includes(%q)); })()`, itemNames, text))
}

// itemNames is the JavaScript for the items that the table shows.
const itemNames = `Array.from(document.querySelectorAll("#items tbody td.item")).map(td => td.textContent)`

// TestDashboardInBrowser runs docs/operating.md's dashboard recipe against a list
// that three w8y workers work on, and checks in a real Chromium what an
// operator sees and can do.
func TestDashboardInBrowser(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	items := append([]string{"alpha", "beta", "broken"}, hostileItems...)
	s.seed(t, "work:list", items...)
	// broken fails, the others take a moment, so that the page has runs,
	// failures and holders to show. The cap of 3 holds none of the three
	// back, nor does the rate of 1000 starts a minute; they are there for
	// the page to show its places and its rate. Without
	// --keep-output, a failed run's output is kept all the same.
	child := `echo "out of $W8Y_ITEM"; case "$W8Y_ITEM" in broken) echo "ERROR: db timeout" >&2; exit 3;; esac; sleep 0.3`
	for range 3 {
		startW8y(t, portEnv(s), "-u", s.URL, "-k", "work", "-c", "-q", "--cooldown", "1s", "--failure-backoff", "1s",
			"--idle-wait", "50ms", "--fleet-max-running", "3", "--fleet-rate", "1000/1m", "sh", "-c", child)
	}

	// The recipe, as written, but on a free port.
	home := t.TempDir()
	addr := fmt.Sprintf("127.0.0.1:%d", redistest.FreePort(t))
	recipe := strings.ReplaceAll(doctest.Block(t, "docs/operating.md", "sh", "serve --addr"), "127.0.0.1:8080", addr)
	path := commandsPath(t)
	serve := startCommand(t, []string{path, "HOME=" + home, "W8Y_REDIS_URL=" + s.URL},
		"bash", "-c", "set -e\n"+recipe)
	url := "http://" + addr + "/"
	poll.WaitFor(t, "w8yctl serve to say where it serves", func() bool {
		return strings.Contains(serve.stdoutSoFar(), "at "+url)
	})
	if want := `serving the dashboard of "work:list" at ` + url + ", actions on (token set)\n"; serve.stdoutSoFar() != want {
		t.Errorf("serve printed %q, want %q", serve.stdoutSoFar(), want)
	}
	token, err := os.ReadFile(filepath.Join(home, ".w8y-dashboard-token"))
	if err != nil {
		t.Fatal(err)
	}
	dir := screenshots(t)
	tab := browser(t)

	// The items, in list order, with the fleet's runs.
	act(t, tab, "open the dashboard", chromedp.Navigate(url), chromedp.WaitVisible(`#items tbody tr`))
	shows(t, tab, "every item", `(`+itemNames+`).length === 5`)
	if got := eval[[]string](t, tab, itemNames); !sameItems(got, items) {
		t.Errorf("the table shows %q, want %q", got, items)
	}
	shows(t, tab, "runs of alpha and a failure of broken",
		`(() => { const row = (i) => Array.from(document.querySelectorAll("#items tbody tr")).find(r => r.dataset.item === i);
		  const a = row("alpha"), b = row("broken");
		  return a && b && Number(a.cells[7].textContent) > 0 && b.cells[6].textContent.startsWith("failure (3)"); })()`)
	// The workers view: the three live workers of the registry, by their
	// holder tokens, each idle or busy.
	shows(t, tab, "the three workers", `document.querySelectorAll("#workers tbody tr").length === 3 &&
		document.getElementById("workers-count").textContent.startsWith("3 workers live")`)
	holders := s.Client.ZRange(ctx(t), "work:workers", 0, -1).Val()
	shown := eval[[]string](t, tab, `Array.from(document.querySelectorAll("#workers tbody tr")).map(r => r.dataset.holder)`)
	if !sameItems(shown, holders) {
		t.Errorf("the workers view shows %q, the registry holds %q", shown, holders)
	}
	if states := eval[[]string](t, tab, `Array.from(document.querySelectorAll("#workers tbody tr")).map(r => r.cells[1].textContent)`); len(states) != 3 ||
		slices.ContainsFunc(states, func(s string) bool { return s != "busy" && s != "idle" }) {
		t.Errorf("the workers' states %q", states)
	}
	// The places of --fleet-max-running, under the lag.
	shows(t, tab, "the places in use", `(() => { const f = document.getElementById("places");
	  return !f.hidden && /^[0-3] of 3 in use \(--fleet-max-running\)$/.test(f.textContent); })()`)
	// The rate of --fleet-rate and the starts in its window, under the
	// places, as w8yctl status says them.
	shows(t, tab, "the rate", `(() => { const r = document.getElementById("rate");
	  return !r.hidden && /^rate: [1-9][0-9]* of 1000 in the last 1m \(--fleet-rate 1000\/1m\)$/.test(r.textContent) &&
	    r.dataset.limit === "1000"; })()`)
	// A server that may evict w8y's keys is said under the lag; none is
	// said while it does not.
	if !eval[bool](t, tab, `document.getElementById("redis").hidden`) {
		t.Error("the page warns of a Redis that neither evicts nor is a replica")
	}
	s.Client.ConfigSet(ctx(t), "maxmemory", "512mb")
	s.Client.ConfigSet(ctx(t), "maxmemory-policy", "allkeys-lru")
	shows(t, tab, "the eviction warning", `(() => { const r = document.getElementById("redis");
	  return !r.hidden && r.textContent.includes("maxmemory-policy allkeys-lru"); })()`)
	s.Client.ConfigSet(ctx(t), "maxmemory", "0")
	if got := eval[string](t, tab, `document.getElementById("list").textContent`); got != "work:list" {
		t.Errorf("the page names the list %q", got)
	}
	// The hostile names are text: the cells hold them whole, and no
	// element or script of theirs exists.
	for _, name := range hostileItems {
		shows(t, tab, "the item "+name+" as text in the table and the events",
			fmt.Sprintf(`(() => { const n = %q; const cells = (sel) => Array.from(document.querySelectorAll(sel)).filter(e => e.textContent === n).length;
			  return cells("#items td.item") === 1 && cells("#events .ev-item") > 0; })()`, name))
	}
	if n := eval[int](t, tab, `document.querySelectorAll("img, #items script, #events script, #workers script").length`); n != 0 {
		t.Errorf("the page holds %d elements made of item names", n)
	}
	if pwned := eval[bool](t, tab, `window.pwned === 1`); pwned {
		t.Error("an item name ran script")
	}
	screenshot(t, tab, dir, "dashboard")

	// Times are relative, with the absolute time on hover.
	shows(t, tab, "a relative time with the absolute one as its title",
		`Array.from(document.querySelectorAll("#items time")).some(e => /^(just now|\d+ (s|min|h|d) ago)$/.test(e.textContent) && e.title !== "" && e.dateTime.endsWith("Z"))`)

	// The system's theme, light or dark.
	background := `getComputedStyle(document.body).backgroundColor`
	for _, theme := range []struct{ scheme, background string }{{"dark", "rgb(15, 20, 25)"}, {"light", "rgb(255, 255, 255)"}} {
		act(t, tab, theme.scheme+" theme", colorScheme(theme.scheme))
		if got := eval[string](t, tab, background); got != theme.background {
			t.Errorf("in the %s theme the page's background is %s, want %s", theme.scheme, got, theme.background)
		}
		if theme.scheme == "dark" {
			screenshot(t, tab, dir, "dashboard-dark")
		}
	}

	act(t, tab, "look as a phone", chromedp.EmulateViewport(390, 844))
	screenshot(t, tab, dir, "dashboard-phone")
	act(t, tab, "look as a laptop", chromedp.EmulateViewport(1280, 800))

	// An item's view: its last run's kept output and its events alone,
	// from its name's link (filtered
	// down to its row, so that the click lands on it while the list
	// rotates).
	filter(t, tab, "broken")
	click(t, tab, "open broken's view", `#items tbody tr[data-item="broken"] td.item a`)
	shows(t, tab, "broken's events alone in its view",
		`(() => { const evs = Array.from(document.querySelectorAll("#detail-events .ev-item"));
		  return !document.getElementById("detail").hidden && document.getElementById("detail-name").textContent === "broken" &&
		    evs.length > 0 && evs.every(e => e.textContent === "broken"); })()`)
	shows(t, tab, "broken's kept output and exit code in its view",
		`(() => { const f = (n) => document.querySelector('#detail-state dd[data-field="' + n + '"]');
		  return f("last_stdout") && f("last_stdout").textContent === "out of broken\n" && f("last_stderr").textContent === "ERROR: db timeout\n" &&
		    f("last_exit_code").textContent === "3"; })()`)
	// Its recent runs, from the events stream: each failed with code 3,
	// ended, and names its holder.
	shows(t, tab, "broken's recent runs",
		`(() => { const rows = Array.from(document.querySelectorAll("#detail-runs tbody tr"));
		  return rows.length > 0 && rows.every(r => r.cells[2].textContent === "running" ||
		    (r.cells[2].textContent === "failure (3)" && r.cells[1].textContent !== "" && r.cells[4].title !== "")); })()`)
	// The list's runs and failures over the last hours.
	shows(t, tab, "runs and failures in the chart",
		`(() => { const sum = (sel, f) => Array.from(document.querySelectorAll(sel)).reduce((n, r) => n + Number(r.dataset[f]), 0);
		  return sum("#chart rect.runs", "runs") > 0 && sum("#chart rect.failures", "failures") > 0; })()`)
	screenshot(t, tab, dir, "item")
	act(t, tab, "close broken's view", chromedp.Click(`#detail-close`))
	filter(t, tab, "")

	// A new event shows without a reload: the page keeps a mark that a
	// reload would lose.
	eval[bool](t, tab, `window.notReloaded = true`)
	runCtl(t, []string{"W8Y_REDIS_URL=" + s.URL}, "-k", "work", "add", "late").mustExit(t, 0)
	shows(t, tab, "the event of late's first run", `Array.from(document.querySelectorAll("#events .ev-item")).some(e => e.textContent === "late")`)
	if !eval[bool](t, tab, `window.notReloaded === true`) {
		t.Error("the page was reloaded")
	}
	screenshot(t, tab, dir, "new-event")

	// Pause alpha from its button: filtered down to its row, so that the
	// click lands on alpha's button while the list rotates.
	act(t, tab, "filter to alpha", chromedp.SendKeys(`#filter`, "alpha"))
	shows(t, tab, "alpha alone", `(`+itemNames+`).join() === "alpha"`)
	pauseButton := `#items tbody tr[data-item="alpha"] button[data-action="pause"]`
	click(t, tab, "pause without the token", pauseButton)
	shows(t, tab, "the pause refused", `document.getElementById("message").textContent.includes("401")`)
	if n := s.Client.Exists(ctx(t), "work:pause:alpha").Val(); n != 0 {
		t.Fatal("the pause without the token paused alpha")
	}
	screenshot(t, tab, dir, "pause-refused")

	act(t, tab, "type the token and the pause's reason and length",
		chromedp.SendKeys(`#token`, strings.TrimSpace(string(token))),
		chromedp.SendKeys(`#pause-reason`, "disk full"),
		chromedp.SendKeys(`#pause-for`, "1h"))
	click(t, tab, "pause with the token", pauseButton)
	poll.WaitFor(t, "alpha paused in Redis", func() bool {
		return s.Client.HGet(ctx(t), "work:pause:alpha", "reason").Val() == "disk full"
	})
	if ttl := s.Client.PTTL(ctx(t), "work:pause:alpha").Val(); ttl <= 59*time.Minute || ttl > time.Hour {
		t.Errorf("the pause lasts %s, want 1h", ttl)
	}
	shows(t, tab, "alpha paused", `document.querySelector('#items tbody tr[data-item="alpha"]').cells[1].textContent === "paused (disk full)"`)
	screenshot(t, tab, dir, "paused")
	// The token box's value is a property, never in the markup.
	if got := eval[string](t, tab, `document.documentElement.outerHTML`); strings.Contains(got, strings.TrimSpace(string(token))) {
		t.Error("the token shows in the page's markup")
	}

	// Failing first: the whole page again, broken on top.
	filter(t, tab, "")
	act(t, tab, "put failing items first", chromedp.Click(`#failing-first`))
	shows(t, tab, "broken first, and every item", `(() => { const n = `+itemNames+`; return n.length === 6 && n[0] === "broken"; })()`)
	screenshot(t, tab, dir, "failing-first")

	// The server ends with exit 0 on SIGTERM, as docs/operating.md says. bash
	// runs the recipe's last command in its own place, or as its child.
	pid := serve.cmd.Process.Pid
	if children := childrenOf(pid); len(children) == 1 {
		pid = children[0]
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	serve.wait(t).mustExit(t, 0)
}

// sameItems reports whether got holds the items of want, in any order:
// workers rotate the list while the page reads it.
func sameItems(got, want []string) bool {
	got, want = slices.Clone(got), slices.Clone(want)
	slices.Sort(got)
	slices.Sort(want)
	return slices.Equal(got, want)
}

// TestServeRefusesABusyAddr: an address that cannot be listened on is
// w8yctl's own failure, said in one line.
func TestServeRefusesABusyAddr(t *testing.T) {
	s := withList(t, "work", "a")
	// The Redis server holds its own port.
	r := runCtl(t, []string{"W8Y_REDIS_URL=" + s.URL}, "-k", "work", "serve", "--addr", fmt.Sprintf("127.0.0.1:%d", s.Port))
	r.wantExit(t, 125)
	oneLineOf(t, "w8yctl", r.Stderr, fmt.Sprintf("cannot listen on --addr 127.0.0.1:%d", s.Port))
}
