package take

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/w8y/w8y/internal/finish"
	"github.com/w8y/w8y/internal/proc"
	"github.com/w8y/w8y/internal/redistest"
	"github.com/w8y/w8y/internal/schema"
)

// TestFinishThenLookAsTwoCalls: the finish of a run and the look for the
// next item in one call (FinishThenLook) leave Redis as the finish and then
// the look, sent one after the other, do: the same item taken, the same
// list, locks, keys and due entries, the same state and events; a look
// that takes nothing, or fails, still finishes the run.
func TestFinishThenLookAsTwoCalls(t *testing.T) {
	rdb := redistest.Start(t).Client
	ctx := context.Background()
	tests := []struct {
		name string
		// items are the list; due are the items whose due entry has
		// passed (the fleet has tried the whole list); "a", the first
		// item, is the run that ends.
		items, due []string
		end        finish.End
		schedule   finish.Schedule
		// before runs on each prefix after the take of "a".
		before func(keys schema.Keys)
		want   string
	}{
		{"a success, the next due", []string{"a", "b", "c"}, []string{"a", "c"},
			finish.End{Result: schema.ResultSuccess, Exited: true}, finish.Schedule{Cooldown: time.Hour}, nil, "c"},
		{"a success without cooldown: the same item again", []string{"a", "b"}, []string{"a"},
			finish.End{Result: schema.ResultSuccess, Exited: true}, finish.Schedule{}, nil, "a"},
		{"a failure that backs off", []string{"a", "b", "c"}, []string{"a", "b"},
			finish.End{Result: schema.ResultFailure, Exited: true, Exit: proc.Exit{Code: 3}}, finish.Schedule{Backoff: finish.Backoff{Min: time.Minute, Max: time.Hour}}, nil, "b"},
		{"nothing else due", []string{"a", "b"}, []string{"a"},
			finish.End{Result: schema.ResultSuccess, Exited: true}, finish.Schedule{Cooldown: time.Hour}, nil, ""},
		{"items at the head untried: left to the next take", []string{"a", "b", "c"}, []string{"a", "c"},
			finish.End{Result: schema.ResultSuccess, Exited: true}, finish.Schedule{Cooldown: time.Hour},
			func(keys schema.Keys) { rdb.Set(ctx, keys.Untried(), 2, 0) }, ""},
		{"the lock lost to another holder", []string{"a", "b", "c"}, []string{"a", "b"},
			finish.End{Result: schema.ResultLockLost, Exited: true, Exit: proc.Exit{Code: 143}}, finish.Schedule{},
			func(keys schema.Keys) { rdb.Set(ctx, keys.Lock("a"), "someone-else", time.Hour) }, "b"},
		{"a look that fails: the finish is written", []string{"a", "b", "c"}, []string{"a", "b"},
			finish.End{Result: schema.ResultSuccess, Exited: true}, finish.Schedule{Cooldown: time.Hour},
			func(keys schema.Keys) { rdb.Del(ctx, keys.Due()); rdb.Set(ctx, keys.Due(), "not a sorted set", 0) }, ""},
	}
	for n, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var took [2]string
			var dumps [2]string
			for i, oneCall := range []bool{false, true} {
				keys := schema.Keys{Prefix: fmt.Sprintf("next%d:%v:", n, oneCall), Colocated: true}
				redistest.Seed(t, rdb, keys.List(), tt.items...)
				rdb.Set(ctx, keys.Seen(), len(tt.items), 0)
				rdb.Set(ctx, keys.Untried(), 0, 0)
				// The fleet's sweep is not due: what a look takes comes
				// from the index alone.
				rdb.Set(ctx, keys.Sweep(), "0", time.Hour)
				for _, item := range tt.due {
					rdb.ZAdd(ctx, keys.Due(), redis.Z{Score: 1, Member: item})
				}
				var logs bytes.Buffer
				taker := testTaker(rdb, keys.Prefix, true, 0, &logs)
				rec := &finish.Recorder{Keys: keys, StateTTL: time.Hour, EventsMaxLen: 100}
				taker.Record = rec
				finisher := &finish.Finisher{Client: rdb, Record: rec, Schedule: tt.schedule, Jitter: func() string { return "1" }}
				first, err := taker.LookFirst().Take(ctx, nil)
				if err != nil || first.Item != "a" {
					t.Fatalf("the first take took %q (%v), want a", first.Item, err)
				}
				// A look's start record expires as a finish's does.
				for _, key := range []string{keys.State("a"), keys.Events()} {
					if ttl := rdb.PTTL(ctx, key).Val(); ttl <= 0 {
						t.Fatalf("the first take left %s without an expiry (PTTL %v)", key, ttl)
					}
				}
				if tt.before != nil {
					tt.before(keys)
				}
				end := tt.end
				end.Item, end.At, end.Started = "a", time.Now(), first.At
				if oneCall {
					done, next, ok, err := taker.FinishThenLook(ctx, finisher, first.Key, first.Token, end)
					if err != nil {
						t.Fatalf("FinishThenLook: %v", err)
					}
					if ok {
						took[i] = next.Item
					}
					if want := tt.end.Result != schema.ResultLockLost; done.Released != want {
						t.Errorf("FinishThenLook released the lock: %v, want %v", done.Released, want)
					}
				} else {
					if _, err := finisher.Finish(ctx, first.Key, first.Token, end); err != nil {
						t.Fatalf("Finish: %v", err)
					}
					got, err := lookScript.Run(ctx, rdb, []string{keys.List()}, taker.lookArgs("")...).Slice()
					if err == nil {
						if next, ok := taker.readTaken(got, time.Now()); ok {
							took[i] = next.Item
						}
					}
				}
				dumps[i] = describe(t, rdb, keys, false)
			}
			if took[0] != tt.want {
				t.Errorf("the finish and then a look took %q, want %q", took[0], tt.want)
			}
			if took[1] != took[0] {
				t.Errorf("one call took %q, two calls %q", took[1], took[0])
			}
			if dumps[1] != dumps[0] {
				t.Errorf("one call left\n%s\ntwo calls\n%s", dumps[1], dumps[0])
			}
		})
	}
}
