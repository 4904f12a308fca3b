//go:build !w8y_lean

package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"github.com/w8y/w8y/internal/redisconn"
)

// metrics are the Prometheus metrics that --metrics-addr serves. They live
// in a registry of their own, not the library's global one, and exist only
// when --metrics-addr is given: a nil *metrics counts nothing, so the worker
// calls its methods unconditionally.
type metrics struct {
	registry    *prometheus.Registry
	started     prometheus.Counter
	finished    *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	locksLost   prometheus.Counter
	timeouts    prometheus.Counter
	redisErrors prometheus.Counter
	idlePasses  prometheus.Counter
	running     prometheus.Gauge
}

// results lists every result, for metrics that show each from the start,
// at zero.
var results = []result{resultSuccess, resultFailure, resultTimeout, resultLockLost, resultInterrupted}

// durationBuckets bound the run-duration histogram: from 10ms to about 11
// hours in steps of 4, since items range from a quick sync to a nightly
// report, and twelve buckets keep each scrape small.
var durationBuckets = prometheus.ExponentialBuckets(0.01, 4, 12)

// newMetrics registers w8y's metrics in a new registry. version and commit
// label w8y_build_info.
func newMetrics(version, commit string) *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		started: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "w8y_items_started_total", Help: "Children started, one per item run.",
		}),
		finished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "w8y_items_finished_total", Help: "Runs ended, by result: success, failure, timeout, lock_lost, interrupted.",
		}, []string{"result"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "w8y_run_duration_seconds", Help: "How long children ran, by result.", Buckets: durationBuckets,
		}, []string{"result"}),
		locksLost: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "w8y_locks_lost_total", Help: "Runs whose lock was lost; their child was stopped.",
		}),
		timeouts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "w8y_timeouts_total", Help: "Runs stopped by --timeout.",
		}),
		redisErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "w8y_redis_errors_total", Help: "Redis commands that failed: unreachable, timed out or answered with an error.",
		}),
		idlePasses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "w8y_idle_passes_total", Help: "Passes over the list that found no item to take.",
		}),
		running: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "w8y_children_running", Help: "Children running now, up to --parallel.",
		}),
	}
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "w8y_build_info", Help: "Always 1; the labels say which w8y runs.",
	}, []string{"version", "commit"})
	build.WithLabelValues(version, commit).Set(1)
	m.registry.MustRegister(m.started, m.finished, m.duration, m.locksLost, m.timeouts, m.redisErrors, m.idlePasses, m.running, build)
	// Every result shows from the start, at zero, so that rate() and alerts
	// on a result work before it first happens.
	for _, r := range results {
		m.finished.WithLabelValues(string(r))
		m.duration.WithLabelValues(string(r))
	}
	return m
}

// childStarted counts a child that has started.
func (m *metrics) childStarted() {
	if m == nil {
		return
	}
	m.started.Inc()
	m.running.Inc()
}

// childEnded counts a child that has ended, before its run is recorded.
func (m *metrics) childEnded() {
	if m == nil {
		return
	}
	m.running.Dec()
}

// runEnded counts a run that has ended.
func (m *metrics) runEnded(end runEnd) {
	if m == nil {
		return
	}
	m.finished.WithLabelValues(string(end.Result)).Inc()
	if end.Exited {
		m.duration.WithLabelValues(string(end.Result)).Observe(end.Duration.Seconds())
	}
	switch end.Result {
	case resultLockLost:
		m.locksLost.Inc()
	case resultTimeout:
		m.timeouts.Inc()
	}
}

// idlePass counts a pass that found nothing to take.
func (m *metrics) idlePass() {
	if m == nil {
		return
	}
	m.idlePasses.Inc()
}

// redisHook counts failed Redis commands, whoever sent them.
type redisHook struct{ m *metrics }

func (h redisHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h redisHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		// The returned error, not cmd.Err(): a failed dial never reaches
		// the command.
		err := next(ctx, cmd)
		h.count(err)
		return err
	}
}

func (h redisHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		counted := false
		for _, cmd := range cmds {
			if cmd.Err() != nil && cmd.Err() != redis.Nil {
				h.count(cmd.Err())
				counted = true
			}
		}
		if !counted {
			h.count(err)
		}
		return err
	}
}

