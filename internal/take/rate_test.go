package take

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/w8y/w8y/internal/finish"
	"github.com/w8y/w8y/internal/redistest"
	"github.com/w8y/w8y/internal/schema"
)

// TestFleetRateEveryWay: a take under --fleet-rate 2 per hour, by each way
// a worker takes (the look, the pass in batches, the named take of --item,
// a busy worker's finish and look in one call), counts its start in the
// fleet's log with the lock; once two starts came within the hour, every
// take, a worker's with another token too, takes nothing, touches neither
// the list nor the fence, and says ErrRateFull, an ErrNoWork. Once the
// older start is more than the window ago, a take starts again.
func TestFleetRateEveryWay(t *testing.T) {
	rdb := redistest.Start(t).Client
	ctx := context.Background()
	type way func(tk *Taker, keys schema.Keys, item string) (Taken, error)
	ways := map[string]way{
		"look": func(tk *Taker, _ schema.Keys, _ string) (Taken, error) { return tk.LookFirst().Take(ctx, nil) },
		"pass": func(tk *Taker, _ schema.Keys, _ string) (Taken, error) { return tk.Pass().Take(ctx, nil) },
		"named": func(tk *Taker, _ schema.Keys, item string) (Taken, error) {
			return tk.TakeNamed(ctx, item, false)
		},
		// A busy worker's next take: the finish of a run that the test
		// holds (its own lock on "held") and the look, in one call.
		"next": func(tk *Taker, keys schema.Keys, _ string) (Taken, error) {
			if tk.Memory == nil {
				// As after the worker's first take, which a busy worker
				// has made.
				tk.Memory = &Memory{}
			}
			lock := keys.Lock("held")
			rdb.Set(ctx, lock, tk.Token, time.Hour)
			f := &finish.Finisher{Client: rdb, Record: tk.Record}
			_, next, ok, err := tk.FinishThenLook(ctx, f, lock, tk.Token, finish.End{Item: "held", Result: schema.ResultInterrupted, At: time.Now()})
			switch {
			case err != nil:
				return Taken{}, err
			case !ok && tk.Memory.look.quiet:
				// The look found the rate full: the next take probes,
				// and says why it took nothing.
				return tk.LookFirst().Take(ctx, nil)
			case !ok:
				return Taken{}, ErrNoWork
			}
			return next, nil
		},
	}
	for name, take := range ways {
		t.Run(name, func(t *testing.T) {
			keys := schema.Keys{Prefix: name + ":", Colocated: true}
			items := []string{"a", "b", "c", "d"}
			rdb.RPush(ctx, keys.List(), items)
			if name == "look" || name == "next" {
				// Every item tried, and due now: the look takes from the
				// due index (look.lua), not by a pass over the untried head.
				rdb.Set(ctx, keys.Untried(), 0, 0)
				rdb.Set(ctx, keys.Seen(), 4, 0)
				rdb.Set(ctx, keys.Sweep(), "0", time.Hour)
				for _, item := range items {
					rdb.ZAdd(ctx, keys.Due(), redis.Z{Score: 0, Member: item})
				}
			}
			var logs bytes.Buffer
			tk := testTaker(rdb, keys.Prefix, true, 2, &logs)
			tk.Record = &finish.Recorder{Keys: keys, StateTTL: time.Hour}
			tk.Rate = schema.Rate{Starts: 2, Per: time.Hour}
			first, err1 := take(tk, keys, "a")
			second, err2 := take(tk, keys, "b")
			if err1 != nil || err2 != nil || first.Item == second.Item {
				t.Fatalf("two takes: %+v, %v; %+v, %v", first, err1, second, err2)
			}
			starts := rdb.LRange(ctx, keys.Starts(), 0, -1).Val()
			if len(starts) != 2 {
				t.Fatalf("the log of starts holds %q, want two starts", starts)
			}
			if got := rdb.Get(ctx, keys.FleetRate()).Val(); got != "2/3600000" {
				t.Errorf("%s holds %q, want the rate 2/3600000", keys.FleetRate(), got)
			}
			if ttl := rdb.PTTL(ctx, keys.Starts()).Val(); ttl < time.Hour || ttl > time.Hour+time.Second {
				t.Errorf("the log expires in %s, want the window and a second", ttl)
			}

			// Full: nothing taken, nothing moved, another worker's take
			// (another token) refused as well.
			list := rdb.LRange(ctx, keys.List(), 0, -1).Val()
			fence := rdb.Get(ctx, keys.Fence()).Val()
			other := testTaker(rdb, keys.Prefix, true, 2, &logs)
			other.Rate, other.Token, other.Record = tk.Rate, "other:2:token", tk.Record
			for _, tk := range []*Taker{tk, other} {
				if got, err := take(tk, keys, "c"); !errors.Is(err, ErrRateFull) || !errors.Is(err, ErrNoWork) {
					t.Fatalf("a third take within the hour: %+v, %v; want ErrRateFull", got, err)
				}
			}
			if got := rdb.LRange(ctx, keys.List(), 0, -1).Val(); !slices.Equal(got, list) {
				t.Errorf("a refused take moved the list: %q, was %q", got, list)
			}
			if got := rdb.Get(ctx, keys.Fence()).Val(); got != fence {
				t.Errorf("a refused take moved the fence: %s, was %s", got, fence)
			}
			if n := rdb.Exists(ctx, keys.Lock("c"), keys.Lock("d")).Val(); n != 0 {
				t.Errorf("a refused take left %d locks on c and d", n)
			}
			if got := rdb.LRange(ctx, keys.Starts(), 0, -1).Val(); !slices.Equal(got, starts) {
				t.Errorf("a refused take wrote the log: %q, was %q", got, starts)
			}

			// The older start leaves the window: one take more, and the
			// log keeps the two newest.
			old, _ := strconv.ParseInt(starts[1], 10, 64)
			rdb.LSet(ctx, keys.Starts(), 1, old-time.Hour.Milliseconds()-1)
			third, err := take(other, keys, "c")
			if err != nil {
				t.Fatalf("a take once a start left the window: %v", err)
			}
			if first.Item == third.Item || second.Item == third.Item {
				t.Errorf("took %q again", third.Item)
			}
			if got := rdb.LRange(ctx, keys.Starts(), 0, -1).Val(); len(got) != 2 || got[1] != starts[0] {
				t.Errorf("the log after a third start: %q, want the new start, then %s", got, starts[0])
			}
			if _, err := take(tk, keys, "d"); !errors.Is(err, ErrRateFull) {
				t.Errorf("a fourth take: %v, want ErrRateFull", err)
			}
		})
	}
}

