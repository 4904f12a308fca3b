package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"github.com/w8y/w8y/internal/finish"
	"github.com/w8y/w8y/internal/jobctl"
	"github.com/w8y/w8y/internal/lease"
	"github.com/w8y/w8y/internal/poll"
	"github.com/w8y/w8y/internal/proc"
	"github.com/w8y/w8y/internal/redistest"
	"github.com/w8y/w8y/internal/schema"
	"github.com/w8y/w8y/internal/status"
	"github.com/w8y/w8y/internal/take"
)

// scriptedChildren stands for the children of a worker: each run ends as
// the next of its ends says (the last one over and over), after a signal on
// hold when hold is set. It records the items it ran.
type scriptedChildren struct {
	mu    sync.Mutex
	ends  []finish.End
	ran   []string
	hold  chan struct{}
	began chan string
}

func (c *scriptedChildren) run(ctx context.Context, item string, lock *Lock) finish.End {
	c.mu.Lock()
	end := c.ends[min(len(c.ran), len(c.ends)-1)]
	c.ran = append(c.ran, item)
	c.mu.Unlock()
	if c.began != nil {
		c.began <- item
	}
	if c.hold != nil {
		<-c.hold
	}
	end.Item, end.At = item, time.Now()
	return end
}

func (c *scriptedChildren) items() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.ran...)
}

// exited is the end of a child that exited with code.
func exited(code int, exitCodes ...int) finish.End {
	return newRunEnd("", proc.Exit{Code: code}, nil, false, append([]int{0}, exitCodes...))
}

// testWorker is a worker over a real Redis list of items under its own
// prefix, with children, and options from args as w8y would parse them.
func testWorker(t *testing.T, children *scriptedChildren, items []string, args ...string) (*worker, *bytes.Buffer) {
	t.Helper()
	rdb := redistest.Start(t).Client
	opts, err := parseOptions(append(args, "-k", "loop", "true"), &strings.Builder{})
	if err != nil {
		t.Fatal(err)
	}
	keys := schema.Keys{Prefix: opts.KeyPrefix, Colocated: true}
	if len(items) > 0 {
		rdb.RPush(context.Background(), keys.List(), redistest.Values(items)...)
	}
	var logs bytes.Buffer
	log := zerolog.New(&logs)
	record := &finish.Recorder{Keys: keys, StateTTL: time.Hour}
	w := &worker{
		opts: opts,
		rotator: &Rotator{take.Taker{
			Client: rdb, Keys: keys, Token: testToken, TTL: time.Duration(opts.KeyExpiry),
			MaxItemLen: 100, Record: record, Log: log,
		}},
		finisher: &finish.Finisher{Client: rdb, Record: record, Schedule: finish.Schedule{
			Cooldown: time.Duration(opts.Cooldown), Backoff: opts.FailureBackoff,
		}},
		children: children,
		stops:    jobctl.New(log),
		metrics:  noMetrics{},
		log:      log,
	}
	if opts.UntilIdle {
		w.items = &status.Reader{Client: rdb, Keys: keys}
	}
	return w, &logs
}

// workerCase is a run of a worker over a list of items with scripted
// children, and how it must end.
type workerCase struct {
	name  string
	args  []string
	items []string
	ends  []finish.End
	// want is how the run ends (see describeEnd): "ok", "code N" or the
	// error's text.
	want string
	// ran is how many children ran.
	ran int
	// log is a phrase the log must hold.
	log string
}

// check runs tt with mode (worker.loop or worker.once) and checks how it
// ended.
func (tt workerCase) check(t *testing.T, mode func(*worker, context.Context) error) {
	children := &scriptedChildren{ends: tt.ends}
	w, logs := testWorker(t, children, tt.items, tt.args...)
	err := mode(w, context.Background())
	if got := describeEnd(err); got != tt.want {
		t.Errorf("the run ended with %s, want %s", got, tt.want)
	}
	if n := len(children.items()); n != tt.ran {
		t.Errorf("%d runs (%q), want %d", n, children.items(), tt.ran)
	}
	if !strings.Contains(logs.String(), tt.log) {
		t.Errorf("the log lacks %q:\n%s", tt.log, logs)
	}
}