// count counts err unless it is no error at all: redis.Nil is an answer,
// NOSCRIPT is the routine cue to send a script whole, and a canceled context
// is w8y stopping.
func (h redisHook) count(err error) {
	if err == nil || errors.Is(err, redis.Nil) || errors.Is(err, context.Canceled) || strings.HasPrefix(err.Error(), "NOSCRIPT") {
		return
	}
	h.m.redisErrors.Inc()
}

// shutdownTimeout bounds how long w8y waits for a scrape in flight when it
// exits: a scrape takes milliseconds, and exiting must not wait on a slow
// client.
const shutdownTimeout = 2 * time.Second

// serveMetrics listens on addr and serves /metrics and /healthz until the
// returned stop function is called; stop shuts the server down and waits
// for it. Listening happens before it returns, so a bad or busy address is
// an error at start-up, before any item is taken.
func serveMetrics(addr string, m *metrics, health http.Handler, log zerolog.Logger) (stop func(), err error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on --metrics-addr %q: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{}))
	mux.Handle("/healthz", health)
	srv := &http.Server{
		Handler: mux,
		// Probes and scrapers send small requests at once; a client that
		// trickles its headers gets cut off instead of holding a goroutine.
		ReadHeaderTimeout: 5 * time.Second,
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
			log.Error().Err(err).Msg("the metrics server stopped")
		}
	}()
	log.Info().Str("addr", l.Addr().String()).Msg("serving metrics and /healthz")
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			_ = srv.Close()
		}
		<-served
	}, nil
}

// healthHandler serves /healthz: 200 "ok" while Redis answers and the
// worker loop beats, 503 with the reason otherwise.
func healthHandler(probe *redisProbe, hb *heartbeat) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if err := probe.check(r.Context()); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "unhealthy: redis: %v\n", err)
			return
		}
		if late := hb.late(); late > 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "unhealthy: the worker loop has made no progress for %s longer than expected\n", late.Round(time.Second))
			return
		}
		fmt.Fprintln(w, "ok")
	})
}

// startMetrics sets up what --metrics-addr serves: the metrics, counting
// client's failed commands, the heartbeat and the Redis probe behind
// /healthz, and the server. stop shuts the server down.
func startMetrics(addr string, client redis.UniversalClient, keys Keys, log zerolog.Logger) (*metrics, *heartbeat, func(), error) {
	m := newMetrics(version, commit)
	hook := redisHook{m: m}
	client.AddHook(hook)
	health := newHeartbeat(time.Now)
	probe := &redisProbe{ping: redisPing(client, keys, hook), now: time.Now}
	stop, err := serveMetrics(addr, m, healthHandler(probe, health), log)
	if err != nil {
		return nil, nil, nil, err
	}
	return m, health, stop, nil
}

// redisPing returns /healthz' check of Redis: a PING of every server that
// the worker needs. On one server, or through Sentinel, that is the one
// server. On a Cluster, a PING without a key goes to whichever node the
// client picks, which says nothing of the nodes that hold the keys: so it
// goes to the master of the list's slot when the prefix has a hash tag (all
// keys live there), and to every master when it has none (the locks spread
// over all of them, and a take that meets a master that is down fails).
// Those PINGs go through the node clients, which the Cluster client's hook
// does not see, so their failures are counted here.
func redisPing(client redis.UniversalClient, keys Keys, hook redisHook) func(context.Context) error {
	cluster, ok := client.(*redis.ClusterClient)
	if !ok {
		return func(ctx context.Context) error { return client.Ping(ctx).Err() }
	}
	ping := func(ctx context.Context, node *redis.Client) error { return node.Ping(ctx).Err() }
	return func(ctx context.Context) error {
		var err error
		if redisconn.HasHashTag(keys.Prefix) {
			var node *redis.Client
			if node, err = cluster.MasterForKey(ctx, keys.List()); err == nil {
				err = ping(ctx, node)
			}
		} else {
			err = cluster.ForEachMaster(ctx, ping)
		}
		hook.count(err)
		return err
	}
}

// handOffMetrics is a no-op in this build, which serves metrics itself (see
// metrics_lean.go).
func handOffMetrics(*Options) error { return nil }
