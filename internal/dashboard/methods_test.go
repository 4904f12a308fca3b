package dashboard

import (
	"context"
	"io"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestActionsRefuseOtherMethods: every action is done for a POST alone; a
// PUT, DELETE or PATCH that is right in every other way (token, origin,
// JSON body naming an item the action would change) is refused with 405
// and Allow: POST, and leaves Redis as it was.
func TestActionsRefuseOtherMethods(t *testing.T) {
	srv, rdb, keys := start(t, token, "a", "b", "c")
	ctx := context.Background()
	// What each action would change: a's pause (resume), b's cooldown
	// (run-now, pause), c's lock (cancel).
	rdb.HSet(ctx, keys.Pause("a"), "reason", "disk full")
	rdb.Set(ctx, keys.Cooldown("b"), "1", time.Hour)
	rdb.Set(ctx, keys.Lock("c"), "w1:1:abcd", time.Hour)
	before := dumpAll(t, rdb)

	bodies := map[string]string{"pause": `{"item":"b"}`, "resume": `{"item":"a"}`, "run-now": `{"item":"b"}`, "cancel": `{"item":"c"}`}
	for action, body := range bodies {
		for _, method := range []string{http.MethodPut, http.MethodDelete, http.MethodPatch} {
			req, err := http.NewRequest(method, srv.URL+"/api/"+action, strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+token)
			req.Header.Set("Origin", srv.URL)
			req.Header.Set("Sec-Fetch-Site", "same-origin")
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			out, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusMethodNotAllowed || res.Header.Get("Allow") != http.MethodPost {
				t.Errorf("%s /api/%s: %d (Allow %q) %s, want 405 with Allow: POST", method, action, res.StatusCode, res.Header.Get("Allow"), out)
			}
			if after := dumpAll(t, rdb); !maps.Equal(after, before) {
				t.Fatalf("%s /api/%s changed Redis", method, action)
			}
		}
	}
}

// dumpAll is every key of the test's server with its serialized value, so
// that a change to any member of any key shows.
func dumpAll(t *testing.T, rdb *redis.Client) map[string]string {
	t.Helper()
	ctx := context.Background()
	keys, err := rdb.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, k := range keys {
		out[k] = rdb.Dump(ctx, k).Val()
	}
	return out
}