// TestLoop drives the --continuous loop with scripted children over a real
// list: when it goes on, when it pauses, and how it ends.
func TestLoop(t *testing.T) {
	for _, tt := range []workerCase{
		{"stops on the first failure without --failure-backoff", []string{"-c"}, []string{"a", "b"},
			[]finish.End{exited(0), exited(3)}, "code 3", 2, `stopping: item \"b\" failed (exit code 3), and without --failure-backoff a --continuous worker stops on a failed run; --failure-backoff MIN[,MAX] (W8Y_FAILURE_BACKOFF) would back the item off and go on`},
		{"an exit code listed in --exit-codes goes on", []string{"-c", "-i", "0", "-i", "3", "--max-items", "4"}, []string{"a", "b"},
			[]finish.End{exited(3, 3)}, "ok", 4, "--max-items reached"},
		{"goes on through failures with --failure-backoff", []string{"-c", "--failure-backoff", "1h", "--max-items", "3"}, []string{"a", "b", "c"},
			[]finish.End{exited(2)}, "ok", 3, "going on: the item backs off"},
		{"--stop-on-failure with --failure-backoff stops", []string{"-c", "--failure-backoff", "1h", "--stop-on-failure"}, []string{"a", "b"},
			[]finish.End{exited(2)}, "code 2", 1, "--stop-on-failure stops the worker on a failed run"},
		{"a child that cannot be started ends the loop", []string{"-c", "--failure-backoff", "1h"}, []string{"a"},
			[]finish.End{newRunEnd("", proc.Exit{}, fmt.Errorf("%w: x", proc.ErrNotFound), false, []int{0})}, "executable not found: x", 1, ""},
		{"a timeout ends the loop", []string{"-c"}, []string{"a"},
			[]finish.End{newRunEnd("", proc.Exit{Code: 143}, fmt.Errorf("%w: x", ErrTimeout), false, []int{0})}, "code 124", 1, "listing 124 in --exit-codes would count a timeout as a success"},
		{"a timeout goes on when --exit-codes lists 124", []string{"-c", "-i", "0", "-i", "124", "--max-items", "2"}, []string{"a"},
			[]finish.End{newRunEnd("", proc.Exit{Code: 143}, fmt.Errorf("%w: x", ErrTimeout), false, []int{0, 124})}, "ok", 2, "going on: --exit-codes lists 124"},
		{"a lost lock is retried after a pause", []string{"-c", "--max-items", "2"}, []string{"a"},
			[]finish.End{newRunEnd("", proc.Exit{Code: 143}, fmt.Errorf("x: %w", lease.ErrLost), false, []int{0})}, "ok", 2, "retrying in "},
		{"--max-runtime ends an idle loop", []string{"-c", "--max-runtime", "300ms", "--idle-wait", "50ms"}, nil,
			[]finish.End{exited(0)}, "ok", 0, "--max-runtime reached"},
		{"--parallel fills every slot", []string{"-c", "--parallel", "3", "--max-items", "6"}, []string{"a", "b", "c", "d"},
			[]finish.End{exited(0)}, "ok", 6, "done; exiting"},
		{"--until-idle ends once every item cools down", []string{"-c", "--until-idle", "--cooldown", "1h"}, []string{"a", "b", "c"},
			[]finish.End{exited(0)}, "ok", 3, "--until-idle: nothing is left to run"},
		{"--until-idle retries an item that backs off", []string{"-c", "--until-idle", "--cooldown", "1h", "--failure-backoff", "10ms", "--idle-wait", "10ms"},
			[]string{"a", "b"}, []finish.End{exited(0), exited(1), exited(0)}, "ok", 3, "--until-idle: nothing is left to run"},
		{"--until-idle on a missing list ends at once, as a mistake", []string{"-c", "--until-idle"}, nil,
			[]finish.End{exited(0)}, noList, 0, "--until-idle: nothing is left to run"},
		{"--until-idle that took nothing ends as no work", []string{"-c", "--until-idle"}, []string{strings.Repeat("x", 101)},
			[]finish.End{exited(0)}, "code 0", 0, "--until-idle: nothing is left to run"},
	} {
		t.Run(tt.name, func(t *testing.T) { tt.check(t, (*worker).loop) })
	}
}

// noList is how a run over the missing list "loop:list" ends.
const noList = `the list "loop:list" does not exist or is empty: is --key-prefix (W8Y_KEY_PREFIX) right?`

// describeEnd names how the loop ended, for TestLoop.
func describeEnd(err error) string {
	code, explain := exitCode(err, 0)
	switch {
	case err == nil:
		return "ok"
	case !explain:
		return fmt.Sprintf("code %d", code)
	}
	return err.Error()
}

