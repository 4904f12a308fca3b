package control

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/w8y/w8y/internal/poll"
	"github.com/w8y/w8y/internal/redistest"
	"github.com/w8y/w8y/internal/schema"
)

func addEvent(t *testing.T, rdb *redis.Client, stream string, values ...string) string {
	t.Helper()
	id, err := rdb.XAdd(context.Background(), &redis.XAddArgs{Stream: stream, Values: values}).Result()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestEventsLastAndFollow: Events returns the latest matching events, oldest
// first, with their fields in w8y's order, and Follow goes on from there
// with each new one and nothing before it.
func TestEventsLastAndFollow(t *testing.T) {
	rdb := redistest.Start(t).Client
	keys := schema.Keys{Prefix: "ev:"}
	f := &Fleet{Client: rdb, Keys: keys}
	ctx := context.Background()
	for i := range 3 * eventsPage {
		item := "other"
		if i%100 == 0 {
			item = "a"
		}
		addEvent(t, rdb, keys.Events(), "holder", "h", "item", item, "type", "start")
	}
	last := addEvent(t, rdb, keys.Events(), "result", "success", "item", "b", "type", "finish", "holder", "h")

	got, newest, err := f.Events(ctx, EventFilter{Item: "a", Last: 20})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 15 || newest != last {
		t.Fatalf("%d events of a, newest %s; want all 15, newest %s", len(got), newest, last)
	}
	if got[0].ID >= got[14].ID {
		t.Errorf("events not oldest first: %s, then %s", got[0].ID, got[14].ID)
	}
	got, _, _ = f.Events(ctx, EventFilter{Last: 1})
	if len(got) != 1 || got[0].ID != last {
		t.Fatalf("the last event: %v", got)
	}
	var names []string
	for _, field := range got[0].Fields {
		names = append(names, field.Name)
	}
	if strings.Join(names, " ") != "type item holder result" {
		t.Errorf("fields in the order %q", names)
	}

	followCtx, stop := context.WithCancel(ctx)
	seen := make(chan Event, 10)
	done := make(chan error, 1)
	go func() {
		done <- f.Follow(followCtx, newest, "b", func(e Event) error {
			seen <- e
			return nil
		})
	}()
	addEvent(t, rdb, keys.Events(), "type", "start", "item", "not-b", "holder", "h")
	want := addEvent(t, rdb, keys.Events(), "type", "start", "item", "b", "holder", "h")
	select {
	case e := <-seen:
		if e.ID != want {
			t.Errorf("followed %s (%v), want %s", e.ID, e.Fields, want)
		}
	case <-time.After(poll.Timeout):
		t.Fatal("Follow did not see the new event")
	}
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Follow ended with %v after its context was done", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Follow did not end within 2s of its context")
	}
}

// TestEventsRefuseAMistypedPrefix: with neither list nor stream, Events
// says the prefix may be wrong.
func TestEventsRefuseAMistypedPrefix(t *testing.T) {
	rdb := redistest.Start(t).Client
	_, _, err := (&Fleet{Client: rdb, Keys: schema.Keys{Prefix: "typo:"}}).Events(context.Background(), EventFilter{Last: 10})
	if !errors.Is(err, ErrRefused) {
		t.Errorf("Events under a prefix with nothing: %v, want ErrRefused", err)
	}
}

// TestEventsSince: from an ID on, every matching event, oldest first, or
// the latest Last of them; and the newest entry to follow from.
func TestEventsSince(t *testing.T) {
	rdb := redistest.Start(t).Client
	keys := schema.Keys{Prefix: "since:"}
	f := &Fleet{Client: rdb, Keys: keys}
	var ids []string
	for i := range 2*eventsPage + 10 {
		ids = append(ids, addEvent(t, rdb, keys.Events(), "type", "start", "item", []string{"a", "b"}[i%2], "holder", "h"))
	}
	got, newest, err := f.Events(context.Background(), EventFilter{Since: ids[5], Item: "b"})
	if err != nil {
		t.Fatal(err)
	}
	// From the sixth entry on, every other one is b's.
	if want := (len(ids) - 4) / 2; len(got) != want || got[0].ID != ids[5] || newest != ids[len(ids)-1] {
		t.Errorf("%d events of b since %s, first %s, newest %s; want %d, %s, %s", len(got), ids[5], got[0].ID, newest, want, ids[5], ids[len(ids)-1])
	}
	got, _, _ = f.Events(context.Background(), EventFilter{Since: ids[5], Last: 3})
	if len(got) != 3 || got[2].ID != ids[len(ids)-1] {
		t.Errorf("the last 3 since %s: %d, ending %s", ids[5], len(got), got[len(got)-1].ID)
	}
	got, newest, _ = f.Events(context.Background(), EventFilter{Since: "(" + ids[len(ids)-1]})
	if len(got) != 0 || newest != ids[len(ids)-1] {
		t.Errorf("nothing since the newest: %d events, newest %s", len(got), newest)
	}
}
