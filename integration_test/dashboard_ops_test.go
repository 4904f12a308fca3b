package integration_test

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/redis/go-redis/v9"
	"github.com/w8y/w8y/internal/poll"
	"github.com/w8y/w8y/internal/redistest"
)

// serveDashboard starts w8yctl serve on the bundle's list, on a free port,
// with env (W8Y_DASHBOARD_TOKEN turns the actions on), and returns the
// page's address once it serves.
func serveDashboard(t *testing.T, b *bundle, env ...string) string {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", redistest.FreePort(t))
	serve := startCtl(t, env, b.at("serve", "--addr", addr)...)
	url := "http://" + addr + "/"
	poll.WaitFor(t, "w8yctl serve to say where it serves", func() bool {
		return strings.Contains(serve.stdoutSoFar(), "at "+url)
	})
	return url
}

// rowOf is the JavaScript for the table's row of item.
func rowOf(item string) string {
	return fmt.Sprintf(`document.querySelector('#items tbody tr[data-item=%s]')`, strconv.Quote(item))
}

// count is the JavaScript for the summary's count named name, or -1.
func count(name string) string {
	return fmt.Sprintf(`Number((document.querySelector('#summary [data-count=%q]') || {dataset: {n: -1}}).dataset.n)`, name)
}

// TestDashboardActionsInBrowser: an item that runs while paused shows as
// both, with a resume button, and the summary counts it once, as paused; a
// cancel carries the reason typed; items are added and removed from the
// page. No worker runs, so that each item stays as the test set it.
func TestDashboardActionsInBrowser(t *testing.T) {
	b := withList(t, "ops", "alpha", "held", "gone")
	// held runs (a lock as a worker's take writes it, with its entry
	// among the locks that the summary counts), and was paused meanwhile.
	b.Client.Set(ctx(t), b.key("lock:held"), "vm:4242:tok", 10*time.Minute)
	b.Client.ZAdd(ctx(t), b.key("locks"), redis.Z{Score: float64(b.Client.Time(ctx(t)).Val().Add(10 * time.Minute).UnixMilli()), Member: "held"})
	b.ctl("pause", "held", "--reason", "vendor maintenance").mustExit(t, 0)
	const token = "s3cret"
	url := serveDashboard(t, b, "W8Y_DASHBOARD_TOKEN="+token)
	tab := browser(t)
	dir := screenshots(t)

	act(t, tab, "open the dashboard", chromedp.Navigate(url), chromedp.WaitVisible(`#items tbody tr`))
	shows(t, tab, "held as running and paused, with resume and cancel and no pause",
		`(() => { const r = `+rowOf("held")+`; return r && r.cells[1].textContent === "running, paused (vendor maintenance)" &&
		  r.querySelector('button[data-action="resume"]') && r.querySelector('button[data-action="cancel"]') &&
		  !r.querySelector('button[data-action="pause"]'); })()`)
	shows(t, tab, "held counted once, as paused", count("items")+` === 3 && `+count("paused")+` === 1 && `+count("running")+` === 0 && `+
		`document.querySelector('#summary [data-count="paused"]').textContent === "1 paused (1 still running)"`)
	screenshot(t, tab, dir, "paused-running")

	// Cancel with a reason of the operator's own.
	act(t, tab, "type the token and the cancel's reason",
		chromedp.SendKeys(`#token`, token),
		chromedp.SendKeys(`#cancel-reason`, "stuck on the vendor"))
	click(t, tab, "cancel held with a reason", `#items tbody tr[data-item="held"] button[data-action="cancel"]`)
	poll.WaitFor(t, "held's cancel request in Redis", func() bool {
		return b.Client.HGet(ctx(t), b.key("cancel:held"), "reason").Val() == "stuck on the vendor"
	})
	shows(t, tab, "the cancel done", `document.getElementById("message").textContent === "cancel held: done"`)

	click(t, tab, "resume held", `#items tbody tr[data-item="held"] button[data-action="resume"]`)
	poll.WaitFor(t, "held's pause gone", func() bool { return b.Client.Exists(ctx(t), b.key("pause:held")).Val() == 0 })
	shows(t, tab, "held running, with pause", `(() => { const r = `+rowOf("held")+`; return r.cells[1].textContent === "locked" && r.querySelector('button[data-action="pause"]') !== null; })()`)

	// Add an item; remove one, which takes a second click.
	act(t, tab, "add delta", chromedp.SendKeys(`#add-item`, "delta"), chromedp.Click(`#add`))
	poll.WaitFor(t, "delta in the list", func() bool { return slices.Contains(b.list(), "delta") })
	shows(t, tab, "delta's row", rowOf("delta")+` !== null`)
	remove := `#items tbody tr[data-item="gone"] button[data-action="remove"]`
	click(t, tab, "click remove once", remove)
	shows(t, tab, "the remove asking again", `document.querySelector('`+remove+`').textContent === "remove? click again"`)
	// The table's refreshes keep the button as it is.
	refreshes := eval[int](t, tab, `state.refreshes`)
	shows(t, tab, "two more refreshes", fmt.Sprintf(`state.refreshes >= %d`, refreshes+2))
	if got := eval[string](t, tab, `document.querySelector('`+remove+`').textContent`); got != "remove? click again" {
		t.Fatalf("after a refresh, the remove button says %q", got)
	}
	if got := b.list(); !slices.Contains(got, "gone") {
		t.Fatalf("one click removed gone: %q", got)
	}
	click(t, tab, "click remove again", remove)
	poll.WaitFor(t, "gone out of the list", func() bool { return !slices.Contains(b.list(), "gone") })
	shows(t, tab, "gone's row gone", rowOf("gone")+` === null && `+count("items")+` === 3`)
	if got := b.list(); !slices.Equal(got, []string{"alpha", "held", "delta"}) {
		t.Errorf("the list is %q, want alpha, held, delta", got)
	}
}

