package take

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"github.com/w8y/w8y/internal/finish"
	"github.com/w8y/w8y/internal/redistest"
	"github.com/w8y/w8y/internal/schema"
)

// BenchmarkFinishThenLook measures what a busy worker's item costs Redis:
// one call of next.lua, which finishes a run (with a cooldown of an hour)
// and takes the next due item, over a list of 1,000,000 items that the
// fleet has run before (as scripts/bench-take.sh's busy figure loads it,
// without its worker processes). It reports the Redis CPU of a call, read
// from INFO cpu, as redis-µs/op; ns/op is the client's round trip; then,
// measured in the same run, the Redis CPU of a bare EVALSHA of "return 1"
// (bare-µs/op), the call's cost as a multiple of it (x-bare, issue 34's
// target: 3 at most), and the commands that a call runs inside Redis
// (commands/op, from INFO commandstats: 15 at most), with the time that
// INFO commandstats gives the script (script-µs/op) and, of it, the
// commands it called (commands-µs/op). The
// script's own cost, apart from what worker processes that share Redis'
// cores add to it (see docs/benchmarks.md): compare two builds by running
// each in turn, more than once, on the same machine.
//
//	go test -run '^$' -bench FinishThenLook -benchtime 4000x ./internal/take/
//
// Under --fleet-rate (rate=1000000/1h, a rate that counts every start and
// refuses none), each take also reads the rate's log and pushes its start.
func BenchmarkFinishThenLook(b *testing.B) {
	for _, rate := range []schema.Rate{{}, {Starts: schema.MaxRateStarts, Per: time.Hour}} {
		name := "rate=none"
		if !rate.IsZero() {
			name = "rate=" + rate.String()
		}
		b.Run(name, func(b *testing.B) { benchFinishThenLook(b, rate) })
	}
}

// benchFinishThenLook is BenchmarkFinishThenLook under rate.
func benchFinishThenLook(b *testing.B, rate schema.Rate) {
	const items = 1_000_000
	rdb := redistest.Start(b).Client
	ctx := context.Background()
	keys := schema.Keys{Prefix: "r:", Colocated: true}
	due := min(max(b.N+1, items/100), items)
	later := float64(time.Now().Add(time.Hour).UnixMilli())
	loadTried(b, rdb, keys, items, func(pipe redis.Pipeliner, i int, item string) float64 {
		if i < due {
			return float64(i + 1)
		}
		pipe.Set(ctx, keys.Cooldown(item), "other", time.Hour)
		return later
	})
	// The fleet's sweep is not due: it costs what BenchmarkSweepStep
	// measures, once every SweepEvery.
	rdb.Set(ctx, keys.Sweep(), "0", time.Hour)

	taker := testTaker(rdb, keys.Prefix, true, 0, nil)
	taker.Log = zerolog.New(io.Discard)
	taker.Rate = rate
	rec := &finish.Recorder{Keys: keys, StateTTL: 168 * time.Hour, EventsMaxLen: 10_000}
	taker.Record = rec
	finisher := &finish.Finisher{Client: rdb, Record: rec, Schedule: finish.Schedule{Cooldown: time.Hour}, Jitter: func() string { return "1" }}
	taken, err := taker.LookFirst().Take(ctx, nil)
	if err != nil {
		b.Fatalf("the first take: %v", err)
	}
	end := finish.End{Result: schema.ResultSuccess, Exited: true}

	cpu := func() float64 { return redisCPU(b, rdb) }
	// The reference, in the same run on the same server and client: a
	// script call that does nothing, what any call of a script costs
	// Redis (its round trip's system calls, the call's dispatch).
	bare := redis.NewScript("return 1")
	if err := bare.Load(ctx, rdb).Err(); err != nil {
		b.Fatalf("SCRIPT LOAD: %v", err)
	}
	b.ResetTimer()
	before := cpu()
	for range b.N {
		if err := bare.EvalSha(ctx, rdb, nil).Err(); err != nil {
			b.Fatalf("EVALSHA of return 1: %v", err)
		}
	}
	reference := cpu() - before
	commands, commandsUsec, scriptUsec := commandsRun(b, rdb)
	before = cpu()
	for range b.N {
		// Each finish is its own item's, as a worker's is: its state hash,
		// its cooldown, its entries.
		end.Item = taken.Item
		_, next, ok, err := taker.FinishThenLook(ctx, finisher, taken.Key, taken.Token, end)
		if err != nil || !ok {
			b.Fatalf("FinishThenLook after %s took %v (%v)", taken.Item, ok, err)
		}
		taken = next
	}
	used := cpu() - before
	b.StopTimer()
	after, afterUsec, afterScript := commandsRun(b, rdb)
	commands = after - commands
	b.ReportMetric(used/float64(b.N), "redis-µs/op")
	// Where the call's time goes, by INFO commandstats: the script's
	// (evalsha's usec, the commands it calls included), and of it the
	// commands' own; the rest is Lua's, and the passage of each call
	// between Lua and Redis.
	b.ReportMetric((afterScript-scriptUsec)/float64(b.N), "script-µs/op")
	b.ReportMetric((afterUsec-commandsUsec)/float64(b.N), "commands-µs/op")
	b.ReportMetric(reference/float64(b.N), "bare-µs/op")
	b.ReportMetric(used/reference, "x-bare")
	b.ReportMetric(float64(commands)/float64(b.N), "commands/op")
	if n := rdb.Get(ctx, keys.Fence()).Val(); n != fmt.Sprint(b.N+1) {
		b.Fatalf("fence %s after %d takes", n, b.N+1)
	}
}

