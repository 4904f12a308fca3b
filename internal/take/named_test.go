package take

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/w8y/w8y/internal/finish"
	"github.com/w8y/w8y/internal/jobctl"
	"github.com/w8y/w8y/internal/redistest"
	"github.com/w8y/w8y/internal/schema"
)

// TestWaitNamed: w8y --item's wait. A held lock is tried until the wait runs
// out (a HeldError that names it), taken once its holder gives it back, and
// given up on at once by a stop; the holder's lock is never touched.
func TestWaitNamed(t *testing.T) {
	rdb, ctx := redistest.Client(t)
	var logs bytes.Buffer
	tk := testTaker(rdb, "named:", true, 8, &logs)
	lock := tk.Keys.Lock("a")
	rdb.Set(ctx, lock, "someone-else", time.Hour)

	helds := 0
	_, err := tk.WaitNamed(ctx, "a", false, 300*time.Millisecond, nil, func(error) { helds++ })
	var held HeldError
	if !errors.As(err, &held) || !errors.Is(err, ErrHeld) || held.Wait != 300*time.Millisecond || helds != 1 {
		t.Errorf("held for the whole wait: %v (told %d times), want a HeldError after 300ms, told once", err, helds)
	}
	if !strings.Contains(err.Error(), "still after --wait 300ms") {
		t.Errorf("error %q does not name the wait", err)
	}

	stop := make(chan struct{})
	close(stop)
	if _, err := tk.WaitNamed(ctx, "a", false, time.Hour, stop, nil); !errors.Is(err, jobctl.ErrStopped) {
		t.Errorf("stopped: %v, want jobctl.ErrStopped", err)
	}
	if v := rdb.Get(ctx, lock).Val(); v != "someone-else" {
		t.Fatalf("the holder's lock holds %q", v)
	}

	// The holder gives the lock back once the wait is under way.
	waiting := make(chan struct{})
	go func() {
		<-waiting
		rdb.Del(context.Background(), lock)
	}()
	taken, err := tk.WaitNamed(ctx, "a", false, time.Minute, nil, func(error) { close(waiting) })
	if err != nil || taken.Item != "a" || rdb.Get(ctx, lock).Val() != testToken {
		t.Errorf("given back during the wait: %+v, %v; the lock holds %q", taken, err, rdb.Get(ctx, lock).Val())
	}
}

// stoppingClient ends the take's context once each.lua has taken a
// lock, as a stop signal does (see CutShort) between a lock taken by the
// pass per candidate and the round trips that complete it.
// A cooldown, if given, is set at the same moment, as a run of the item
// that finished meanwhile would have set it.
type stoppingClient struct {
	Client
	stop     context.CancelFunc
	cooldown string
}

func (c *stoppingClient) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	cmd := c.Client.EvalSha(ctx, sha, keys, args...)
	if sha == eachScript.Hash() && tookLock(cmd.Val()) {
		if c.cooldown != "" {
			c.Client.(*redis.Client).Set(context.Background(), c.cooldown, "other-host", time.Hour)
		}
		c.stop()
	}
	return cmd
}

// TestTakeEachCompletesALockAfterAStop: a stop that comes once the pass per
// candidate holds an item's lock does not leave that lock to expire: the
// take completes it (the check of its blockers, its fencing token and its
// start record) and returns the item, as a take in one script call returns
// the item whose lock its call took; or, where the item cools down by then,
// releases it.
func TestTakeEachCompletesALockAfterAStop(t *testing.T) {
	rdb, _ := clientLoaded(t, eachScript)
	for _, cooling := range []bool{false, true} {
		keys := schema.Keys{Prefix: fmt.Sprintf("stopped%v:", cooling)}
		takeSetup{items: []string{"a"}}.seed(t, rdb, keys)
		ctx, cancel := context.WithCancel(context.Background())
		client := &stoppingClient{Client: rdb, stop: cancel}
		if cooling {
			client.cooldown = keys.Cooldown("a")
		}
		var logs bytes.Buffer
		r := testTaker(client, keys.Prefix, false, 0, &logs)
		r.Record = &finish.Recorder{Keys: keys, StateTTL: time.Hour}
		taken, err := r.Pass().Take(ctx, nil)
		lock := rdb.Get(context.Background(), keys.Lock("a")).Val()
		switch {
		case !cooling && (err != nil || taken.Item != "a" || taken.Fence != 1 || lock != testToken):
			t.Errorf("a stop after the lock: Take = %+v, %v, the lock holds %q; want a, fence 1, our lock", taken, err, lock)
		case !cooling && rdb.HGet(context.Background(), keys.State("a"), schema.FieldLastHolder).Val() != testToken:
			t.Errorf("a stop after the lock: the start of a's run is not recorded")
		case cooling && lock != "":
			t.Errorf("a stop after the lock of an item that cools down by then left the lock %q", lock)
		}
		cancel()
	}
}

// TestTakeNamedCompletesALockAfterAStop: as the pass per candidate does, a
// named take (w8y --item) whose context ends once its lock is ours still
// completes it: its fencing token and start record.
func TestTakeNamedCompletesALockAfterAStop(t *testing.T) {
	rdb, _ := clientLoaded(t, eachScript)
	keys := schema.Keys{Prefix: "stoppednamed:"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var logs bytes.Buffer
	r := testTaker(&stoppingClient{Client: rdb, stop: cancel}, keys.Prefix, false, 0, &logs)
	r.Record = &finish.Recorder{Keys: keys, StateTTL: time.Hour}
	taken, err := r.TakeNamed(ctx, "a", false)
	if err != nil || taken.Fence != 1 || rdb.HGet(context.Background(), keys.State("a"), schema.FieldLastHolder).Val() != testToken {
		t.Errorf("a stop after the named lock: TakeNamed = %+v, %v; want a with fence 1, its start recorded", taken, err)
	}
}