// TestLoopDrains: a stop signal while children run lets them finish, takes
// no more items, and ends well whatever the children's codes.
func TestLoopDrains(t *testing.T) {
	children := &scriptedChildren{ends: []finish.End{exited(1)}, hold: make(chan struct{}), began: make(chan string, 2)}
	w, logs := testWorker(t, children, []string{"a", "b", "c"}, "-c", "--parallel", "2")
	done := make(chan error, 1)
	go func() { done <- w.loop(context.Background()) }()
	<-children.began
	<-children.began
	w.stops.Handle(syscall.SIGTERM, nil)
	close(children.hold)
	if err := <-done; err != nil {
		t.Errorf("a drained loop ended with %v", err)
	}
	if n := len(children.items()); n != 2 {
		t.Errorf("%d runs after the stop, want the 2 that ran", n)
	}
	stopping, drained := strings.Index(logs.String(), "stopping:"), strings.Index(logs.String(), "drained; exiting")
	if stopping < 0 || drained < stopping {
		t.Errorf("the log does not say it is stopping, then that it drained:\n%s", logs)
	}
}

// TestStopCutsATakeShort: a stop signal ends a take that Redis does not
// answer within takeGrace, not after the client's timeouts, in both modes,
// and no error is retried after it.
func TestStopCutsATakeShort(t *testing.T) {
	for _, mode := range []struct {
		name string
		run  func(*worker, context.Context) error
		args []string
		want error
	}{
		{"one-shot", (*worker).once, nil, jobctl.StopError{Signal: syscall.SIGINT}},
		{"continuous", (*worker).loop, []string{"-c"}, nil},
	} {
		t.Run(mode.name, func(t *testing.T) {
			// A server that accepts connections but never answers.
			silent, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			accepted := make(chan net.Conn, 10)
			go func() {
				defer close(accepted)
				for {
					conn, err := silent.Accept()
					if err != nil {
						return
					}
					accepted <- conn
				}
			}()
			t.Cleanup(func() {
				silent.Close()
				for conn := range accepted {
					conn.Close()
				}
			})
			hung := redis.NewClient(&redis.Options{Addr: silent.Addr().String(), ContextTimeoutEnabled: true, ReadTimeout: time.Minute, WriteTimeout: time.Minute})
			w, logs := testWorker(t, &scriptedChildren{ends: []finish.End{exited(0)}}, []string{"a"}, mode.args...)
			w.rotator.Client = hung
			w.hangUp = func() { _ = hung.Close() }
			done := make(chan error, 1)
			go func() { done <- mode.run(w, context.Background()) }()
			// The take waits on the silent server.
			select {
			case conn := <-accepted:
				accepted <- conn // for the cleanup to close
			case <-time.After(poll.Timeout):
				t.Fatal("the take never connected")
			}
			began := time.Now()
			w.stops.Handle(syscall.SIGINT, nil)
			select {
			case err := <-done:
				if !errors.Is(err, mode.want) && err != mode.want {
					t.Errorf("ended with %v, want %v", err, mode.want)
				}
				if took := time.Since(began); took > takeGrace+time.Second {
					t.Errorf("a stop took %s to end a take", took)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("a stop did not end a take that Redis never answers")
			}
			if strings.Contains(logs.String(), "retrying") {
				t.Errorf("a Redis error was retried after the stop:\n%s", logs)
			}
		})
	}
}

// TestOnce: a one-shot run takes up to --parallel items from one pass and
// ends as its first failing child, or with take.ErrNoWork, which exits with
// --no-work-exit-code.
func TestOnce(t *testing.T) {
	for _, tt := range []workerCase{
		{"one item", nil, []string{"a", "b"}, []finish.End{exited(0)}, "ok", 1, ""},
		{"the child's code", nil, []string{"a"}, []finish.End{exited(7)}, "code 7", 1, ""},
		{"no item to take", nil, []string{strings.Repeat("x", 101)}, []finish.End{exited(0)}, "code 0", 0, "no item could be taken"},
		{"no list", nil, nil, []finish.End{exited(0)}, noList, 0, "no item could be taken"},
		{"--parallel takes several", []string{"--parallel", "3"}, []string{"a", "b"}, []finish.End{exited(0)}, "ok", 2, ""},
		{"--parallel ends as a failing child", []string{"--parallel", "2"}, []string{"a", "b"}, []finish.End{exited(0), exited(4)}, "code 4", 2, ""},
	} {
		t.Run(tt.name, func(t *testing.T) { tt.check(t, (*worker).once) })
	}
}
