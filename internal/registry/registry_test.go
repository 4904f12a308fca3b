package registry

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"github.com/w8y/w8y/internal/poll"
	"github.com/w8y/w8y/internal/redistest"
	"github.com/w8y/w8y/internal/schema"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), poll.Timeout)
	t.Cleanup(cancel)
	return ctx
}

// present runs p until the test's end or stop, whichever comes first, and
// returns stop, which waits for Run to return.
func present(t *testing.T, p *Presence) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Run(ctx)
	}()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	return stop
}

func self(holder string, continuous bool) Self {
	return Self{Holder: holder, Host: "h", PID: 42, Version: "v1", Started: time.UnixMilli(1_700_000_000_000),
		Continuous: continuous, Slots: 1, Looks: continuous}
}

// readOne returns the one live entry, or fails.
func readOne(t *testing.T, s *redistest.Server, keys schema.Keys) Entry {
	t.Helper()
	entries, err := Read(testCtx(t), s.Client, keys)
	if err != nil || len(entries) != 1 {
		t.Fatalf("Read = %+v, %v; want one entry", entries, err)
	}
	return entries[0]
}

// TestPresenceLifecycle: an entry appears with what the worker is, turns
// busy with its item and idle again, and is gone, with its members, once
// Run returns.
func TestPresenceLifecycle(t *testing.T) {
	s := redistest.Start(t)
	keys := schema.Keys{Prefix: "r:", Colocated: true}
	p := NewPresence(s.Client, keys, self("h:42:abc", true), nil, zerolog.Nop())
	stop := present(t, p)
	poll.WaitFor(t, "the entry", func() bool { return s.Client.Exists(testCtx(t), "r:worker:h:42:abc").Val() == 1 })
	e := readOne(t, s, keys)
	if e.Holder != "h:42:abc" || e.Host != "h" || e.PID != 42 || e.Version != "v1" || e.Mode != "continuous" ||
		e.State != schema.WorkerIdle || !e.Started.Equal(time.UnixMilli(1_700_000_000_000)) || len(e.Running) != 0 {
		t.Errorf("idle entry %+v", e)
	}
	if ttl := s.Client.PTTL(testCtx(t), "r:worker:h:42:abc").Val(); ttl <= 0 || ttl > TTL {
		t.Errorf("the entry's expiry is %s, want at most %s", ttl, TTL)
	}
	if until := time.Until(e.Expires); until <= 0 || until > TTL {
		t.Errorf("the member's score says it expires in %s, want at most %s", until, TTL)
	}
	poll.WaitFor(t, "the worker counted as looking", func() bool { return p.Lookers() == 1 && s.Client.ZCard(testCtx(t), "r:looking").Val() == 1 })

	p.Started("item one")
	poll.WaitFor(t, "busy", func() bool { return readOne(t, s, keys).State == schema.WorkerBusy })
	e = readOne(t, s, keys)
	if len(e.Running) != 1 || e.Running[0].Item != "item one" || e.Running[0].Since.IsZero() || e.Since.IsZero() {
		t.Errorf("busy entry %+v", e)
	}
	// Busy with its one slot taken, it no longer looks.
	poll.WaitFor(t, "no longer looking", func() bool { return s.Client.ZCard(testCtx(t), "r:looking").Val() == 0 })

	p.Ended("item one")
	poll.WaitFor(t, "idle again", func() bool { return readOne(t, s, keys).State == schema.WorkerIdle })
	if e := readOne(t, s, keys); len(e.Running) != 0 {
		t.Errorf("idle again but running %+v", e.Running)
	}

	stop()
	for _, key := range []string{"r:worker:h:42:abc", "r:workers", "r:looking"} {
		if n := s.Client.Exists(testCtx(t), key).Val(); n != 0 {
			t.Errorf("%s left after the worker stopped", key)
		}
	}
}

