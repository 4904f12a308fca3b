package integration_test

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
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
	"github.com/w8y/w8y/internal/poll"
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
	// w8y-metrics is w8y, with metrics.
	for name, want := range map[string]string{"w8y": want, "w8y-metrics": want, "w8yctl": "w8yctl" + strings.TrimPrefix(want, "w8y")} {
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
	checkPlainBuild(t, dir)

	page, err := os.ReadFile(filepath.Join(dir, "w8y.1"))
	if err != nil || !strings.HasPrefix(string(page), ".TH w8y 1 ") || !strings.Contains(string(page), `\-\-status`) {
		t.Errorf("man page: %v\n%.300s", err, page)
	}
	page, err = os.ReadFile(filepath.Join(dir, "w8yctl.1"))
	if err != nil || !strings.HasPrefix(string(page), ".TH w8yctl 1 ") || !strings.Contains(string(page), `run\-now ITEM`) {
		t.Errorf("w8yctl's man page: %v\n%.300s", err, page)
	}

	// The hand-over: same PID, now running w8y-metrics, serving /healthz.
	s := setup(t, "lean")
	s.items("a")
	s.Client.Set(ctx(t), s.key("lock:a"), "someone-else", 0)
	addr := fmt.Sprintf("127.0.0.1:%d", redistest.FreePort(t))
	p := startCommand(t, nil, filepath.Join(dir, "w8y"), s.at("-c", "--idle-wait", "100ms", "--metrics-addr", addr, "true")...)
	waitHealth(t, "http://"+addr+"/healthz", http.StatusOK)
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", p.cmd.Process.Pid))
	if err != nil || exe != filepath.Join(dir, "w8y-metrics") {
		t.Errorf("w8y's process runs %q (%v), want w8y-metrics", exe, err)
	}
	p.stop(t)

	// Without w8y-metrics beside it or in PATH: one line, exit 125.
	alone := filepath.Join(t.TempDir(), "w8y")
	data, err := os.ReadFile(filepath.Join(dir, "w8y"))
	if err != nil {
		t.Fatal(err)
	}
	writeExecutable(t, alone, data)
	r := startCommand(t, nil, alone, s.at("--metrics-addr", addr, "true")...).wait(t)
	r.wantExit(t, 125)
	oneLine(t, r.Stderr, "--metrics-addr needs w8y-metrics")
}

// TestBashCompletion sources each command's scripts/COMMAND.bash-completion
// in bash and completes command lines as a user's Tab would: w8y's options
// and choices where they belong (the signals' names of --timeout-signal), and nothing of w8y's after the executable,
// where bash falls back to file names; w8yctl's verbs, then its options, and
// nothing for an option's value or an item.
func TestBashCompletion(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		command, binary string
		lines           []completion
	}{
		{"w8y", binary, []completion{
			{"w8y --conti", "--continuous"},
			{"w8y -k work --log-format ", "console\njson"},
			{"w8y -k work --log-level=w", "--log-level=warn"},
			{"w8y --timeout-signal ", "TERM\nINT\nHUP\nQUIT\nKILL\nUSR1\nUSR2"},
			{"w8y --timeout 5m --timeout-signal us", "USR1\nUSR2"},
			{"w8y --timeout-signal=sigk", "--timeout-signal=SIGKILL"},
			{"w8y --fleet", "--fleet-max-running\n--fleet-rate"},
			{"w8y --fleet-r", "--fleet-rate"},
			{"w8y -k x sh --con", ""},
			{"w8y -k x -- --con", ""},
		}},
		{"w8yctl", ctlBinary, []completion{
			{"w8yctl -k work re", "remove\nresume"},
			{"w8yctl ru", "run-now"},
			{"w8yctl can", "cancel"},
			{"w8yctl pause a --f", "--fix\n--follow\n--for"},
			{"w8yctl pause --for ", ""},
			{"w8yctl pause a ", ""},
		}},
	} {
		t.Run(tt.command, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			if err := os.Symlink(tt.binary, filepath.Join(dir, tt.command)); err != nil {
				t.Fatal(err)
			}
			checkBashCompletion(t, dir, tt.command, tt.lines)
		})
	}
}

