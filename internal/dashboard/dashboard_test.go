package dashboard

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"github.com/w8y/w8y/internal/control"
	"github.com/w8y/w8y/internal/poll"
	"github.com/w8y/w8y/internal/redistest"
	"github.com/w8y/w8y/internal/schema"
	"github.com/w8y/w8y/internal/status"
)

// hostile are item names that would be markup if a page pasted them in.
var hostile = []string{`<script>alert(1)</script>`, `"><img src=x onerror=alert(1)>`, `a&b'c`}

const token = "s3cret-token"

// start serves a dashboard of the list "db:list", which holds items, on a
// Redis of its own, with the actions' token tok ("" leaves them off).
func start(t *testing.T, tok string, items ...string) (*httptest.Server, *redis.Client, schema.Keys) {
	t.Helper()
	_, srv, rdb, keys := startServer(t, tok, items...)
	return srv, rdb, keys
}

// startServer is start, with the Server itself.
func startServer(t *testing.T, tok string, items ...string) (*Server, *httptest.Server, *redis.Client, schema.Keys) {
	t.Helper()
	rdb := redistest.Start(t).Client
	keys := schema.Keys{Prefix: "db:", Colocated: true}
	if len(items) > 0 {
		rdb.RPush(context.Background(), keys.List(), redistest.Values(items)...)
	}
	fleet := &control.Fleet{Client: rdb, Keys: keys, By: "tester@host (dashboard)"}
	s := &Server{
		Fleet: fleet, Status: &status.Reader{Client: rdb, Keys: keys}, Token: tok,
		Log: zerolog.Nop(), Now: time.Now,
	}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return s, srv, rdb, keys
}

func get(t *testing.T, url string) (int, string, http.Header) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(body), res.Header
}

// TestItemsJSON: GET /api/items is one page of the list with each item's
// status, its values escaped so that no reply holds markup, and bad paging
// is refused in words.
func TestItemsJSON(t *testing.T) {
	srv, rdb, keys := start(t, "", append([]string{"a", "b"}, hostile...)...)
	rdb.Set(context.Background(), keys.Lock("b"), "host:1:tok", time.Minute)

	code, body, h := get(t, srv.URL+"/api/items?offset=1&limit=3")
	if code != http.StatusOK || !strings.HasPrefix(h.Get("Content-Type"), "application/json") {
		t.Fatalf("GET /api/items: %d %s", code, h.Get("Content-Type"))
	}
	for _, markup := range []string{"<", ">", "&"} {
		if strings.Contains(body, markup) {
			t.Errorf("the reply holds %q unescaped: %s", markup, body)
		}
	}
	var page itemsPage
	if err := json.Unmarshal([]byte(body), &page); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, st := range page.Items {
		names = append(names, st.Item)
	}
	want := []string{"b", hostile[0], hostile[1]}
	if page.Length != 5 || page.Offset != 1 || strings.Join(names, "|") != strings.Join(want, "|") {
		t.Errorf("page = length %d, offset %d, items %q; want 5, 1, %q", page.Length, page.Offset, names, want)
	}
	if page.Items[0].State != status.StateLocked || *page.Items[0].Holder != "host:1:tok" {
		t.Errorf("b = %+v, want locked by host:1:tok", page.Items[0])
	}

	for _, query := range []string{"limit=0", "limit=501", "offset=-1", "offset=x"} {
		if code, body, _ := get(t, srv.URL+"/api/items?"+query); code != http.StatusBadRequest || !strings.Contains(body, "give a whole number") {
			t.Errorf("?%s: %d %s, want 400 and what to give", query, code, body)
		}
	}
}

