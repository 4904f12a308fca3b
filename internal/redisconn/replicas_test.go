package redisconn

import (
	"errors"
	"testing"
	"time"

	"github.com/w8y/w8y/internal/redistest"
	"github.com/w8y/w8y/internal/script"
)

// setScript sets KEYS[1] to ARGV[1] and returns 1: a write for WAIT to
// count.
var setScript = script.New(`redis.call("SET", KEYS[1], ARGV[1]) return 1`)

// TestRunConfirmed: without replicas, asking for none runs the script
// alone; asking for one still runs it, and reports ErrNotReplicated with
// its reply, so that the caller can undo what it did.
func TestRunConfirmed(t *testing.T) {
	rdb, ctx := redistest.Client(t)
	if reply, err := RunConfirmed(ctx, rdb, setScript, 0, time.Second, []string{"k"}, "a"); err != nil || reply != int64(1) {
		t.Errorf("no replicas asked for: %v, %v", reply, err)
	}
	calls := redistest.CommandStats(t, rdb)["wait"]
	reply, err := RunConfirmed(ctx, rdb, setScript, 1, time.Second, []string{"k"}, "b")
	if !errors.Is(err, ErrNotReplicated) || reply != int64(1) {
		t.Errorf("one replica asked for, none there: %v, %v; want the reply and ErrNotReplicated", reply, err)
	}
	if v := rdb.Get(ctx, "k").Val(); v != "b" {
		t.Errorf("the script did not run: k is %q", v)
	}
	if n := redistest.CommandStats(t, rdb)["wait"]; n != calls+1 {
		t.Errorf("%d WAITs sent, want 1", n-calls)
	}
	// A script that the server does not know yet is sent whole, WAIT and
	// all, after the NOSCRIPT.
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := RunConfirmed(ctx, rdb, setScript, 1, time.Second, []string{"k"}, "c"); !errors.Is(err, ErrNotReplicated) {
		t.Errorf("after SCRIPT FLUSH: %v, want ErrNotReplicated", err)
	}
	if v := rdb.Get(ctx, "k").Val(); v != "c" {
		t.Errorf("after SCRIPT FLUSH the script did not run: k is %q", v)
	}
}

func TestReplicaWait(t *testing.T) {
	for ttl, want := range map[time.Duration]time.Duration{
		5 * time.Second:        500 * time.Millisecond,
		time.Minute:            time.Second,
		5 * time.Millisecond:   time.Millisecond,
		100 * time.Millisecond: 10 * time.Millisecond,
	} {
		if got := ReplicaWait(ttl); got != want {
			t.Errorf("ReplicaWait(%s) = %s, want %s", ttl, got, want)
		}
	}
}
