package dashboard

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/w8y/w8y/internal/schema"
)

// TestWorkersJSON: GET /api/workers lists the live workers of the registry,
// what they run escaped so that no reply holds markup, and not a worker
// whose entry has expired.
func TestWorkersJSON(t *testing.T) {
	srv, rdb, keys := start(t, "", "a")
	ctx := context.Background()
	now := time.Now()
	for i, w := range []struct {
		holder  string
		expires time.Time
		running string
	}{
		{"web-1:10:aa", now.Add(time.Minute), strconv.FormatInt(now.UnixMilli(), 10) + " " + hostile[0]},
		{"web-2:20:bb", now.Add(time.Minute), ""},
		{"dead:30:cc", now.Add(-time.Second), ""},
	} {
		rdb.HSet(ctx, keys.Worker(w.holder), schema.WorkerHolder, w.holder, schema.WorkerHost, "web", schema.WorkerPID, i+1,
			schema.WorkerStarted, now.Add(-time.Duration(3-i)*time.Hour).UnixMilli(), schema.WorkerState, map[bool]string{true: schema.WorkerBusy, false: schema.WorkerIdle}[w.running != ""],
			schema.WorkerRunning, w.running, schema.WorkerMode, "continuous")
		rdb.ZAdd(ctx, keys.Workers(), redis.Z{Score: float64(w.expires.UnixMilli()), Member: w.holder})
	}
	code, body, _ := get(t, srv.URL+"/api/workers")
	if code != http.StatusOK {
		t.Fatalf("GET /api/workers: %d %s", code, body)
	}
	for _, markup := range []string{"<", ">"} {
		if strings.Contains(body, markup) {
			t.Errorf("the reply holds %q unescaped: %s", markup, body)
		}
	}
	var page workersPage
	if err := json.Unmarshal([]byte(body), &page); err != nil {
		t.Fatal(err)
	}
	if len(page.Workers) != 2 || page.Workers[0].Holder != "web-1:10:aa" || page.Workers[1].Holder != "web-2:20:bb" {
		t.Fatalf("workers %+v, want web-1 and web-2, the oldest first, and not the dead one", page.Workers)
	}
	if w := page.Workers[0]; w.State != schema.WorkerBusy || len(w.Running) != 1 || w.Running[0].Item != hostile[0] {
		t.Errorf("web-1 %+v, want busy with %q", w, hostile[0])
	}
	if w := page.Workers[1]; w.State != schema.WorkerIdle || len(w.Running) != 0 {
		t.Errorf("web-2 %+v, want idle", w)
	}
}