// TestItemJSON: GET /api/item is the item's state hash, kept output and
// all, escaped, and its own settings; an item that never ran has an empty
// state, and one without settings empty settings.
func TestItemJSON(t *testing.T) {
	srv, rdb, keys := start(t, "", "a")
	rdb.HSet(context.Background(), keys.State("a"), "last_fence", "7", "last_stdout", hostile[0]+"\n")
	rdb.HSet(context.Background(), keys.Settings("a"), "timeout", "2h0m0s")
	code, body, _ := get(t, srv.URL+"/api/item?item=a")
	if code != http.StatusOK || strings.ContainsAny(body, "<>") {
		t.Fatalf("GET /api/item: %d %s", code, body)
	}
	var got struct {
		Item     string            `json:"item"`
		State    map[string]string `json:"state"`
		Settings map[string]string `json:"settings"`
	}
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	if got.Item != "a" || got.State["last_fence"] != "7" || got.State["last_stdout"] != hostile[0]+"\n" || got.Settings["timeout"] != "2h0m0s" {
		t.Errorf("item = %+v", got)
	}
	if _, body, _ := get(t, srv.URL+"/api/item?item=never"); body != `{"item":"never","settings":{},"state":{}}`+"\n" {
		t.Errorf("an item that never ran: %s", body)
	}
	if code, _, _ := get(t, srv.URL+"/api/item"); code != http.StatusBadRequest {
		t.Errorf("GET /api/item without an item: %d, want 400", code)
	}
}

// TestPageHoldsNoSecrets: the page and its config carry no token, and the
// headers forbid any script but the page's own.
func TestPageHoldsNoSecrets(t *testing.T) {
	srv, _, _ := start(t, token, "a")
	for _, path := range []string{"/", "/app.js", "/style.css", "/api/config"} {
		code, body, h := get(t, srv.URL+path)
		if code != http.StatusOK {
			t.Errorf("GET %s: %d", path, code)
		}
		if strings.Contains(body, token) {
			t.Errorf("GET %s shows the token", path)
		}
		if csp := h.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "default-src 'none'") {
			t.Errorf("GET %s: Content-Security-Policy %q", path, csp)
		}
	}
	if _, body, _ := get(t, srv.URL+"/api/config"); body != `{"actions":true,"list":"db:list"}`+"\n" {
		t.Errorf("config = %s", body)
	}
	// The script puts server values in as text only.
	_, js, _ := get(t, srv.URL+"/app.js")
	for _, sink := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("} {
		if strings.Contains(js, sink) {
			t.Errorf("app.js uses %s", sink)
		}
	}
}