// TestFleetRateWindowEdge: a start exactly the window after the N-th
// newest is refused, one a millisecond later is not: no window of the
// rate's length, its ends included, holds more than N starts.
func TestFleetRateWindowEdge(t *testing.T) {
	rdb := redistest.Start(t).Client
	ctx := context.Background()
	script := redis.NewScript(rateSource + `
local n, per = rateOf({rate = ARGV[1]})
local full = rateFull(KEYS[1], n, per, tonumber(ARGV[2]))
return full and 1 or 0`)
	rdb.RPush(ctx, "starts", 5000, 4000, 1000)
	for _, tt := range []struct {
		rate string
		now  int64
		full bool
	}{
		{"3/2000", 3000, true}, {"3/2000", 3001, false},
		{"2/2000", 6000, true}, {"2/2000", 6001, false},
		{"4/2000", 1, false}, // fewer starts than N in the log
		{"1/1", 5001, true}, {"1/1", 5002, false},
	} {
		got, err := script.Run(ctx, rdb, []string{"starts"}, tt.rate, tt.now).Int()
		if err != nil || (got == 1) != tt.full {
			t.Errorf("rate %s at %d: full %d (%v), want %v", tt.rate, tt.now, got, err, tt.full)
		}
	}
}

// TestFleetRateTwoRates: two workers with other rates on one list. Each
// take holds to its own rate over every start of the fleet, and the log
// keeps as many starts as the larger N needs, whoever pushed last.
func TestFleetRateTwoRates(t *testing.T) {
	rdb := redistest.Start(t).Client
	ctx := context.Background()
	keys := schema.Keys{Prefix: "two:", Colocated: true}
	rdb.RPush(ctx, keys.List(), redistest.Items(10))
	var logs bytes.Buffer
	lax := testTaker(rdb, keys.Prefix, true, 2, &logs)
	lax.Rate = schema.Rate{Starts: 4, Per: time.Hour}
	strict := testTaker(rdb, keys.Prefix, true, 2, &logs)
	strict.Rate, strict.Token = schema.Rate{Starts: 2, Per: time.Hour}, "strict:1:token"
	for i, tk := range []*Taker{strict, strict, lax, lax} {
		if _, err := tk.Pass().Take(ctx, nil); err != nil {
			t.Fatalf("take %d: %v", i, err)
		}
	}
	if _, err := strict.Pass().Take(ctx, nil); !errors.Is(err, ErrRateFull) {
		t.Errorf("the stricter worker's take after four starts: %v, want ErrRateFull", err)
	}
	if _, err := lax.Pass().Take(ctx, nil); !errors.Is(err, ErrRateFull) {
		t.Errorf("the laxer worker's fifth take: %v, want ErrRateFull", err)
	}
	if n := rdb.LLen(ctx, keys.Starts()).Val(); n != 4 {
		t.Errorf("the log holds %d starts, want 4, the larger N", n)
	}
	// The stricter worker's start, once its window has room, keeps the
	// log at the larger N: the laxer worker's check still sees its four.
	rdb.LSet(ctx, keys.Starts(), 1, 0)
	rdb.LSet(ctx, keys.Starts(), 2, 0)
	rdb.LSet(ctx, keys.Starts(), 3, 0)
	if _, err := strict.Pass().Take(ctx, nil); err != nil {
		t.Fatalf("the stricter worker's take with room: %v", err)
	}
	if n := rdb.LLen(ctx, keys.Starts()).Val(); n != 4 {
		t.Errorf("after the stricter worker's take the log holds %d starts, want 4", n)
	}
	if got := rdb.Get(ctx, keys.FleetRate()).Val(); got != "2/3600000" {
		t.Errorf("the record after the stricter worker's take: %q", got)
	}
}