// TestReadSkipsTheDead: a member whose score has passed (a worker that died
// and whose hash expired) is neither read nor counted, and a live worker's
// beat drops it; a member whose hash is gone is not read either.
func TestReadSkipsTheDead(t *testing.T) {
	s := redistest.Start(t)
	keys := schema.Keys{Prefix: "d:", Colocated: true}
	ctx := testCtx(t)
	past := float64(time.Now().Add(-time.Second).UnixMilli())
	future := float64(time.Now().Add(time.Minute).UnixMilli())
	s.Client.ZAdd(ctx, "d:workers", redis.Z{Score: past, Member: "dead:1:a"}, redis.Z{Score: future, Member: "gone:2:b"})
	s.Client.HSet(ctx, "d:worker:dead:1:a", "holder", "dead:1:a")
	if entries, err := Read(ctx, s.Client, keys); err != nil || len(entries) != 0 {
		t.Errorf("Read = %+v, %v; want none", entries, err)
	}
	if n, err := Live(ctx, s.Client, keys); err != nil || n != 1 {
		t.Errorf("Live = %d, %v; want 1 (the member whose score has not passed)", n, err)
	}
	p := NewPresence(s.Client, keys, self("live:3:c", false), nil, zerolog.Nop())
	if err := p.announce(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	members := s.Client.ZRange(ctx, "d:workers", 0, -1).Val()
	slices.Sort(members)
	if !slices.Equal(members, []string{"gone:2:b", "live:3:c"}) {
		t.Errorf("members %q after a beat, want the dead one dropped", members)
	}
	if e := readOne(t, s, keys); e.Holder != "live:3:c" || e.Mode != "one-shot" {
		t.Errorf("entry %+v", e)
	}
	// A one-shot worker never looks.
	if n := s.Client.ZCard(ctx, "d:looking").Val(); n != 0 || p.Lookers() != 1 {
		t.Errorf("a one-shot worker counted as looking: %d members, Lookers %d", n, p.Lookers())
	}
}

// TestLookersCountsTheFleet: each beat counts the live workers that look,
// itself among them.
func TestLookersCountsTheFleet(t *testing.T) {
	s := redistest.Start(t)
	keys := schema.Keys{Prefix: "l:", Colocated: true}
	var ps []*Presence
	for _, h := range []string{"a:1:x", "b:2:y", "c:3:z"} {
		p := NewPresence(s.Client, keys, self(h, true), nil, zerolog.Nop())
		ps = append(ps, p)
		if err := p.announce(testCtx(t), time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	if got := []int{ps[0].Lookers(), ps[2].Lookers()}; !slices.Equal(got, []int{1, 3}) {
		t.Errorf("Lookers of the first and last = %v, want [1 3]: each counts those announced before it", got)
	}
	n, err := Live(testCtx(t), s.Client, keys)
	if err != nil || n != 3 {
		t.Errorf("Live = %d, %v; want 3", n, err)
	}
}

// TestItemsWithSpaces: items are kept whole, whatever bytes they hold
// (but NUL, which no item holds).
func TestItemsWithSpaces(t *testing.T) {
	e := Entry{Holder: "h", Running: []Run{{Item: "a b  c", Since: time.UnixMilli(5)}, {Item: "é\n", Since: time.UnixMilli(6)}}}
	vals := e.values()
	var got []any
	for i := 1; i < len(vals); i += 2 {
		got = append(got, vals[i])
	}
	back, ok := entryOf(got, time.Time{})
	if !ok || !slices.Equal(back.Running, e.Running) {
		t.Errorf("read back %+v, want %+v", back.Running, e.Running)
	}
}

// TestBeatInterval: a fleet of up to 100 workers beats every 5 s each; a
// larger one beats 20 times a second in all, but each worker at least once
// a minute, and its entries last three beats.
func TestBeatInterval(t *testing.T) {
	for live, want := range map[int64]time.Duration{0: 5 * time.Second, 1: 5 * time.Second, 100: 5 * time.Second, 101: 5050 * time.Millisecond, 300: 15 * time.Second, 1000: 50 * time.Second, 1200: time.Minute, 6000: time.Minute, 50000: time.Minute} {
		if got := beatInterval(live); got != want {
			t.Errorf("beatInterval(%d) = %s, want %s", live, got, want)
		}
	}
}

// TestBeatBothWaysAlike: a beat in one script call (the keys colocated) and
// as a pipeline (a Cluster without a hash tag) leave the same entry, the
// same members and the same counts.
func TestBeatBothWaysAlike(t *testing.T) {
	s := redistest.Start(t)
	var seen [2]string
	for i, colocated := range []bool{true, false} {
		keys := schema.Keys{Prefix: map[bool]string{true: "in1:", false: "each:"}[colocated], Colocated: colocated}
		s.Client.ZAdd(testCtx(t), keys.Workers(), redis.Z{Score: float64(time.Now().Add(-time.Second).UnixMilli()), Member: "dead"})
		s.Client.ZAdd(testCtx(t), keys.Looking(), redis.Z{Score: float64(time.Now().Add(time.Minute).UnixMilli()), Member: "other"})
		p := NewPresence(s.Client, keys, self("w:1:a", true), nil, zerolog.Nop())
		p.Started("item")
		if err := p.announce(testCtx(t), time.Now()); err != nil {
			t.Fatal(err)
		}
		e := readOne(t, s, keys)
		ttl := s.Client.PTTL(testCtx(t), keys.Worker("w:1:a")).Val()
		seen[i] = fmt.Sprintf("%s %s %s %v workers=%q looking=%q lookers=%d ttl>0=%v", e.Holder, e.Mode, e.State, len(e.Running),
			s.Client.ZRange(testCtx(t), keys.Workers(), 0, -1).Val(), s.Client.ZRange(testCtx(t), keys.Looking(), 0, -1).Val(),
			p.Lookers(), ttl > 0)
		if ttl <= 0 || ttl > 3*beatEvery {
			t.Errorf("colocated=%v: the entry's expiry is %s, want within three beats", colocated, ttl)
		}
	}
	if seen[0] != seen[1] {
		t.Errorf("a beat in one call left\n%s\nas a pipeline\n%s", seen[0], seen[1])
	}
}

// TestOneShotAnnouncesAfterASecond: a one-shot run that ends within
// oneShotQuiet writes nothing to the registry, and removes nothing; one
// that runs longer is announced, and removed at its end.
func TestOneShotAnnouncesAfterASecond(t *testing.T) {
	s := redistest.Start(t)
	keys := schema.Keys{Prefix: "o:", Colocated: true}
	p := NewPresence(s.Client, keys, self("o:1:a", false), nil, zerolog.Nop())
	stop := present(t, p)
	p.Started("item")
	stop()
	if n := s.Client.DBSize(testCtx(t)).Val(); n != 0 {
		t.Errorf("a one-shot run shorter than %s left %d keys: %q", oneShotQuiet, n, s.Client.Keys(testCtx(t), "*").Val())
	}
	p = NewPresence(s.Client, keys, self("o:1:b", false), nil, zerolog.Nop())
	stop = present(t, p)
	p.Started("item")
	poll.WaitFor(t, "the one-shot run's entry", func() bool { return s.Client.Exists(testCtx(t), keys.Worker("o:1:b")).Val() == 1 })
	if e := readOne(t, s, keys); e.State != schema.WorkerBusy || len(e.Running) != 1 {
		t.Errorf("the one-shot run's entry %+v, want busy with its item", e)
	}
	stop()
	if n := s.Client.DBSize(testCtx(t)).Val(); n != 0 {
		t.Errorf("the one-shot run's end left %d keys: %q", n, s.Client.Keys(testCtx(t), "*").Val())
	}
}

// TestABeatRidesAWait: once Run has made its first beat, the beat that
// comes due during an idle worker's wait is sent with it (BeatCmd), and
// Run's own waits a whole beat past the wait's end; a short wait, a second
// wait while one rides, a one-shot run and a clock unmeasured for
// measureEvery carry none; the ridden beat's reply refreshes the entry and
// its counts (Beaten), and one that failed has Run beat at once.
func TestABeatRidesAWait(t *testing.T) {
	s := redistest.Start(t)
	ctx := testCtx(t)
	keys := schema.Keys{Prefix: "ride:", Colocated: true}
	p := NewPresence(s.Client, keys, self("r:1:a", true), nil, zerolog.Nop())
	if cmd := p.BeatCmd(ctx, time.Hour); cmd != nil {
		t.Fatal("BeatCmd before Run's first beat gave a beat")
	}
	present(t, p)
	// The first beat as Run has taken its reply (the entry exists in Redis
	// before then, and Lookers is at least 1 before any beat).
	poll.WaitFor(t, "Run's first beat, recorded", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return !p.last.IsZero()
	})
	if s.Client.Exists(ctx, keys.Worker("r:1:a")).Val() != 1 {
		t.Fatal("Run's first beat wrote no entry")
	}

	if cmd := p.BeatCmd(ctx, time.Second); cmd != nil {
		t.Errorf("a wait of 1s, %s before the next beat, carries one", beatEvery)
	}
	cmd := p.BeatCmd(ctx, beatEvery+time.Second)
	if cmd == nil {
		t.Fatalf("a wait of %s, past the next beat, carries none", beatEvery+time.Second)
	}
	if next := time.Until(p.nextBeat()); next < 2*beatEvery {
		t.Errorf("with a beat riding a wait of %s, Run's next beat is due in %s, want a whole beat after the wait", beatEvery+time.Second, next)
	}
	if again := p.BeatCmd(ctx, beatEvery+time.Second); again != nil {
		t.Error("a second wait carries a beat while one rides")
	}
	s.Client.Del(ctx, keys.Worker("r:1:a"))
	_ = s.Client.Process(ctx, cmd)
	p.Beaten(cmd)
	if ttl := s.Client.PTTL(ctx, keys.Worker("r:1:a")).Val(); ttl <= 0 || ttl > TTL {
		t.Errorf("after the ridden beat, the entry's expiry is %s, want up to %s", ttl, TTL)
	}
	if e := readOne(t, s, keys); e.Holder != "r:1:a" || e.State != schema.WorkerIdle {
		t.Errorf("after the ridden beat, the entry is %+v", e)
	}
	if next := time.Until(p.nextBeat()); next <= beatEvery-time.Second || next > beatEvery {
		t.Errorf("after the ridden beat, the next is due in %s, want a beat after it", next)
	}

	// A beat that failed: Run beats at once.
	failed := p.BeatCmd(ctx, beatEvery+time.Second)
	if failed == nil {
		t.Fatal("a wait after the ridden beat carries none")
	}
	s.Client.Del(ctx, keys.Worker("r:1:a"))
	failed.SetErr(fmt.Errorf("the wait failed"))
	p.Beaten(failed)
	poll.WaitFor(t, "Run's beat after a ridden one failed", func() bool { return s.Client.Exists(ctx, keys.Worker("r:1:a")).Val() == 1 })

	// The clock unmeasured for measureEvery: Run's beat measures it.
	p.mu.Lock()
	p.measured = p.measured.Add(-measureEvery)
	p.mu.Unlock()
	if cmd := p.BeatCmd(ctx, time.Hour); cmd != nil {
		t.Error("a wait carries a beat though the clock's skew was last measured a minute ago")
	}

	one := NewPresence(s.Client, keys, self("o:1:a", false), nil, zerolog.Nop())
	present(t, one)
	poll.WaitFor(t, "the one-shot run's entry", func() bool { return s.Client.Exists(ctx, keys.Worker("o:1:a")).Val() == 1 })
	if cmd := one.BeatCmd(ctx, time.Hour); cmd != nil {
		t.Error("a one-shot run's wait carries a beat")
	}
}
