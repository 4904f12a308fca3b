package dashboard

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

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

// TestActionsArePostOnly: every action refuses any other method with 405,
// before the token is even looked at, and changes nothing.
func TestActionsArePostOnly(t *testing.T) {
	srv, rdb, keys := start(t, token, "a")
	for _, action := range []string{"pause", "resume", "run-now", "cancel", "add", "remove"} {
		for _, method := range []string{http.MethodGet, http.MethodHead, http.MethodPut, http.MethodDelete, http.MethodPatch} {
			req, _ := http.NewRequest(method, srv.URL+"/api/"+action, strings.NewReader(`{"item":"b"}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+token)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusMethodNotAllowed || res.Header.Get("Allow") != http.MethodPost {
				t.Errorf("%s /api/%s: %d, Allow %q; want 405, POST", method, action, res.StatusCode, res.Header.Get("Allow"))
			}
		}
	}
	if got := rdb.LRange(context.Background(), keys.List(), 0, -1).Val(); !slices.Equal(got, []string{"a"}) {
		t.Errorf("the list is %q", got)
	}
}