// TestFleetRateWrongType: a log of another type fails the take with
// Redis' own error, rather than running without the rate; a take without
// a rate forgets the rate's record and leaves the log to its expiry.
func TestFleetRateWrongType(t *testing.T) {
	rdb := redistest.Start(t).Client
	ctx := context.Background()
	keys := schema.Keys{Prefix: "w:", Colocated: true}
	rdb.RPush(ctx, keys.List(), "a", "b")
	rdb.Set(ctx, keys.Starts(), "x", 0)
	var logs bytes.Buffer
	tk := testTaker(rdb, keys.Prefix, true, 2, &logs)
	tk.Rate = schema.Rate{Starts: 1, Per: time.Second}
	for name, take := range map[string]func() error{
		"look":  func() error { _, err := tk.LookFirst().Take(ctx, nil); return err },
		"pass":  func() error { _, err := tk.Pass().Take(ctx, nil); return err },
		"named": func() error { _, err := tk.TakeNamed(ctx, "a", false); return err },
	} {
		if err := take(); err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
			t.Errorf("%s over a log of another type: %v, want WRONGTYPE", name, err)
		}
	}
	if n := rdb.Exists(ctx, keys.Lock("a"), keys.Lock("b")).Val(); n != 0 {
		t.Errorf("%d locks taken", n)
	}

	rdb.Del(ctx, keys.Starts())
	rdb.RPush(ctx, keys.Starts(), 1)
	rdb.Set(ctx, keys.FleetRate(), "1/1000", 0)
	tk.Rate = schema.Rate{}
	if _, err := tk.LookFirst().Take(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if n := rdb.Exists(ctx, keys.FleetRate()).Val(); n != 0 {
		t.Error("a take without a rate left the rate's record")
	}
	if got := rdb.LRange(ctx, keys.Starts(), 0, -1).Val(); !slices.Equal(got, []string{"1"}) {
		t.Errorf("a take without a rate wrote the log: %q", got)
	}
}

