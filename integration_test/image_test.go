package integration_test

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/w8y/w8y/internal/doctest"
	"github.com/w8y/w8y/internal/redistest"
)

// podman runs scripts/podman.sh, podman as the project sets it up, and
// returns its output, failing the test if it fails.
func podman(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("bash", append([]string{"../scripts/podman.sh"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("podman %q: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestContainerImage builds the image with make image and runs it as the
// recipes page does, with --network=host, against a redis-server the
// test started: w8y runs as PID 1, as nobody, and runs an item; the
// probes answer, inside the container too (busybox's wget); an orphan that
// a child leaves behind is reaped when it dies; and SIGTERM to the
// container drains the running item, releases its lock and exits 0.
func TestContainerImage(t *testing.T) {
	t.Parallel()
	random := make([]byte, 4)
	_, _ = rand.Read(random)
	suffix := hex.EncodeToString(random)
	image, name := "localhost/w8y:test-"+suffix, "w8y-test-"+suffix
	make := exec.Command("make", "-s", "-C", "..", "image", "BIN="+t.TempDir(), "IMAGE="+image)
	if out, err := make.CombinedOutput(); err != nil {
		t.Fatalf("make image: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("bash", "../scripts/podman.sh", "rmi", "--force", image).Run() })

	s := startRedis(t)
	s.seed(t, "img:list", "orphaning", "long")
	metrics := fmt.Sprintf("127.0.0.1:%d", redistest.FreePort(t))
	// The first item leaves an orphan in a session of its own, so that it
	// outlives the item's process group, which w8y stops when the item
	// ends: the item waits until the orphan has left the group. The
	// second item runs until stopped.
	child := `case "$W8Y_ITEM" in
orphaning) setsid sh -c ': >/tmp/detached; exec sleep 1001' &
	until [ -e /tmp/detached ]; do sleep 0.01; done ;;
*) exec sleep 1002 ;;
esac`
	run := startCommand(t, nil, "bash", "../scripts/podman.sh", "run", "--rm", "--network=host", "--name", name,
		"-e", "W8Y_REDIS_URL="+s.URL, "-e", "W8Y_KEY_PREFIX=img", "-e", "W8Y_METRICS_ADDR="+metrics,
		image, "--continuous", "--idle-wait", "100ms", "--", "sh", "-c", child)
	t.Cleanup(func() { _ = exec.Command("bash", "../scripts/podman.sh", "rm", "--force", name).Run() })

	redistest.WaitFor(t, "the second item to run", func() bool {
		return s.Client.Exists(ctx(t), "img:lock:long").Val() == 1
	})
	if got := s.stateOf(t, "img", "orphaning")["last_result"]; got != "success" {
		t.Errorf("the first item's last result is %q", got)
	}

	// w8y is the container's PID 1, running as nobody.
	pid := podman(t, "inspect", "--format", "{{.State.Pid}}", name)
	status, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		t.Fatal(err)
	}
	exe, _ := os.Readlink("/proc/" + pid + "/exe")
	if !strings.Contains(string(status), "\nUid:\t65534\t") || !regexp.MustCompile(`\nNSpid:\t\d+\t1\n`).Match(status) || filepath.Base(exe) != "w8y-metrics" {
		t.Errorf("the container's first process is %s, with\n%s", exe, status)
	}

	// The probes, from the host and from inside the container.
	waitHealth(t, "http://"+metrics+"/livez", http.StatusOK)
	if got := podman(t, "exec", name, "wget", "-q", "-O-", "http://"+metrics+"/readyz"); got != "ok" {
		t.Errorf("/readyz from inside the container: %q", got)
	}

	// The orphan is w8y's child now; once it dies, w8y reaps it.
	orphan := 0
	redistest.WaitFor(t, "the orphan among w8y's children", func() bool {
		for _, child := range childrenOf(atoi(t, pid)) {
			if cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", child)); bytes.Equal(cmdline, []byte("sleep\x001001\x00")) {
				orphan = child
			}
		}
		return orphan != 0
	})
	if err := exec.Command("kill", "-KILL", strconv.Itoa(orphan)).Run(); err != nil {
		t.Fatal(err)
	}
	redistest.WaitFor(t, "the orphan to be reaped", func() bool {
		_, err := os.Stat(fmt.Sprintf("/proc/%d", orphan))
		return os.IsNotExist(err)
	})

	// SIGTERM drains: the item is stopped, its lock released, exit 0.
	podman(t, "kill", "--signal", "TERM", name)
	r := run.wait(t)
	r.wantExit(t, 0)
	s.noLocks(t, "img")
	if got := s.stateOf(t, "img", "long")["last_result"]; got != "interrupted" {
		t.Errorf("the drained item's last result is %q", got)
	}
	if !strings.Contains(r.Stderr, "drained; exiting") {
		t.Errorf("the container's log:\n%s", r.Stderr)
	}

	// A worker's image built on it as the recipes page shows, run as a batch
	// that ends by itself once every item has run.
	s.seed(t, "batch:list", "x", "y")
	context := t.TempDir()
	containerfile := strings.ReplaceAll(doctest.Block(t, "docs/recipes.md", "", "FROM localhost/w8y:dev"), "localhost/w8y:dev", image)
	script := "#!/bin/sh\necho \"report $1 by $(id -u)\"\n"
	for name, data := range map[string]string{"Containerfile": containerfile, "make-report.sh": script} {
		if err := os.WriteFile(filepath.Join(context, name), []byte(data), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	worker := image + "-worker"
	podman(t, "build", "--quiet", "-t", worker, context)
	t.Cleanup(func() { _ = exec.Command("bash", "../scripts/podman.sh", "rmi", "--force", worker).Run() })
	out := podman(t, "run", "--rm", "--network=host", "-e", "W8Y_REDIS_URL="+s.URL, "-e", "W8Y_KEY_PREFIX=batch",
		"-e", "W8Y_UNTIL_IDLE=true", "-e", "W8Y_COOLDOWN=1h", "-e", "W8Y_QUIET=true", worker)
	if out != "report x by 65534\nreport y by 65534" {
		t.Errorf("the worker's image printed %q", out)
	}
}