// TestDashboardOnAHundredThousandItems: on a list of 100,000 items the
// page counts the whole list, shows the lag, and finds an item far past
// its first page by search; without a token, no action shows.
func TestDashboardOnAHundredThousandItems(t *testing.T) {
	b := withList(t, "big", redistest.Items(100_000)...)
	// The fleet has tried all but the last 10 (appended since).
	b.Client.Set(ctx(t), b.key("seen"), 99_990, 0)
	b.Client.Set(ctx(t), b.key("untried"), 0, 0)
	b.Client.Set(ctx(t), b.key("backoff:i77777"), "1", time.Hour)
	b.Client.Set(ctx(t), b.key("lock:i99999"), "vm:1:tok", time.Hour)
	// Two items due and not taken, the older a minute late, besides the 10
	// appended: their cooldowns, of an hour after runs that ended an hour
	// ago, ran out. (No worker is live: an item due since its run ended
	// would not be late.)
	late := float64(time.Now().Add(-time.Minute).UnixMilli())
	b.Client.ZAdd(ctx(t), b.key("due"), redis.Z{Member: "i5", Score: late}, redis.Z{Member: "i6", Score: late + 1000})
	for _, item := range []string{"i5", "i6"} {
		b.Client.HSet(ctx(t), b.key("state:"+item), "last_start", int64(late)-3_600_000, "last_end", int64(late)-3_600_000)
	}
	url := serveDashboard(t, b)
	tab := browser(t)
	dir := screenshots(t)

	act(t, tab, "open the dashboard", chromedp.Navigate(url), chromedp.WaitVisible(`#items tbody tr`))
	shows(t, tab, "the whole list's counts", count("items")+` === 100000 && `+count("running")+` === 1 && `+
		count("backoff")+` === 1 && `+count("failing")+` === 1 && `+count("cooling")+` === 0`)
	shows(t, tab, "the lag", `document.getElementById("lag").dataset.due === "12" && /due and not taken \(10 never tried\), the oldest waiting 1 min/.test(document.getElementById("lag").textContent)`)
	if got := eval[string](t, tab, `document.getElementById("range").textContent`); got != "1–100 of 100000" {
		t.Errorf("the pager says %q", got)
	}
	// Actions off: the boxes and the buttons are not there to be seen.
	if got := eval[string](t, tab, `getComputedStyle(document.getElementById("actions")).display`); got != "none" {
		t.Errorf("with actions off, the actions' boxes show (display %s)", got)
	}
	if n := eval[int](t, tab, `document.querySelectorAll("#items button").length`); n != 0 {
		t.Errorf("with actions off, the table shows %d buttons", n)
	}

	// Failing first: the whole list's failing item, far past the page.
	act(t, tab, "put failing items first", chromedp.Click(`#failing-first`))
	shows(t, tab, "i77777 on top of the page", `(() => { const n = `+itemNames+`; return n.length === 101 && n[0] === "i77777"; })()`)
	act(t, tab, "put failing items in list order", chromedp.Click(`#failing-first`))

	act(t, tab, "search i77777", chromedp.SendKeys(`#filter`, "i77777"))
	shows(t, tab, "i77777 alone, backing off", `(`+itemNames+`).join() === "i77777" && `+rowOf("i77777")+`.cells[1].textContent === "backoff"`)
	if got := eval[string](t, tab, `document.getElementById("range").textContent`); got != `1 item holds "i77777"` {
		t.Errorf("the search says %q", got)
	}
	screenshot(t, tab, dir, "dashboard-100k")
}

