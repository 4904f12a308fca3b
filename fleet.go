package main

import (
	"context"
	"os"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"github.com/w8y/w8y/internal/registry"
	"github.com/w8y/w8y/internal/schema"
)

// The worker in the fleet: it announces itself in the registry of live
// workers (internal/registry) while it runs, and spaces its looks at the
// due index by how many live workers look, so that the fleet's looks
// together come at a bounded rate however many workers there are, as
// Sidekiq spaces its scheduled-job polls by the number of its processes.

// fleetLookSpacing is the mean time between two looks of the whole fleet,
// once it is large enough (more than lookEvery/fleetLookSpacing = 16 idle
// workers): sixteen workers look every 800ms each, a thousand every 50 s
// each, and either fleet looks about 20 times a second. A look costs Redis
// about 0.1 ms, so an idle fleet of any size costs it about 2 ms/s of CPU
// in looks; and as the looks of many workers come at random moments, an
// item made due waits for the next one about ln 2 × 50ms ≈ 35ms at the
// median, well within the 100ms that a pickup may take.
const fleetLookSpacing = 50 * time.Millisecond

// lookInterval is the pause (before jitter) between one worker's looks,
// when lookers live workers look, this one among them: base (--idle-wait,
// at most lookEvery) while the fleet is small, and lookers times the
// fleet's spacing once it is larger, so that the fleet looks about once
// every min(fleetLookSpacing, base). A shorter --idle-wait than
// fleetLookSpacing stays the fleet's spacing: a fleet looks no less often
// than one of its workers would alone.
func lookInterval(base time.Duration, lookers int) time.Duration {
	return max(base, time.Duration(max(lookers, 1))*min(fleetLookSpacing, base))
}

// lookPause is an idle worker's pause before its next look, with
// --idle-wait idleWait: see lookInterval.
func (w *worker) lookPause(idleWait time.Duration) time.Duration {
	return lookInterval(min(idleWait, lookEvery), w.presence.Lookers())
}

// announce keeps w's entry in the registry of live workers while ctx
// lasts; the returned stop ends it, removes the entry and waits for that.
func announce(ctx context.Context, w *worker, client redis.UniversalClient, keys schema.Keys, token string, log zerolog.Logger) (stop func()) {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown-host"
	}
	v, _ := buildVersion()
	opts := w.opts
	w.presence = registry.NewPresence(client, keys, registry.Self{
		Holder: token, Host: host, PID: os.Getpid(), Version: v, Started: time.Now(),
		Continuous: opts.Continuous, Slots: opts.Parallel,
		Looks: opts.Continuous && !opts.UntilIdle && w.rotator.Looks(),
	}, log)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.presence.Run(ctx)
	}()
	return func() { cancel(); <-done }
}
