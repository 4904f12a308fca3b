package main

import (
	"context"
	"sync"
	"time"
)

// heartbeatGrace is how long the worker loop may go without a beat before
// /healthz calls it stuck, on top of any pause it announced. A pass over the
// list and a release take well under a second even on a large list, and each
// Redis call gives up within seconds (see dialTimeout), so a minute without a
// beat means the loop hangs, not that it is busy.
const heartbeatGrace = time.Minute

// childBeat is how often the loop beats while a child runs: well within
// heartbeatGrace.
const childBeat = heartbeatGrace / 4

// heartbeat tells /healthz whether the worker loop is making progress. Each
// time the loop moves on, it says by when it will beat again: within
// heartbeatGrace, or after a pause plus that; each running child beats too,
// however many run at once. A nil *heartbeat does nothing.
type heartbeat struct {
	now func() time.Time

	mu  sync.Mutex
	due time.Time
}

// newHeartbeat returns a heartbeat that is due heartbeatGrace from now.
func newHeartbeat(now func() time.Time) *heartbeat {
	return &heartbeat{now: now, due: now().Add(heartbeatGrace)}
}

// beat records progress, and that the next beat comes within pause plus
// heartbeatGrace. It never brings the due time forward: with --parallel,
// a running child's beats (see beatEvery) must not cut short a pause that
// the loop announced, which may outlast the child.
func (h *heartbeat) beat(pause time.Duration) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if due := h.now().Add(pause + heartbeatGrace); due.After(h.due) {
		h.due = due
	}
}

// beatEvery beats every period from a goroutine of its own until the
// returned function is called, which stops it and waits for it.
func (h *heartbeat) beatEvery(period time.Duration) (stop func()) {
	if h == nil {
		return func() {}
	}
	h.beat(0)
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		ticker := time.NewTicker(period)
		defer ticker.Stop()
		for {
			select {
			case <-done:
				return
			case <-ticker.C:
				h.beat(0)
			}
		}
	}()
	return func() {
		close(done)
		<-stopped
	}
}

// late reports how long overdue the next beat is, or 0.
func (h *heartbeat) late() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return max(h.now().Sub(h.due), 0)
}

const (
	// probeEvery is how long a PING's outcome is reused: probes from several
	// kubelets, or a tight probe period, still send Redis at most one PING a
	// second.
	probeEvery = time.Second
	// probeTimeout bounds a PING: a Redis that takes longer is unhealthy
	// for the purpose of a probe, which has its own timeout of a second by
	// default in Kubernetes.
	probeTimeout = 800 * time.Millisecond
)

// redisProbe pings Redis for /healthz, at most once per probeEvery.
type redisProbe struct {
	ping func(ctx context.Context) error
	now  func() time.Time

	mu      sync.Mutex
	checked time.Time
	err     error
}

// check returns the outcome of a recent PING, or sends one. Probes that
// arrive while a PING is under way wait for it and share its outcome.
func (p *redisProbe) check(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.checked.IsZero() && p.now().Sub(p.checked) < probeEvery {
		return p.err
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	p.err = p.ping(ctx)
	p.checked = p.now()
	return p.err
}
