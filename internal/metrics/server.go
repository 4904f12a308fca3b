package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"github.com/w8y/w8y/internal/health"
	"github.com/w8y/w8y/internal/redisconn"
	"github.com/w8y/w8y/internal/schema"
	"github.com/w8y/w8y/internal/status"
)

// shutdownTimeout bounds how long w8y waits for a scrape in flight when it
// exits: a scrape takes milliseconds, and exiting must not wait on a slow
// client.
const shutdownTimeout = 2 * time.Second

// serve listens on addr and serves /metrics and the probes until the
// returned stop function is called; stop shuts the server down and waits
// for it. Listening happens before it returns, so a bad or busy address is
// an error at start-up, before any item is taken.
func serve(addr string, m *Metrics, probes probes, log zerolog.Logger) (stop func(), err error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on --metrics-addr %q: %w", addr, err)
	}
	srv := &http.Server{
		Handler: srvMux(m, probes),
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
	log.Info().Str("addr", l.Addr().String()).Msg("serving /metrics, /livez, /readyz and /healthz")
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			_ = srv.Close()
		}
		<-served
	}, nil
}

// probes are what a worker's health is read from: Redis, and the loop.
type probes struct {
	redis *health.Probe
	loop  *health.Heartbeat
}

// srvMux routes /metrics to m, and the probes: /livez (the worker loop
// makes progress), /readyz (Redis answers) and /healthz (both).
//
// A liveness probe that failed while Redis is down would have Kubernetes
// restart every worker of the fleet at each Redis outage, which a restart
// cannot mend and the loop rides out by itself; so /livez asks only
// whether the loop is stuck. /healthz is both, as it was before the other
// two existed.
func srvMux(m *Metrics, p probes) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{}))
	mux.Handle("/livez", probeHandler(p.live))
	mux.Handle("/readyz", probeHandler(p.ready))
	mux.Handle("/healthz", probeHandler(func(ctx context.Context) error {
		if err := p.ready(ctx); err != nil {
			return err
		}
		return p.live(ctx)
	}))
	return mux
}

// live says why the worker loop is stuck, or nil.
func (p probes) live(context.Context) error {
	if late := p.loop.Late(); late > 0 {
		return fmt.Errorf("the worker loop has made no progress for %s longer than expected", late.Round(time.Second))
	}
	return nil
}

// ready says why Redis cannot be used, or nil.
func (p probes) ready(ctx context.Context) error {
	if err := p.redis.Check(ctx); err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	return nil
}

// probeHandler serves a probe: 200 "ok" while check finds nothing wrong,
// 503 with the reason otherwise.
func probeHandler(check func(context.Context) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if err := check(r.Context()); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "unhealthy: %v\n", err)
			return
		}
		fmt.Fprintln(w, "ok")
	})
}

// Start sets up what --metrics-addr serves: the metrics (labelled with
// version and commit), counting client's failed commands, the heartbeat and
// the Redis probe behind /healthz, and the server. stop shuts the server
// down and waits for it.
func Start(addr string, client redis.UniversalClient, keys schema.Keys, version, commit string, log zerolog.Logger) (m *Metrics, beat *health.Heartbeat, stop func(), err error) {
	m = New(version, commit)
	m.registry.MustRegister(newLagCollector(&status.Reader{Client: client, Keys: keys}, time.Now), mayEvict(client))
	hook := redisHook{m: m}
	client.AddHook(hook)
	beat = health.NewHeartbeat(time.Now)
	probe := &health.Probe{Ping: redisPing(client, keys, hook), Now: time.Now}
	stop, err = serve(addr, m, probes{redis: probe, loop: beat}, log)
	if err != nil {
		return nil, nil, nil, err
	}
	return m, beat, stop, nil
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
func redisPing(client redis.UniversalClient, keys schema.Keys, hook redisHook) func(context.Context) error {
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

// mayEvict is w8y_redis_may_evict, read from Redis' INFO at each scrape:
// 1 where Redis may evict w8y's keys when it is full (a worker runs there
// only with --allow-eviction), 0 where it will not, and no value where
// INFO cannot be read (an ACL without +info).
func mayEvict(client redisconn.Infoer) prometheus.Collector {
	desc := prometheus.NewDesc("w8y_redis_may_evict", "1 where Redis may evict w8y's keys when it is full (maxmemory with a maxmemory-policy other than noeviction), else 0.", nil, nil)
	return collectorFunc{desc: desc, collect: func(ch chan<- prometheus.Metric) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		s, err := redisconn.ReadServer(ctx, client)
		if err != nil {
			return
		}
		v := 0.0
		if s.MayEvict() {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v)
	}}
}

// collectorFunc is a collector of one metric, read at each scrape.
type collectorFunc struct {
	desc    *prometheus.Desc
	collect func(chan<- prometheus.Metric)
}

func (c collectorFunc) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }
func (c collectorFunc) Collect(ch chan<- prometheus.Metric) { c.collect(ch) }
