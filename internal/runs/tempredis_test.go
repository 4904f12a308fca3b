package runs

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// testRedis is a redis-server that one test or benchmark starts on a free
// loopback port, keeping nothing on disk, and stops when it ends.
type testRedis struct {
	Port   int
	Client *redis.Client
}

// startTestRedis starts a testRedis. Tests fail without redis-server (make
// test installs it); benchmarks, which CI may skip, are skipped instead.
func startTestRedis(tb testing.TB) *testRedis {
	tb.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if _, isBench := tb.(*testing.B); isBench {
			tb.Skip("redis-server is not installed (scripts/ensure-redis.sh installs it)")
		}
		tb.Fatal("redis-server is not installed: run scripts/ensure-redis.sh (make test does)")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir := tb.TempDir()
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir, "--logfile", filepath.Join(dir, "redis.log"))
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start redis-server: %v", err)
	}
	tb.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	client := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port), MaxRetries: -1})
	tb.Cleanup(func() { client.Close() })
	deadline := time.Now().Add(10 * time.Second)
	for client.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
			tb.Fatalf("redis-server on port %d never answered:\n%s", port, log)
		}
		// Polling until the server answers: it gives no other signal.
		time.Sleep(10 * time.Millisecond)
	}
	return &testRedis{Port: port, Client: client}
}
