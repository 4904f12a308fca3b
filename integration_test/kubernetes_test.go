package integration_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/w8y/w8y/internal/doctest"
	"github.com/w8y/w8y/internal/poll"
	"github.com/w8y/w8y/internal/redistest"
)

// The tests here run what the manifests in examples/kubernetes run, with
// the built w8y and busybox's sh and wget, which the image holds, and
// check what the manifests' comments claim. Where a claim is Kubernetes'
// doing (a Job counting failed pods), the test does what Kubernetes does.

// readManifest returns the w8y container of a manifest in examples/kubernetes
// (the one with arguments: the image's entrypoint is w8y) and the object.
func readManifest[T any](t *testing.T, name string, pod func(*T) corev1.PodSpec) (*T, corev1.Container) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "examples", "kubernetes", name))
	if err != nil {
		t.Fatal(err)
	}
	var obj T
	if err := yaml.Unmarshal(data, &obj); err != nil {
		t.Fatal(err)
	}
	for _, c := range pod(&obj).Containers {
		if len(c.Args) > 0 {
			return &obj, c
		}
	}
	t.Fatalf("%s runs no w8y", name)
	return nil, corev1.Container{}
}

// containerEnv is c's environment as the kubelet would give it, with the
// values from Secrets and the overrides in set (NAME=value), which win.
func containerEnv(c corev1.Container, set ...string) []string {
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	for _, kv := range set {
		name, value, _ := strings.Cut(kv, "=")
		env[name] = value
	}
	var out []string
	for name, value := range env {
		out = append(out, name+"="+value)
	}
	slices.Sort(out)
	return out
}

// busyboxPath is a PATH on which sh and wget are busybox's, as in the
// image, before the test's own PATH.
func busyboxPath(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, applet := range []string{"sh", "wget"} {
		if err := os.Symlink("/bin/busybox", filepath.Join(dir, applet)); err != nil {
			t.Fatal(err)
		}
	}
	return "PATH=" + dir + ":" + os.Getenv("PATH")
}

// jobOutcome is how a Job ended, as Kubernetes would count it.
type jobOutcome struct {
	complete bool // a pod exited 0 and none ran any more
	failed   int  // pods that exited with another code
}

// runJob runs the w8y container of job.yaml as the Job controller runs its
// pods: parallelism of them at once; a pod that fails is replaced, until
// one exits 0, and the Job fails once more than backoffLimit pods have
// failed, when the pods still running get SIGTERM. child replaces the
// image's script.
func runJob(t *testing.T, s *server, parallelism int, child string, env ...string) jobOutcome {
	t.Helper()
	job, c := readManifest(t, "job.yaml", func(j *batchv1.Job) corev1.PodSpec { return j.Spec.Template.Spec })
	if job.Spec.Completions != nil || job.Spec.BackoffLimit == nil {
		t.Fatalf("job.yaml: completions %v, backoffLimit %v", job.Spec.Completions, job.Spec.BackoffLimit)
	}
	args := slices.Clone(c.Args)
	args[slices.Index(args, "/usr/local/bin/make-report.sh")] = child
	// The backoff and idle wait shortened, so that the test takes seconds.
	// The backoff still doubles up to 400ms (at least 300ms with its
	// jitter) by an item's fourth failure, which fails the Job: that is
	// the margin within which the pods must get the Job's SIGTERM, before
	// one of them may take the item a fifth time. A cap of 100ms left
	// less than 75ms, which a loaded machine's process exits can take.
	env = append(append([]string{"W8Y_REDIS_URL=" + s.URL, "W8Y_FAILURE_BACKOFF=50ms,1s", "W8Y_IDLE_WAIT=20ms"}, env...), busyboxPath(t))
	env = containerEnv(c, env...)

	exits := make(chan result)
	running := map[*proc]bool{}
	start := func() {
		p := startW8y(t, env, args...)
		running[p] = true
		go func() { r := p.wait(t); r.run = fmt.Sprint(p.cmd.Process.Pid); exits <- r }()
	}
	for range parallelism {
		start()
	}
	var out jobOutcome
	jobFailed := false
	for len(running) > 0 {
		r := <-exits
		for p := range running {
			if fmt.Sprint(p.cmd.Process.Pid) == r.run {
				delete(running, p)
			}
		}
		if r.Code == 0 {
			out.complete = true
			continue
		}
		// A pod that the failed Job terminated is not one more failure: it
		// may have died of the SIGTERM before w8y could catch it (exit -1).
		if jobFailed {
			continue
		}
		out.failed++
		t.Logf("a pod failed with exit %d", r.Code)
		switch {
		case out.failed > int(*job.Spec.BackoffLimit) && !jobFailed:
			jobFailed = true
			for p := range running {
				p.signal(t, syscall.SIGTERM)
			}
		case !jobFailed && !out.complete:
			start()
		}
	}
	out.complete = out.complete && !jobFailed
	return out
}

