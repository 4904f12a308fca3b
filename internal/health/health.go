// Package health tells whether a w8y worker is well, for probes: its loop
// beats as it makes progress (Heartbeat), and Redis answers a PING, asked
// at most once a second however many probes come (Probe). It has no
// dependencies, so that the build without metrics carries it at no cost.
package health

import (
	"context"
	"math"
	"sync"
	"time"
)

// Grace is how long the worker loop may go without a beat before
// /healthz calls it stuck, on top of any pause it announced. A pass over the
// list and a release take well under a second even on a large list, and each
// Redis call gives up within seconds (see dialTimeout), so a minute without a
// beat means the loop hangs, not that it is busy.
const Grace = time.Minute

// ChildBeat is how often the loop beats while a child runs: well within
// Grace.
const ChildBeat = Grace / 4

// Heartbeat tells /healthz whether the worker loop is making progress. Each
// time the loop moves on, it says by when it will beat again: within
// Grace, or after a pause plus that; each running child beats too,
// however many run at once. A nil *Heartbeat does nothing.
type Heartbeat struct {
	now func() time.Time

	mu  sync.Mutex
	due time.Time
}

// NewHeartbeat returns a Heartbeat that is due Grace from now.
func NewHeartbeat(now func() time.Time) *Heartbeat {
	return &Heartbeat{now: now, due: now().Add(Grace)}
}

// Beat records progress, and that the next beat comes within pause plus
// Grace. It never brings the due time forward: with --parallel,
// a running child's beats (see BeatEvery) must not cut short a pause that
// the loop announced, which may outlast the child.
func (h *Heartbeat) Beat(pause time.Duration) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	// A pause of forever (--idle-wait inf) must not wrap round to the past.
	pause = min(pause, math.MaxInt64-Grace)
	if due := h.now().Add(pause + Grace); due.After(h.due) {
		h.due = due
	}
}

// BeatEvery beats every period from a goroutine of its own until the
// returned function is called, which stops it and waits for it.
func (h *Heartbeat) BeatEvery(period time.Duration) (stop func()) {
	if h == nil {
		return func() {}
	}
	h.Beat(0)
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
				h.Beat(0)
			}
		}
	}()
	return func() {
		close(done)
		<-stopped
	}
}

// Late reports how long overdue the next beat is, or 0.
func (h *Heartbeat) Late() time.Duration {
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

// Probe pings Redis for /healthz, at most once per probeEvery.
type Probe struct {
	// Ping asks Redis whether it answers; Now is the clock.
	Ping func(ctx context.Context) error
	Now  func() time.Time

	mu      sync.Mutex
	checked time.Time
	err     error
}

// Check returns the outcome of a recent PING, or sends one. Probes that
// arrive while a PING is under way wait for it and share its outcome.
func (p *Probe) Check(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.checked.IsZero() && p.Now().Sub(p.checked) < probeEvery {
		return p.err
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	p.err = p.Ping(ctx)
	p.checked = p.Now()
	return p.err
}