// post sends an action as the page does, with header's changes.
func post(t *testing.T, url, body string, header map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Origin", strings.TrimSuffix(strings.SplitN(url, "/api/", 2)[0], "/"))
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	for name, value := range header {
		if value == "" {
			req.Header.Del(name)
		} else {
			req.Header.Set(name, value)
		}
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	out, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(out)
}

// TestActionsNeedTokenAndOrigin: an action is done only for a POST of
// JSON from the page's own origin with the token; anything else is refused
// with its own code and changes nothing in Redis.
func TestActionsNeedTokenAndOrigin(t *testing.T) {
	srv, rdb, keys := start(t, token, "a")
	ctx := context.Background()
	pause := srv.URL + "/api/pause"
	body := `{"item":"a","reason":"disk full","for":"1h"}`
	refused := []struct {
		name   string
		header map[string]string
		body   string
		code   int
	}{
		{"no token", map[string]string{"Authorization": ""}, body, http.StatusUnauthorized},
		{"wrong token", map[string]string{"Authorization": "Bearer s3cret-tokeN"}, body, http.StatusUnauthorized},
		{"token not as Bearer", map[string]string{"Authorization": token}, body, http.StatusUnauthorized},
		{"other origin", map[string]string{"Origin": "http://evil.example"}, body, http.StatusForbidden},
		{"null origin", map[string]string{"Origin": "null"}, body, http.StatusForbidden},
		{"cross-site fetch", map[string]string{"Sec-Fetch-Site": "cross-site"}, body, http.StatusForbidden},
		{"form post", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, "item=a", http.StatusUnsupportedMediaType},
		{"no item", nil, `{"reason":"x"}`, http.StatusBadRequest},
		{"unknown field", nil, `{"item":"a","evil":1}`, http.StatusBadRequest},
		{"bad duration", nil, `{"item":"a","for":"soon"}`, http.StatusBadRequest},
		{"item not in the list", nil, `{"item":"zz"}`, http.StatusConflict},
	}
	for _, tt := range refused {
		if code, out := post(t, pause, tt.body, tt.header); code != tt.code {
			t.Errorf("%s: %d %s, want %d", tt.name, code, out, tt.code)
		}
		if n := rdb.Exists(ctx, keys.Pause("a"), keys.Pause("zz")).Val(); n != 0 {
			t.Fatalf("%s: the item was paused", tt.name)
		}
	}
	// Add and remove are behind the token as the others are.
	for _, action := range []string{"add", "remove"} {
		for _, header := range []map[string]string{{"Authorization": ""}, {"Authorization": "Bearer s3cret-tokeN"}} {
			if code, out := post(t, srv.URL+"/api/"+action, `{"item":"a"}`, header); code != http.StatusUnauthorized {
				t.Errorf("%s with %q: %d %s, want 401", action, header["Authorization"], code, out)
			}
		}
	}
	if got := rdb.LRange(ctx, keys.List(), 0, -1).Val(); len(got) != 1 || got[0] != "a" {
		t.Errorf("the list is %q after refused adds and removes, want a alone", got)
	}
	if code, body, _ := get(t, pause); code != http.StatusMethodNotAllowed || !strings.Contains(body, "POST only") {
		t.Errorf("GET /api/pause: %d %s, want 405", code, body)
	}

	// Accepted: curl (no Origin), and the page itself.
	if code, out := post(t, pause, body, map[string]string{"Origin": "", "Sec-Fetch-Site": ""}); code != http.StatusOK {
		t.Fatalf("pause: %d %s", code, out)
	}
	got := rdb.HGetAll(ctx, keys.Pause("a")).Val()
	if got[schema.PauseFieldReason] != "disk full" || got[schema.PauseFieldBy] != "tester@host (dashboard)" {
		t.Errorf("pause hash = %v", got)
	}
	if ttl := rdb.PTTL(ctx, keys.Pause("a")).Val(); ttl <= 59*time.Minute || ttl > time.Hour {
		t.Errorf("pause TTL %s, want 1h", ttl)
	}
	if code, out := post(t, srv.URL+"/api/resume", `{"item":"a"}`, nil); code != http.StatusOK || rdb.Exists(ctx, keys.Pause("a")).Val() != 0 {
		t.Errorf("resume: %d %s, pause key left: %d", code, out, rdb.Exists(ctx, keys.Pause("a")).Val())
	}
	rdb.Set(ctx, keys.Cooldown("a"), "1", time.Hour)
	if code, out := post(t, srv.URL+"/api/run-now", `{"item":"a"}`, nil); code != http.StatusOK || rdb.Exists(ctx, keys.Cooldown("a")).Val() != 0 {
		t.Errorf("run-now: %d %s, cooldown left: %d", code, out, rdb.Exists(ctx, keys.Cooldown("a")).Val())
	}
	if code, out := post(t, srv.URL+"/api/cancel", `{"item":"a"}`, nil); code != http.StatusConflict || !strings.Contains(out, "not running") {
		t.Errorf("cancel of an idle item: %d %s, want 409 not running", code, out)
	}
	rdb.Set(ctx, keys.Lock("a"), "host:1:tok", time.Minute)
	if code, out := post(t, srv.URL+"/api/cancel", `{"item":"a","reason":"stuck"}`, nil); code != http.StatusOK || !strings.Contains(out, `"holder":"host:1:tok"`) {
		t.Errorf("cancel: %d %s", code, out)
	}
	if rdb.Exists(ctx, keys.Cancel("a")).Val() != 1 {
		t.Error("cancel wrote no request")
	}
}

// TestActionsOffWithoutToken: with no token configured, every action is
// refused, whatever the request carries; add and remove too, which leave
// the list as it was.
func TestActionsOffWithoutToken(t *testing.T) {
	srv, rdb, keys := start(t, "", "a")
	ctx := context.Background()
	rdb.Set(ctx, keys.Lock("a"), "host:1:tok", time.Minute)
	for _, action := range []string{"pause", "resume", "run-now", "cancel", "add", "remove"} {
		body := `{"item":"a"}`
		if action == "add" {
			body = `{"item":"new"}`
		}
		if code, out := post(t, srv.URL+"/api/"+action, body, map[string]string{"Authorization": "Bearer "}); code != http.StatusForbidden || !strings.Contains(out, "actions are off") {
			t.Errorf("%s: %d %s, want 403 actions are off", action, code, out)
		}
	}
	if n := rdb.Exists(ctx, keys.Pause("a"), keys.Cancel("a")).Val(); n != 0 {
		t.Error("the item was paused or cancelled")
	}
	if got := rdb.LRange(ctx, keys.List(), 0, -1).Val(); len(got) != 1 || got[0] != "a" {
		t.Errorf("the list is %q, want a alone", got)
	}
	if _, body, _ := get(t, srv.URL+"/api/config"); !strings.Contains(body, `"actions":false`) {
		t.Errorf("config = %s", body)
	}
}

// TestEventsAndStream: GET /api/events gives the latest events and the
// newest ID; the stream then sends each new event as it is added, escaped,
// from that ID or, without one, from when it opened.
func TestEventsAndStream(t *testing.T) {
	for _, query := range []string{"?after=", ""} {
		t.Run("stream"+query, func(t *testing.T) { testEventsAndStream(t, query) })
	}
}

func testEventsAndStream(t *testing.T, query string) {
	srv, rdb, keys := start(t, "", "a")
	ctx := context.Background()
	rdb.XAdd(ctx, &redis.XAddArgs{Stream: keys.Events(), Values: []string{"type", "start", "item", "a", "holder", "h:1:x"}})
	var latest struct {
		Events []event `json:"events"`
		Newest string  `json:"newest"`
	}
	_, body, _ := get(t, srv.URL+"/api/events?n=5")
	if err := json.Unmarshal([]byte(body), &latest); err != nil {
		t.Fatal(err)
	}
	if len(latest.Events) != 1 || latest.Events[0].Fields["item"] != "a" || latest.Newest != latest.Events[0].ID {
		t.Fatalf("events = %s", body)
	}
	if code, _, _ := get(t, srv.URL+"/api/events/stream?after=x"); code != http.StatusBadRequest {
		t.Errorf("stream after x: %d, want 400", code)
	}

	if query != "" {
		query += latest.Newest
	}
	// A stream that misses an event would wait for it forever.
	streamCtx, cancel := context.WithTimeout(ctx, poll.Timeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(streamCtx, http.MethodGet, srv.URL+"/api/events/stream"+query, nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("stream Content-Type %q", ct)
	}
	lines := bufio.NewScanner(res.Body)
	// The stream is open once its first comment arrives: the event added
	// now is one it must send.
	if !lines.Scan() || !strings.HasPrefix(lines.Text(), ":") {
		t.Fatalf("stream starts with %q", lines.Text())
	}
	// Two events, the second while the stream may be between two reads.
	var ids []string
	for _, item := range hostile[:2] {
		ids = append(ids, rdb.XAdd(ctx, &redis.XAddArgs{Stream: keys.Events(), Values: []string{"type", "finish", "item", item, "result", "success"}}).Val())
	}
	for i, id := range ids {
		var data string
		for lines.Scan() {
			if d, ok := strings.CutPrefix(lines.Text(), "data: "); ok {
				data = d
				break
			}
			if line := lines.Text(); line != "" && line != "id: "+id {
				t.Errorf("stream line %q", line)
			}
		}
		var e event
		if err := json.Unmarshal([]byte(data), &e); err != nil || e.ID != id || e.Fields["item"] != hostile[i] {
			t.Fatalf("streamed %q (%v), want the event %s of %q", data, err, id, hostile[i])
		}
		if strings.ContainsAny(data, "<>") {
			t.Errorf("streamed data holds markup: %s", data)
		}
	}
}

// BenchmarkItemsPage is one refresh of the page, GET /api/items of 100
// items, on lists of 100 and of 100,000 items: the long list should cost
// about what the short one does.
func BenchmarkItemsPage(b *testing.B) {
	for _, n := range []int{100, 100_000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			rdb := redistest.Start(b).Client
			keys := schema.Keys{Prefix: "bench:", Colocated: true}
			items := redistest.Items(n)
			for i := 0; i < n; i += 10_000 {
				rdb.RPush(context.Background(), keys.List(), redistest.Values(items[i:min(i+10_000, n)])...)
			}
			s := &Server{Fleet: &control.Fleet{Client: rdb, Keys: keys}, Status: &status.Reader{Client: rdb, Keys: keys}, Log: zerolog.Nop(), Now: time.Now}
			srv := httptest.NewServer(s.Handler())
			b.Cleanup(srv.Close)
			url := fmt.Sprintf("%s/api/items?offset=%d&limit=100", srv.URL, n/2-50)
			for b.Loop() {
				res, err := http.Get(url)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != http.StatusOK {
					b.Fatalf("GET /api/items: %d", res.StatusCode)
				}
			}
		})
	}
}