// checkPlainBuild builds w8y as go install does, without make's stamps,
// and checks that --version reads the version and commit that Go stamps
// into it from the checkout. Go stamps only a checkout whose .git is a
// directory (not a git worktree's .git file), and GOFLAGS may turn it off
// on a developer's machine, so the build is of a copy of the working tree
// committed to a repository of its own, with -buildvcs=true as go
// install's default is.
func checkPlainBuild(t *testing.T, dir string) {
	t.Helper()
	files, err := exec.Command("git", "-C", "..", "ls-files", "--cached", "--others", "--exclude-standard", "-z").Output()
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(dir, "src")
	for _, name := range strings.Split(strings.TrimRight(string(files), "\x00"), "\x00") {
		data, err := os.ReadFile(filepath.Join("..", name))
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted in the working tree
		}
		if err == nil {
			err = os.MkdirAll(filepath.Dir(filepath.Join(src, name)), 0o755)
		}
		if err == nil {
			err = os.WriteFile(filepath.Join(src, name), data, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	git := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("git", append([]string{"-C", src, "-c", "user.name=test", "-c", "user.email=test@example.invalid"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("git %q: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q")
	git("add", "-A")
	git("commit", "-q", "-m", "copy")
	build := exec.Command("go", "build", "-buildvcs=true", "-o", filepath.Join(dir, "plain"), ".")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	want := " (commit " + git("rev-parse", "--short=12", "HEAD") + ")\n"
	out, err := exec.Command(filepath.Join(dir, "plain"), "--version").Output()
	if err != nil || !strings.HasSuffix(string(out), want) || strings.HasPrefix(string(out), "w8y dev ") {
		t.Errorf("go build's --version: %q, %v; want a version and%s", out, err, want)
	}
}

// TestMakeDemo runs make demo's script, which must work, and must leave
// bin/, where make build puts its builds, as it was.
func TestMakeDemo(t *testing.T) {
	t.Parallel()
	before, errBefore := os.Stat("../bin/w8y")
	out, err := exec.Command("bash", "../scripts/demo.sh").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "demo: OK") {
		t.Fatalf("demo.sh: %v\n%s", err, out)
	}
	after, errAfter := os.Stat("../bin/w8y")
	switch {
	case errBefore != nil && errAfter == nil:
		t.Error("the demo made bin/w8y")
	case errBefore == nil && (errAfter != nil || !after.ModTime().Equal(before.ModTime())):
		t.Error("the demo replaced bin/w8y")
	}
}

// completion is a command line typed up to the cursor at its end, and what
// Tab completes it to (COMPREPLY, one a line).
type completion struct{ line, want string }

// checkBashCompletion sources scripts/<command>.bash-completion in bash,
// with dir (which links command to the binary under test) first in PATH,
// and checks what each line completes to, as a user's Tab would.
func checkBashCompletion(t *testing.T, dir, command string, tests []completion) {
	t.Helper()
	for _, tt := range tests {
		script := fmt.Sprintf(`source ../scripts/%s.bash-completion
read -ra COMP_WORDS <<< %q
[[ %q == *" " ]] && COMP_WORDS+=("")
COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
_%s
printf '%%s\n' "${COMPREPLY[@]}"`, command, tt.line, tt.line, command)
		cmd := exec.Command("bash", "--norc", "--noprofile", "-c", script)
		cmd.Env = []string{"PATH=" + dir + ":" + os.Getenv("PATH"), "GORACE=atexit_sleep_ms=0"}
		out, err := cmd.CombinedOutput()
		if got := strings.TrimSpace(string(out)); err != nil || got != tt.want {
			t.Errorf("%q completes to %q (%v), want %q", tt.line, got, err, tt.want)
		}
	}
}

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
// a child leaves behind is reaped when it dies; SIGTERM to the container
// drains the running item, releases its lock and exits 0; and with
// --drain-timeout, podman stop lets the running child finish (see
// containerDrain).
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

	poll.WaitFor(t, "the second item to run", func() bool {
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
	poll.WaitFor(t, "the orphan among w8y's children", func() bool {
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
	poll.WaitFor(t, "the orphan to be reaped", func() bool {
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
	r.wantStderr(t, "drained; exiting")

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

	containerDrain(t, s, image, name+"-drain")
}

// containerDrain runs image as PID 1 with --drain-timeout, as the
// Kubernetes Deployment does, and stops it as the kubelet and podman do,
// with SIGTERM to PID 1 (podman stop): the running child is not signalled,
// finishes inside the drain, and its run is recorded as a success; no new
// item is taken. The child runs until the test, through a directory both
// share, lets it end, once w8y has said that it drains.
func containerDrain(t *testing.T, s *server, image, name string) {
	shared := t.TempDir()
	if err := os.Chmod(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	s.seed(t, "drain:list", "long", "next")
	child := `: >"/shared/$W8Y_ITEM"; until [ -e /shared/go ]; do sleep 0.05; done`
	run := startCommand(t, nil, "bash", "../scripts/podman.sh", "run", "--rm", "--network=host", "--name", name,
		"-v", shared+":/shared", "-e", "W8Y_REDIS_URL="+s.URL, "-e", "W8Y_KEY_PREFIX=drain", "-e", "W8Y_DRAIN_TIMEOUT=90s",
		image, "--continuous", "--", "sh", "-c", child)
	t.Cleanup(func() { _ = exec.Command("bash", "../scripts/podman.sh", "rm", "--force", name).Run() })
	poll.WaitFor(t, "the first item to run", func() bool {
		_, err := os.Stat(filepath.Join(shared, "long"))
		return err == nil
	})
	// podman stop sends SIGTERM to PID 1, and SIGKILL only after --time.
	stop := startCommand(t, nil, "bash", "../scripts/podman.sh", "stop", "--time", "120", name)
	poll.WaitFor(t, "w8y to drain", func() bool { return strings.Contains(run.stderrSoFar(), "draining: the running children may finish") })
	if err := os.WriteFile(filepath.Join(shared, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	stop.wait(t).wantExit(t, 0)
	r := run.wait(t)
	r.wantExit(t, 0)
	state := s.stateOf(t, "drain", "long")
	if state["last_result"] != "success" || state["last_exit_code"] != "0" || state["runs"] != "1" {
		t.Errorf("the drained item's state: %v, want one run, a success with exit code 0", state)
	}
	if _, err := os.Stat(filepath.Join(shared, "next")); err == nil || s.Client.Exists(ctx(t), "drain:state:next").Val() != 0 {
		t.Errorf("the second item ran after SIGTERM")
	}
	s.noLocks(t, "drain")
	r.wantStderr(t, "drained; exiting")
}