// jobChild records each run of its item in $DIR/runs, and fails as its
// item asks: "flaky" on its first run, "broken" always.
const jobChild = `#!/bin/sh
echo "$1" >> "$DIR/runs"
case "$1" in
flaky) if [ ! -e "$DIR/flaky.failed" ]; then : > "$DIR/flaky.failed"; exit 3; fi ;;
broken) exit 3 ;;
esac
`

// TestKubernetesJob: job.yaml's pods run every item once and finish; an
// item that fails once is retried by the fleet after its backoff, and the
// failed pod shows in the Job's count; an item that keeps failing fails
// the Job.
func TestKubernetesJob(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name     string
		items    []string
		complete bool
		runs     map[string]int // runs per item other than 1
		failed   int
	}{
		{"every item once", []string{"a", "b", "c", "d", "e", "f", "g"}, true, nil, 0},
		{"a failed item is retried", []string{"a", "b", "flaky", "c", "d"}, true, map[string]int{"flaky": 2}, 1},
		{"an item that keeps failing fails the Job", []string{"a", "broken", "b", "c"}, false, map[string]int{"broken": 4}, 4},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := startRedis(t)
			s.seed(t, "reports:list", tt.items...)
			dir := t.TempDir()
			child := filepath.Join(dir, "make-report.sh")
			writeExecutable(t, child, []byte(jobChild))
			got := runJob(t, s, 3, child, "DIR="+dir)
			if got.complete != tt.complete || got.failed != tt.failed {
				t.Errorf("the Job: complete %v with %d failed pods; want complete %v with %d", got.complete, got.failed, tt.complete, tt.failed)
			}
			runs := map[string]int{}
			for _, item := range lines(t, dir+"/runs") {
				runs[item]++
			}
			for _, item := range tt.items {
				want := 1
				if n, ok := tt.runs[item]; ok {
					want = n
				}
				if runs[item] != want {
					t.Errorf("%s ran %d times, want %d (runs: %v)", item, runs[item], want, runs)
				}
			}
			s.noLocks(t, "reports")
		})
	}
}