// commandsRun is how many commands Redis has run so far, and the
// microseconds they took (INFO commandstats' usec), counting those that
// scripts call (INFO commandstats counts each), but not the script calls
// themselves (EVAL, EVALSHA, and their _RO forms), nor INFO, nor the pings
// and HELLOs of a client's connection; and the microseconds of EVALSHA,
// the commands that its scripts called included.
func commandsRun(b *testing.B, rdb *redis.Client) (n int64, usec, scriptUsec float64) {
	for name, value := range redistest.Info(b, rdb, "commandstats") {
		command, ok := strings.CutPrefix(name, "cmdstat_")
		script := command == "evalsha"
		if !ok || !script && (strings.HasPrefix(command, "eval") || strings.HasPrefix(command, "script") ||
			command == "info" || command == "ping" || command == "hello" || strings.HasPrefix(command, "client")) {
			continue
		}
		for field := range strings.SplitSeq(value, ",") {
			if calls, ok := strings.CutPrefix(field, "calls="); ok && !script {
				c, _ := strconv.ParseInt(calls, 10, 64)
				n += c
			}
			if us, ok := strings.CutPrefix(field, "usec="); ok {
				u, _ := strconv.ParseFloat(us, 64)
				if script {
					scriptUsec += u
				} else {
					usec += u
				}
			}
		}
	}
	return n, usec, scriptUsec
}

// redisCPU is the CPU time that Redis has used, in microseconds, from
// INFO cpu.
func redisCPU(b *testing.B, rdb *redis.Client) float64 {
	info := redistest.Info(b, rdb, "cpu")
	user, _ := strconv.ParseFloat(info["used_cpu_user"], 64)
	sys, _ := strconv.ParseFloat(info["used_cpu_sys"], 64)
	return (user + sys) * 1e6
}

// BenchmarkSweepStep measures what the fleet's sweep costs Redis an item:
// looks that each make one step of SweepStep items over a list of 100,000
// items, each with its due entry an hour away, and take nothing: items that
// cool down (a fleet's usual list between runs) and items whose lock
// another holder has (a list whose runs are long). It reports the Redis
// CPU of a look, and of an item read, from INFO cpu; SweepPerItem is chosen
// from it (see index.go and docs/benchmarks.md).
//
//	go test -run '^$' -bench SweepStep -benchtime 400x ./internal/take/
func BenchmarkSweepStep(b *testing.B) {
	for _, held := range []string{"cooling", "locked"} {
		b.Run(held, func(b *testing.B) { benchmarkSweepStep(b, held) })
	}
}

func benchmarkSweepStep(b *testing.B, held string) {
	const items = 100_000
	rdb := redistest.Start(b).Client
	ctx := context.Background()
	keys := schema.Keys{Prefix: "s:", Colocated: true}
	later := float64(time.Now().Add(time.Hour).UnixMilli())
	loadTried(b, rdb, keys, items, func(pipe redis.Pipeliner, i int, item string) float64 {
		key := keys.Cooldown(item)
		if held == "locked" {
			key = keys.Lock(item)
		}
		pipe.Set(ctx, key, "other", time.Hour)
		return later
	})
	taker := testTaker(rdb, keys.Prefix, true, 0, nil)
	taker.Log = zerolog.New(io.Discard)
	b.ResetTimer()
	before := redisCPU(b, rdb)
	for range b.N {
		if rdb.Exists(ctx, keys.Sweep()).Val() == 1 {
			// A new sweep: not counted (the DEL is a command of its own).
			b.StopTimer()
			rdb.Del(ctx, keys.Sweep())
			b.StartTimer()
		}
		args := taker.lookArgs("")
		if got, err := lookScript.Run(ctx, rdb, []string{keys.List()}, args...).Slice(); err != nil || got[1] != nil {
			b.Fatalf("a look over held items: %v, %v", got, err)
		}
	}
	used := redisCPU(b, rdb) - before
	b.StopTimer()
	b.ReportMetric(used/float64(b.N), "redis-µs/op")
	b.ReportMetric(used/float64(b.N)/SweepStep, "redis-µs/item")
}

// loadTried fills keys' list with n items i0, i1, ... as a fleet leaves it
// after its first pass: every item tried (the marks), each with an entry
// in the due index scored by each, which may also hold the item (it is
// given the pipeline that loads the item).
func loadTried(b *testing.B, rdb *redis.Client, keys schema.Keys, n int, each func(pipe redis.Pipeliner, i int, item string) float64) {
	ctx := context.Background()
	const chunk = 10_000
	for from := 0; from < n; from += chunk {
		pipe := rdb.Pipeline()
		names := make([]any, 0, chunk)
		members := make([]redis.Z, 0, chunk)
		for i := from; i < min(from+chunk, n); i++ {
			item := "i" + strconv.Itoa(i)
			names = append(names, item)
			members = append(members, redis.Z{Score: each(pipe, i, item), Member: item})
		}
		pipe.RPush(ctx, keys.List(), names...)
		pipe.ZAdd(ctx, keys.Due(), members...)
		if _, err := pipe.Exec(ctx); err != nil {
			b.Fatalf("loading the list: %v", err)
		}
	}
	rdb.MSet(ctx, keys.Untried(), 0, keys.Seen(), n)
}
