package integration_test

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/w8y/w8y/internal/redistest"
)

// TestMakeBuild runs make build and make man as a user would: both builds
// report the version and commit of the checkout, the lean bin/w8y lacks the
// Prometheus client and hands a run with --metrics-addr over to
// bin/w8y-metrics in the same process, and the man page is generated.
func TestMakeBuild(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	make := exec.Command("make", "-s", "-C", "..", "build", "man", "BIN="+dir)
	if out, err := make.CombinedOutput(); err != nil {
		t.Fatalf("make build man: %v\n%s", err, out)
	}
	describe, err1 := exec.Command("git", "-C", "..", "describe", "--tags", "--always", "--dirty").Output()
	commit, err2 := exec.Command("git", "-C", "..", "rev-parse", "--short=12", "HEAD").Output()
	if err1 != nil || err2 != nil {
		t.Fatalf("git: %v, %v", err1, err2)
	}
	want := fmt.Sprintf("w8y %s (commit %s)\n", strings.TrimSpace(string(describe)), strings.TrimSpace(string(commit)))
	for _, name := range []string{"w8y", "w8y-metrics"} {
		out, err := exec.Command(filepath.Join(dir, name), "--version").Output()
		if err != nil || string(out) != want {
			t.Errorf("%s --version: %q, %v; want %q", name, out, err, want)
		}
	}
	for name, wantProm := range map[string]bool{"w8y": false, "w8y-metrics": true} {
		deps, err := exec.Command("go", "version", "-m", filepath.Join(dir, name)).Output()
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(string(deps), "github.com/prometheus/client_golang"); got != wantProm {
			t.Errorf("%s links the Prometheus client: %v, want %v", name, got, wantProm)
		}
	}
	page, err := os.ReadFile(filepath.Join(dir, "w8y.1"))
	if err != nil || !strings.HasPrefix(string(page), ".TH w8y 1 ") || !strings.Contains(string(page), `\-\-status`) {
		t.Errorf("man page: %v\n%.300s", err, page)
	}

	// The hand-over: same PID, now running w8y-metrics, serving /healthz.
	s := startRedis(t)
	s.seed(t, "lean:list", "a")
	s.Client.Set(ctx(t), "lean:lock:a", "someone-else", 0)
	addr := fmt.Sprintf("127.0.0.1:%d", redistest.FreePort(t))
	p := startCommand(t, nil, filepath.Join(dir, "w8y"), "-u", s.URL, "-k", "lean", "-c", "--idle-wait", "100ms", "--metrics-addr", addr, "true")
	waitHealth(t, "http://"+addr+"/healthz", http.StatusOK)
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", p.cmd.Process.Pid))
	if err != nil || exe != filepath.Join(dir, "w8y-metrics") {
		t.Errorf("w8y's process runs %q (%v), want w8y-metrics", exe, err)
	}
	p.signal(t, syscall.SIGTERM)
	p.wait(t).wantExit(t, 0)

	// Without w8y-metrics beside it or in PATH: one line, exit 125.
	alone := filepath.Join(t.TempDir(), "w8y")
	data, _ := os.ReadFile(filepath.Join(dir, "w8y"))
	if err := os.WriteFile(alone, data, 0o755); err != nil {
		t.Fatal(err)
	}
	r := startCommand(t, nil, alone, "-u", s.URL, "-k", "lean", "--metrics-addr", addr, "true").wait(t)
	r.wantExit(t, 125)
	oneLine(t, r.Stderr, "--metrics-addr needs w8y-metrics")
}
