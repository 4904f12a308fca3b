package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/w8y/w8y/internal/redistest"
	"github.com/w8y/w8y/internal/schema"
)

// TestEveryActionRepliesAlike: each action, add and remove too, replies
// with the same shape: the action's name and a result per item.
func TestEveryActionRepliesAlike(t *testing.T) {
	srv, rdb, keys := start(t, token, "a")
	ctx := context.Background()
	rdb.Set(ctx, keys.Lock("a"), "host:1:tok", time.Minute)
	steps := []struct {
		action, body string
		changed      int64
		holder       string
	}{
		{"add", `{"item":"new"}`, 1, ""},
		{"add", `{"item":"new"}`, 0, ""},
		// a runs: each result names the run that goes on.
		{"pause", `{"item":"a","reason":"vendor maintenance"}`, 1, "host:1:tok"},
		{"resume", `{"item":"a"}`, 1, "host:1:tok"},
		{"run-now", `{"item":"a"}`, 0, "host:1:tok"},
		{"cancel", `{"item":"a","reason":"stuck on the vendor"}`, 1, "host:1:tok"},
		{"remove", `{"item":"new"}`, 1, ""},
	}
	for _, step := range steps {
		code, out := post(t, srv.URL+"/api/"+step.action, step.body, nil)
		if code != http.StatusOK {
			t.Fatalf("%s %s: %d %s", step.action, step.body, code, out)
		}
		var reply struct {
			Action  string `json:"action"`
			Results []struct {
				Item    string  `json:"item"`
				Changed int64   `json:"changed"`
				Holder  *string `json:"holder"`
			} `json:"results"`
		}
		dec := json.NewDecoder(strings.NewReader(out))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&reply); err != nil {
			t.Fatalf("%s: %v in %s", step.action, err, out)
		}
		holder := ""
		if len(reply.Results) == 1 && reply.Results[0].Holder != nil {
			holder = *reply.Results[0].Holder
		}
		if reply.Action != step.action || len(reply.Results) != 1 || reply.Results[0].Changed != step.changed || holder != step.holder {
			t.Errorf("%s %s replied %s, want changed %d, holder %q", step.action, step.body, out, step.changed, step.holder)
		}
	}
	if got := rdb.HGet(ctx, keys.Cancel("a"), schema.CancelReason).Val(); got != "stuck on the vendor" {
		t.Errorf("the cancel's reason is %q, want what was typed", got)
	}
	if got := rdb.LRange(ctx, keys.List(), 0, -1).Val(); !slices.Equal(got, []string{"a"}) {
		t.Errorf("the list is %q after adding and removing new", got)
	}
}

// TestActionsRecordOneWho: a pause and a cancel from the page record the
// same who, the fleet's By, as w8yctl's pause and cancel record its one
// who, and so do the events of every change.
func TestActionsRecordOneWho(t *testing.T) {
	srv, rdb, keys := start(t, token, "a", "b")
	ctx := context.Background()
	const who = "tester@host (dashboard)"
	rdb.Set(ctx, keys.Lock("b"), "host:1:tok", time.Minute)
	rdb.XAdd(ctx, &redis.XAddArgs{Stream: keys.Events(), Values: []string{"type", schema.EventStart, "item", "b", "holder", "host:1:tok"}})
	for _, step := range []struct{ action, body string }{
		{"pause", `{"item":"a"}`}, {"cancel", `{"item":"b"}`}, {"resume", `{"item":"a"}`},
		{"run-now", `{"item":"a"}`}, {"add", `{"item":"c"}`}, {"remove", `{"item":"c"}`},
	} {
		if code, out := post(t, srv.URL+"/api/"+step.action, step.body, nil); code != http.StatusOK {
			t.Fatalf("%s: %d %s", step.action, code, out)
		}
		if step.action == "pause" {
			if paused := rdb.HGet(ctx, keys.Pause("a"), schema.PauseFieldBy).Val(); paused != who {
				t.Errorf("pause by %q, want %q", paused, who)
			}
		}
	}
	if cancelled := rdb.HGet(ctx, keys.Cancel("b"), schema.CancelBy).Val(); cancelled != who {
		t.Errorf("cancel by %q, want %q", cancelled, who)
	}
	var changes []string
	for _, m := range rdb.XRange(ctx, keys.Events(), "-", "+").Val() {
		if m.Values["type"] != schema.EventStart {
			changes = append(changes, fmt.Sprintf("%v by %v", m.Values["type"], m.Values["by"]))
		}
	}
	want := []string{"pause by " + who, "resume by " + who, "run_now by " + who, "add by " + who, "remove by " + who}
	if !slices.Equal(changes, want) {
		t.Errorf("the events of the changes are %q, want %q", changes, want)
	}
}

// TestActionsArePostOnly: every action is done for a POST alone. Any other
// method is refused with 405 and Allow: POST, and leaves Redis as it was,
// whether the request has nothing but the token (the method is looked at
// before anything else) or is right in every other way (token, origin,
// JSON body naming an item that the action would change).
func TestActionsArePostOnly(t *testing.T) {
	srv, rdb, keys := start(t, token, "a", "b", "c")
	ctx := context.Background()
	// What each action would change: a's pause (resume) and occurrence
	// (remove), b's cooldown (run-now, pause), c's lock (cancel), and the
	// list (add).
	rdb.HSet(ctx, keys.Pause("a"), "reason", "disk full")
	rdb.Set(ctx, keys.Cooldown("b"), "1", time.Hour)
	rdb.Set(ctx, keys.Lock("c"), "w1:1:abcd", time.Hour)
	before := redistest.Lines(redistest.Dump(t, rdb, "*"))

	bodies := map[string]string{
		"pause": `{"item":"b"}`, "resume": `{"item":"a"}`, "run-now": `{"item":"b"}`, "cancel": `{"item":"c"}`,
		"add": `{"item":"d"}`, "remove": `{"item":"a"}`,
	}
	for _, tt := range []struct {
		name    string
		headers map[string]string
	}{
		{"only the token", map[string]string{"Authorization": "Bearer " + token}},
		{"right but for the method", map[string]string{"Authorization": "Bearer " + token, "Origin": srv.URL, "Sec-Fetch-Site": "same-origin"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for action, body := range bodies {
				for _, method := range []string{http.MethodGet, http.MethodHead, http.MethodPut, http.MethodDelete, http.MethodPatch} {
					req, err := http.NewRequest(method, srv.URL+"/api/"+action, strings.NewReader(body))
					if err != nil {
						t.Fatal(err)
					}
					req.Header.Set("Content-Type", "application/json")
					for name, value := range tt.headers {
						req.Header.Set(name, value)
					}
					res, err := http.DefaultClient.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					out, _ := io.ReadAll(res.Body)
					res.Body.Close()
					if res.StatusCode != http.StatusMethodNotAllowed || res.Header.Get("Allow") != http.MethodPost {
						t.Errorf("%s /api/%s: %d (Allow %q) %s, want 405 with Allow: POST", method, action, res.StatusCode, res.Header.Get("Allow"), out)
					}
					if after := redistest.Lines(redistest.Dump(t, rdb, "*")); !slices.Equal(after, before) {
						t.Fatalf("%s /api/%s changed Redis", method, action)
					}
				}
			}
		})
	}
}