// TestProbeReadsTheRate: an idle worker whose last look found the rate
// full probes without a script while the rate's window is full (the
// probe's "no" is ErrRateFull, and writes nothing), and looks once a
// start has left the window.
func TestProbeReadsTheRate(t *testing.T) {
	rdb := redistest.Start(t).Client
	ctx := context.Background()
	keys := schema.Keys{Prefix: "rate:", Colocated: true}
	takeSetup{items: redistest.Items(5), cooling: redistest.Items(5)}.seed(t, rdb, keys)
	var logs bytes.Buffer
	taker := testTaker(rdb, keys.Prefix, true, 2, &logs)
	taker.Rate = schema.Rate{Starts: 1, Per: time.Hour}
	rdb.Set(ctx, keys.Sweep(), "0", time.Hour)
	rdb.LPush(ctx, keys.Starts(), time.Now().UnixMilli())
	for range 4 {
		if _, err := taker.LookFirst().Take(ctx, nil); !errors.Is(err, ErrNoWork) {
			t.Fatalf("a take over a cooling list: %v, want no work", err)
		}
	}
	// Run now: due, but the rate allows no start.
	rdb.Del(ctx, keys.Cooldown("i1"))
	rdb.ZAdd(ctx, keys.Due(), z(0, "i1"))
	if taken, err := taker.LookFirst().Take(ctx, nil); !errors.Is(err, ErrRateFull) {
		t.Fatalf("a take with the rate full: %+v, %v; want ErrRateFull", taken, err)
	}
	before := snapshot(t, rdb, keys)
	if worth, full := taker.LookFirst().probe(ctx); worth || full != ErrRateFull {
		t.Errorf("the probe says %v (full %v) while the rate is full, want no, ErrRateFull", worth, full)
	}
	if taken, err := taker.LookFirst().Take(ctx, nil); !errors.Is(err, ErrRateFull) {
		t.Errorf("a take that probes with the rate full: %+v, %v; want ErrRateFull", taken, err)
	}
	if after := snapshot(t, rdb, keys); after != before {
		t.Errorf("the probe wrote:\nbefore %s\nafter  %s", before, after)
	}
	rdb.LSet(ctx, keys.Starts(), 0, time.Now().Add(-time.Hour-time.Second).UnixMilli())
	pass := taker.LookFirst()
	if worth, full := pass.probe(ctx); !worth || full != nil {
		t.Errorf("the probe says %v (full %v) once the window has room, want yes", worth, full)
	}
	if taken, err := pass.Take(ctx, nil); err != nil || taken.Item != "i1" {
		t.Errorf("the take with the window's room: %+v, %v; want i1", taken, err)
	}
}

// TestCheckRate: the rate is refused where one script cannot reach every
// key of the list.
func TestCheckRate(t *testing.T) {
	for _, tt := range []struct {
		rate      schema.Rate
		colocated bool
		want      error
	}{{schema.Rate{}, false, nil}, {schema.Rate{Starts: 1, Per: time.Second}, true, nil}, {schema.Rate{Starts: 1, Per: time.Second}, false, ErrRateNotColocated}} {
		tk := Taker{Rate: tt.rate, Keys: schema.Keys{Prefix: "w:", Colocated: tt.colocated}}
		if err := tk.CheckPlaces(); !errors.Is(err, tt.want) {
			t.Errorf("Rate %v, colocated %v: %v, want %v", tt.rate, tt.colocated, err, tt.want)
		}
	}
}
