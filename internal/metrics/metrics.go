// Package metrics is what w8y --metrics-addr serves: Prometheus metrics of
// the runs, in a registry of their own, counted failures of every Redis
// command, and /healthz. It links the Prometheus client and net/http, which
// the lean build of w8y leaves out (see the root's metrics_on.go and
// metrics_off.go).
package metrics

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/w8y/w8y/internal/redisconn"
	"github.com/w8y/w8y/internal/schema"
)

// Metrics are the Prometheus metrics that --metrics-addr serves. They live
// in a registry of their own, not the library's global one.
type Metrics struct {
	registry    *prometheus.Registry
	started     prometheus.Counter
	finished    *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	locksLost   prometheus.Counter
	timeouts    prometheus.Counter
	redisErrors prometheus.Counter
	idlePasses  prometheus.Counter
	running     prometheus.Gauge
	streaks     *prometheus.CounterVec
}

// streakFloors are the lengths of failure streaks that
// w8y_failure_streaks_total counts runs at: enough for an alert on "failed
// N times in a row" with N of 3, 5 or 10, without a label per item.
var streakFloors = []int64{1, 3, 5, 10}

// durationBuckets bound the run-duration histogram: from 10ms to about 11
// hours in steps of 4, since items range from a quick sync to a nightly
// report, and twelve buckets keep each scrape small.
var durationBuckets = prometheus.ExponentialBuckets(0.01, 4, 12)

// New registers w8y's metrics in a new registry. version and commit label
// w8y_build_info.
func New(version, commit string) *Metrics {
	m := &Metrics{
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
	m.streaks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "w8y_failure_streaks_total", Help: "Runs that left their item with at least this many consecutive failures (1, 3, 5, 10).",
	}, []string{"at_least"})
	for _, floor := range streakFloors {
		m.streaks.WithLabelValues(strconv.FormatInt(floor, 10))
	}
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "w8y_build_info", Help: "Always 1; the labels say which w8y runs.",
	}, []string{"version", "commit"})
	build.WithLabelValues(version, commit).Set(1)
	m.registry.MustRegister(m.started, m.finished, m.duration, m.locksLost, m.timeouts, m.redisErrors, m.idlePasses, m.running, m.streaks, build)
	// Every result shows from the start, at zero, so that rate() and alerts
	// on a result work before it first happens.
	for _, r := range schema.Results {
		m.finished.WithLabelValues(string(r))
		m.duration.WithLabelValues(string(r))
	}
	return m
}

// ChildStarted counts a child that has started.
func (m *Metrics) ChildStarted() {
	m.started.Inc()
	m.running.Inc()
}

// ChildEnded counts a child that has ended, before its run is recorded.
func (m *Metrics) ChildEnded() {
	m.running.Dec()
}

// RunEnded counts a run that has ended with result, and how long its child
// ran, when one ran.
func (m *Metrics) RunEnded(result schema.Result, ran bool, took time.Duration) {
	m.finished.WithLabelValues(string(result)).Inc()
	if ran {
		m.duration.WithLabelValues(string(result)).Observe(took.Seconds())
	}
	switch result {
	case schema.ResultLockLost:
		m.locksLost.Inc()
	case schema.ResultTimeout:
		m.timeouts.Inc()
	}
}

// FailureStreak counts a run that left its item with failures consecutive
// failures (-1 when not known, as finish.Finish says).
func (m *Metrics) FailureStreak(failures int64) {
	for _, floor := range streakFloors {
		if failures >= floor {
			m.streaks.WithLabelValues(strconv.FormatInt(floor, 10)).Inc()
		}
	}
}

// IdlePass counts a pass that found nothing to take.
func (m *Metrics) IdlePass() {
	m.idlePasses.Inc()
}

// redisHook counts failed Redis commands, whoever sent them.
type redisHook struct{ m *Metrics }

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
	if err == nil || errors.Is(err, redis.Nil) || errors.Is(err, context.Canceled) || redisconn.NoScript(err) {
		return
	}
	h.m.redisErrors.Inc()
}
