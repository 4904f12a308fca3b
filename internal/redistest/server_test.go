package redistest

import (
	"github.com/w8y/w8y/internal/poll"

	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestStart: a server answers on a loopback port of its own, keeps nothing
// on disk, and logs into its directory.
func TestStart(t *testing.T) {
	t.Parallel()
	s := Start(t)
	ctx := context.Background()
	if err := s.Client.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if s.URL != "redis://127.0.0.1:"+strconv.Itoa(s.Port) {
		t.Errorf("URL %q for port %d", s.URL, s.Port)
	}
	for name, want := range map[string]string{"save": "", "appendonly": "no", "bind": "127.0.0.1", "dir": s.Dir} {
		if got := s.Client.ConfigGet(ctx, name).Val()[name]; got != want {
			t.Errorf("CONFIG GET %s = %q, want %q", name, got, want)
		}
	}
	if _, err := os.Stat(filepath.Join(s.Dir, "redis.log")); err != nil {
		t.Errorf("no log in the server's directory: %v", err)
	}
	s.Stop()
	s.Stop() // stopping a stopped server does nothing
	if err := s.Client.Ping(ctx).Err(); err == nil {
		t.Error("the server answers after Stop")
	}
}

func TestStartOptions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	port := FreePort(t)
	s := Start(t, OnPort(port), Password("Test-Horse-7"), Args("--maxmemory", "12mb"))
	if s.Port != port {
		t.Errorf("started on port %d, want %d", s.Port, port)
	}
	if err := s.Client.Ping(ctx).Err(); err != nil {
		t.Errorf("Client has no password: %v", err)
	}
	if got := s.Client.ConfigGet(ctx, "maxmemory").Val()["maxmemory"]; got != "12582912" {
		t.Errorf("maxmemory %q: the extra arguments were not passed", got)
	}
	anonymous := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(port), MaxRetries: -1})
	defer anonymous.Close()
	if err := anonymous.Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
		t.Errorf("PING without the password: %v, want NOAUTH", err)
	}
}

// TestStartRetriesATakenPort: a free port that another process takes before
// the server binds it costs a retry on another port, not the test.
func TestStartRetriesATakenPort(t *testing.T) {
	t.Parallel()
	taken := takePort(t)
	var tried []int
	s := Start(t, func(c *config) { c.pick = firstThenFree(taken, &tried) })
	if len(tried) != 2 || s.Port == taken || s.Port != tried[1] {
		t.Errorf("tried ports %v and started on %d; want a retry after the taken %d", tried, s.Port, taken)
	}
}

// TestStartOnATakenPortFails: a port the test chose is not replaced by
// another, and the failure shows the server's own words.
func TestStartOnATakenPortFails(t *testing.T) {
	t.Parallel()
	taken := takePort(t)
	failure := poll.Failure(t, func(tb testing.TB) { Start(tb, OnPort(taken)) })
	if !strings.Contains(failure, "Address already in use") {
		t.Errorf("failure %q does not show redis-server's complaint", failure)
	}
}

// TestRestart: a restart after SHUTDOWN SAVE keeps the data, on the same
// port; after a kill, only what was saved before comes back.
func TestRestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := Start(t)
	port := s.Port
	s.Client.Set(ctx, "saved", "1", 0)
	s.Restart(t)
	if s.Port != port {
		t.Errorf("restarted on port %d, want %d", s.Port, port)
	}
	if got := s.Client.Get(ctx, "saved").Val(); got != "1" {
		t.Errorf("after a restart, saved = %q, want 1", got)
	}
	s.Client.Set(ctx, "lost", "1", 0)
	s.Stop()
	s.Restart(t)
	if n := s.Client.Exists(ctx, "saved", "lost").Val(); n != 1 || s.Client.Get(ctx, "saved").Val() != "1" {
		t.Errorf("after a kill and a restart, %d of saved and lost exist, want saved alone", n)
	}
	if err := s.Client.Ping(ctx).Err(); err != nil {
		t.Error(err)
	}
	// The log of every server in the directory is kept.
	log, _ := os.ReadFile(filepath.Join(s.Dir, "redis.log"))
	if n := strings.Count(string(log), "Ready to accept connections"); n != 3 {
		t.Errorf("the log shows %d starts, want 3", n)
	}
}

// takePort listens on a free loopback port until the test ends, as another
// process that took it would, and returns it.
func takePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l.Addr().(*net.TCPAddr).Port
}

// firstThenFree is a port picker that offers first, then free ports, and
// records in offered what it offered.
func firstThenFree(first int, offered *[]int) func(testing.TB) int {
	return func(tb testing.TB) int {
		port := first
		if len(*offered) > 0 {
			port = FreePort(tb)
		}
		*offered = append(*offered, port)
		return port
	}
}

// TestClientContext: a test's context ends at poll.Timeout at the latest, and
// with the test; a benchmark's has no deadline but ends with it too.
func TestClientContext(t *testing.T) {
	var ctx context.Context
	t.Run("test", func(t *testing.T) {
		var rdb *redis.Client
		rdb, ctx = Client(t)
		deadline, ok := ctx.Deadline()
		if left := time.Until(deadline); !ok || left > poll.Timeout || left < poll.Timeout/2 {
			t.Errorf("the context's deadline is %v away (set: %v), want about %s", left, ok, poll.Timeout)
		}
		if err := rdb.Ping(ctx).Err(); err != nil {
			t.Errorf("PING through Client's client: %v", err)
		}
	})
	if ctx.Err() == nil {
		t.Error("the test's context did not end with the test")
	}
	testing.Benchmark(func(b *testing.B) {
		_, ctx = Client(b)
		if _, ok := ctx.Deadline(); ok {
			t.Error("a benchmark's context has a deadline")
		}
	})
	if ctx.Err() == nil {
		t.Error("the benchmark's context did not end with it")
	}
}

// TestStartRunsTheChosenServer checks that W8Y_TEST_SERVER picks the server
// that answers, not only the binary's name: Valkey says server_name:valkey
// in INFO server, and Redis has no such field.
func TestStartRunsTheChosenServer(t *testing.T) {
	kind, err := Chosen()
	if err != nil {
		t.Fatal(err)
	}
	info := Info(t, Start(t).Client, "server")
	want := ""
	if kind.Name == "valkey" {
		want = "valkey"
	}
	if got := info["server_name"]; got != want {
		t.Errorf("%s=%q: INFO server_name is %q, want %q (redis_version %s)", ServerEnv, kind.Name, got, want, info["redis_version"])
	}
}

func TestChosenRefusesAnUnknownServer(t *testing.T) {
	t.Setenv(ServerEnv, "keydb")
	if _, err := Chosen(); err == nil || !strings.Contains(err.Error(), "redis or valkey") {
		t.Errorf("Chosen() with %s=keydb: %v, want an error naming redis and valkey", ServerEnv, err)
	}
}
