package control

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
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
	case <-time.After(redistest.Timeout):
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