// TestDashboardShowsTheNextSlot: an item that cools down until its next
// slot under --schedule shows that slot in its row and in its view, in UTC
// to the second, as status shows it; an item under --cooldown shows none.
func TestDashboardShowsTheNextSlot(t *testing.T) {
	b := withList(t, "dslot", "nightly", "often")
	b.run("-q", "--schedule", "0 2 * * *", "--jitter", "30m", "--first-run-now", "true").mustExit(t, 0)
	b.run("-q", "--cooldown", "1h", "true").mustExit(t, 0)
	ms := atoi(t, b.Client.HGet(ctx(t), b.key("state:nightly"), "next_slot").Val())
	slot := time.UnixMilli(int64(ms)).UTC().Format("2006-01-02T15:04:05Z")
	url := serveDashboard(t, b)
	tab := browser(t)

	act(t, tab, "open the dashboard", chromedp.Navigate(url), chromedp.WaitVisible(`#items tbody tr`))
	shows(t, tab, "nightly's next slot, and none for often",
		`(() => { const n = `+rowOf("nightly")+`, o = `+rowOf("often")+`; return n && o &&
		  n.cells[1].textContent === "cooldown, next slot `+slot+`" && n.cells[1].querySelector("time").title !== "" &&
		  o.cells[1].textContent === "cooldown"; })()`)
	click(t, tab, "open nightly's view", `#items tbody tr[data-item="nightly"] td.item a`)
	shows(t, tab, "nightly's next slot in its view",
		`(() => { const f = document.querySelector('#detail-state dd[data-field="next_slot"]'); return f && f.textContent === "`+slot+`"; })()`)
	screenshot(t, tab, screenshots(t), "next-slot")
}

// TestDashboardShowsItemSettings: an item's own settings (w8yctl set) show
// in its row, whole on hover, and in its view, which follows an unset as
// it comes; an item without shows none.
func TestDashboardShowsItemSettings(t *testing.T) {
	b := withList(t, "downs", "big-customer", "small")
	// The events stream, which a fleet's first run starts, and which
	// w8yctl's changes then add to (it starts none).
	b.Client.XAdd(ctx(t), &redis.XAddArgs{Stream: b.key("events"), Values: []string{"type", "add", "item", "small", "by", "test"}})
	b.ctl("set", "big-customer", "--schedule", "@hourly", "--timeout", "2h").mustExit(t, 0)
	url := serveDashboard(t, b)
	tab := browser(t)

	act(t, tab, "open the dashboard", chromedp.Navigate(url), chromedp.WaitVisible(`#items tbody tr`))
	shows(t, tab, "big-customer's settings in its row, and none in small's",
		`(() => { const b = `+rowOf("big-customer")+`, s = `+rowOf("small")+`; if (!b || !s) return false;
		  const own = b.querySelector(".own"); return own && own.title === "--timeout 2h0m0s --schedule @hourly" &&
		  b.cells[1].textContent === "idle · own settings" && s.querySelector(".own") === null; })()`)
	click(t, tab, "open big-customer's view", `#items tbody tr[data-item="big-customer"] td.item a`)
	shows(t, tab, "big-customer's settings in its view",
		`(() => { const t = document.querySelector('#detail-settings dd[data-setting="timeout"]'),
		  s = document.querySelector('#detail-settings dd[data-setting="schedule"]');
		  return t && s && t.textContent === "2h0m0s" && s.textContent === "@hourly" &&
		    document.querySelector("#detail-runs tbody").textContent === "no runs of this item in the events stream"; })()`)
	if msg := eval[string](t, tab, `document.getElementById("error").textContent`); msg != "" {
		t.Errorf("the page says %q", msg)
	}
	screenshot(t, tab, screenshots(t), "item-settings")
	b.ctl("unset", "big-customer", "--timeout").mustExit(t, 0)
	shows(t, tab, "the unset in big-customer's view",
		`document.querySelector('#detail-settings dd[data-setting="timeout"]') === null &&
		  document.querySelector('#detail-settings dd[data-setting="schedule"]') !== null`)
	shows(t, tab, "the unset in big-customer's row",
		`(() => { const b = `+rowOf("big-customer")+`; return b && b.querySelector(".own") && b.querySelector(".own").title === "--schedule @hourly"; })()`)
}

// TestDashboardSearchIgnoresCase: in a real Chromium, typing a name in any
// case finds it, as an operator types it: "backup" finds Backup-DB (and
// backup-files), "BACKUP-db" Backup-DB alone, and "σίσυφος" the Greek
// ΣΊΣΥΦΟΣ, whose final sigma lower-casing alone does not match.
func TestDashboardSearchIgnoresCase(t *testing.T) {
	b := withList(t, "case", "Backup-DB", "backup-files", "ΣΊΣΥΦΟΣ", "Reports")
	url := serveDashboard(t, b)
	tab := browser(t)
	act(t, tab, "open the dashboard", chromedp.Navigate(url), chromedp.WaitVisible(`#items tbody tr`))
	for _, tt := range []struct{ query, want, says string }{
		{"backup", "Backup-DB,backup-files", `2 items hold "backup"`},
		{"BACKUP-db", "Backup-DB", `1 item holds "BACKUP-db"`},
		{"σίσυφος", "ΣΊΣΥΦΟΣ", `1 item holds "σίσυφος"`},
	} {
		eval[bool](t, tab, `(() => { document.getElementById("filter").value = ""; return true; })()`)
		act(t, tab, "type "+tt.query, chromedp.SendKeys(`#filter`, tt.query))
		shows(t, tab, tt.want+" for "+tt.query, fmt.Sprintf(`(%s).join() === %q && document.getElementById("range").textContent === %q`,
			itemNames, tt.want, tt.says))
	}
}