// TestKubernetesSidecar runs sidecar.yaml's w8y container beside an
// application that keeps the contract its comments state: the lock is held
// while the application works on the item; a run that ends well is kept;
// and when the lock is lost, w8y stops the child, the application's
// request is cancelled, and the application keeps nothing, since its own
// check of the lock fails if the cancellation has not reached it first.
func TestKubernetesSidecar(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	s.seed(t, "sync:list", "one", "two", "three")
	// What the application does, in order; once the test has seen what it
	// waits for, w8y may run "one" over and over, so a full channel drops.
	events := make(chan string, 100)
	tell := func(e string) {
		select {
		case events <- e:
		default:
		}
	}
	gates := map[string]chan struct{}{"one": make(chan struct{}), "two": make(chan struct{}), "three": make(chan struct{})}
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		item, holder, key := string(body), r.Header.Get("W8y-Holder"), r.Header.Get("W8y-Lock-Key")
		if r.Method != http.MethodPost || r.URL.Path != "/sync" || gates[item] == nil {
			http.Error(w, "unexpected", http.StatusBadRequest)
			return
		}
		tell(fmt.Sprintf("start %s %t", item, s.Client.Get(r.Context(), key).Val() == holder))
		select {
		case <-gates[item]:
		case <-r.Context().Done():
			tell("cancelled " + item)
			return
		}
		// The application's own check before it keeps a result.
		if s.Client.Get(r.Context(), key).Val() != holder {
			tell("discarded " + item)
			http.Error(w, "the lock is no longer ours", http.StatusConflict)
			return
		}
		tell("kept " + item)
	}))
	t.Cleanup(app.Close)
	// next returns what the application next did with item.
	// The deadline is the whole wait's: events for other items must not
	// start it again.
	next := func(item string) string {
		t.Helper()
		done := ctx(t).Done()
		for {
			select {
			case e := <-events:
				if strings.HasSuffix(e, " "+item) || strings.Contains(e, " "+item+" ") {
					return e
				}
			case <-done:
				t.Fatalf("the application did nothing more with %s", item)
			}
		}
	}

	_, c := readManifest(t, "sidecar.yaml", func(d *appsv1.Deployment) corev1.PodSpec { return d.Spec.Template.Spec })
	args := slices.Clone(c.Args)
	for i := range args {
		args[i] = strings.ReplaceAll(args[i], "http://localhost:8080/", app.URL+"/")
	}
	metrics := fmt.Sprintf("127.0.0.1:%d", redistest.FreePort(t))
	// A short expiry, so that a lost lock is noticed in a fraction of a
	// second.
	env := containerEnv(c, "W8Y_REDIS_URL="+s.URL, "W8Y_KEY_EXPIRY=900ms", "W8Y_KILL_AFTER=200ms", "W8Y_METRICS_ADDR="+metrics, busyboxPath(t))
	p := startW8y(t, env, args...)

	// While the application works on an item, its lock is held, with the
	// token the application was given.
	if e := next("one"); e != "start one true" {
		t.Fatalf("the application heard %q", e)
	}
	waitHealth(t, "http://"+metrics+"/livez", http.StatusOK)
	waitHealth(t, "http://"+metrics+"/readyz", http.StatusOK)
	close(gates["one"])
	if e := next("one"); e != "kept one" {
		t.Errorf("the application heard %q", e)
	}
	if e := next("two"); e != "start two true" {
		t.Fatalf("the application heard %q", e)
	}
	poll.WaitFor(t, "one's run to be recorded", func() bool { return s.stateOf(t, "sync", "one")["last_result"] == "success" })

	// The lock is lost while the application works on two: w8y stops the
	// child, and the request is cancelled.
	s.Client.Set(ctx(t), "sync:lock:two", "intruder", 0)
	if e := next("two"); e != "cancelled two" {
		t.Errorf("after the lock was lost, the application heard %q", e)
	}
	poll.WaitFor(t, "two's run to end as lock_lost", func() bool { return s.stateOf(t, "sync", "two")["last_result"] == "lock_lost" })

	// The lock is lost just as the application is done with three: it keeps
	// nothing, whether the cancellation or its own check comes first; the
	// run fails either way, and three backs off.
	if e := next("three"); e != "start three true" {
		t.Fatalf("the application heard %q", e)
	}
	s.Client.Set(ctx(t), "sync:lock:three", "intruder", 0)
	close(gates["three"])
	if e := next("three"); e != "cancelled three" && e != "discarded three" {
		t.Errorf("after the lock was lost, the application heard %q", e)
	}
	poll.WaitFor(t, "three to back off", func() bool { return s.Client.Exists(ctx(t), "sync:backoff:three").Val() == 1 })

	p.stop(t)
	for len(events) > 0 {
		if e := <-events; e == "kept two" || e == "kept three" {
			t.Errorf("the application kept a result after the lock was lost: %s", e)
		}
	}
}

// TestDocsSidecarSnippetCompiles builds the recipes' Go example of the
// sidecar contract, with the two functions it leaves to the application,
// so that the example stays code that compiles against go-redis.
func TestDocsSidecarSnippetCompiles(t *testing.T) {
	t.Parallel()
	snippet := doctest.Block(t, "docs/recipes.md", "go", "W8y-Lock-Key")
	dir := t.TempDir()
	goMod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	var goLine, redisLine string
	for _, line := range strings.Split(string(goMod), "\n") {
		switch fields := strings.Fields(line); {
		case len(fields) == 2 && fields[0] == "go":
			goLine = line
		case len(fields) >= 2 && fields[0] == "github.com/redis/go-redis/v9":
			redisLine = "require " + fields[0] + " " + fields[1]
		}
	}
	if goLine == "" || redisLine == "" {
		t.Fatalf("go.mod names no go version or no go-redis:\n%s", goMod)
	}
	goSum, err := os.ReadFile("../go.sum")
	if err != nil {
		t.Fatal(err)
	}
	program := `package main

import (
	"context"
	"io"
	"net/http"

	"github.com/redis/go-redis/v9"
)

var rdb = redis.NewClient(&redis.Options{})

func work(ctx context.Context, item string) (string, error) { return item, ctx.Err() }

func keep(result string) {}

func main() { http.HandleFunc("/sync", sync) }

` + snippet
	for name, text := range map[string]string{
		"go.mod":  "module snippet\n\n" + goLine + "\n\n" + redisLine + "\n",
		"go.sum":  string(goSum),
		"main.go": program,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The module cache holds go-redis already: w8y was built with it.
	build := exec.Command("go", "vet", ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("docs/recipes.md's Go example of the sidecar contract does not build: %v\n%s\n%s", err, out, program)
	}
}
