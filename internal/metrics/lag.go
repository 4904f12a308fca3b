package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/w8y/w8y/internal/status"
)

// lagTimeout bounds a scrape's read of the lag: Prometheus' own scrape
// timeout is 10s by default, and a Redis that does not answer two small
// reads in 2s is as good as down for this.
const lagTimeout = 2 * time.Second

// lagCollector reads how far behind the fleet is, at each scrape, from the
// due index (status.Reader.Lag: two round trips whatever the list's
// length): every worker of a list reports the same values, so alerts take
// max by (list).
type lagCollector struct {
	reader  *status.Reader
	now     func() time.Time
	overdue *prometheus.Desc
	never   *prometheus.Desc
	lag     *prometheus.Desc
	up      *prometheus.Desc
	// inUse and fleetMax are the places of --fleet-max-running, reported
	// only where a cap is recorded.
	inUse, fleetMax *prometheus.Desc
	// rateStarts, rateLimit, rateWindow and rateNext are the rate of
	// --fleet-rate and the fleet's starts in its window, reported only
	// where a rate is recorded.
	rateStarts, rateLimit, rateWindow, rateNext *prometheus.Desc
}

func newLagCollector(reader *status.Reader, now func() time.Time) *lagCollector {
	labels := prometheus.Labels{"list": reader.Keys.List()}
	return &lagCollector{
		reader: reader,
		now:    now,
		overdue: prometheus.NewDesc("w8y_overdue_items",
			"Items whose cooldown, backoff or schedule lets them run that no worker has taken yet, from the due index, and the items no worker has tried yet (the same on every worker of the list).", nil, labels),
		never: prometheus.NewDesc("w8y_never_tried_items",
			"Items that no worker has tried yet, among w8y_overdue_items: a list loaded at once, items appended since the fleet last looked.", nil, labels),
		lag: prometheus.NewDesc("w8y_lag_seconds",
			"How long ago the most overdue item came due: how far behind the fleet is on the list (0 when none is overdue).", nil, labels),
		up: prometheus.NewDesc("w8y_redis_up",
			"1 when this scrape's read of the due index reached Redis, 0 when it failed.", nil, labels),
		inUse: prometheus.NewDesc("w8y_fleet_running",
			"Runs of the list that hold a place of --fleet-max-running, anywhere in the fleet (the same on every worker of the list).", nil, labels),
		fleetMax: prometheus.NewDesc("w8y_fleet_max_running",
			"The --fleet-max-running that the list's last take enforced: how many places the fleet shares.", nil, labels),
		rateStarts: prometheus.NewDesc("w8y_fleet_rate_starts",
			"Starts of the list's items in the last window of --fleet-rate, anywhere in the fleet, on Redis' clock (the same on every worker of the list).", nil, labels),
		rateLimit: prometheus.NewDesc("w8y_fleet_rate_limit",
			"The N of the --fleet-rate N/DURATION that the list's last take enforced: the most starts in any window of w8y_fleet_rate_window_seconds.", nil, labels),
		rateWindow: prometheus.NewDesc("w8y_fleet_rate_window_seconds",
			"The DURATION of the --fleet-rate N/DURATION that the list's last take enforced.", nil, labels),
		rateNext: prometheus.NewDesc("w8y_fleet_rate_next_start_seconds",
			"How long until --fleet-rate allows the fleet's next start: 0 while it allows one now.", nil, labels),
	}
}

func (c *lagCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.overdue
	ch <- c.never
	ch <- c.lag
	ch <- c.up
	ch <- c.inUse
	ch <- c.fleetMax
	ch <- c.rateStarts
	ch <- c.rateLimit
	ch <- c.rateWindow
	ch <- c.rateNext
}

// Collect reads the lag, the places of --fleet-max-running where a cap is
// recorded, and the rate of --fleet-rate where a rate is; a failed read
// reports w8y_redis_up 0 and leaves the lag out rather than report a
// made-up 0 (a failed read of the places or the rate leaves them out).
func (c *lagCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), lagTimeout)
	defer cancel()
	lag, err := c.reader.Lag(ctx, c.now())
	if err != nil {
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 1)
	ch <- prometheus.MustNewConstMetric(c.overdue, prometheus.GaugeValue, float64(lag.Overdue))
	ch <- prometheus.MustNewConstMetric(c.never, prometheus.GaugeValue, float64(lag.NeverTried))
	ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, float64(lag.MostOverdueMs)/1000)
	if places, err := c.reader.Places(ctx); err == nil && places != nil {
		ch <- prometheus.MustNewConstMetric(c.inUse, prometheus.GaugeValue, float64(places.InUse))
		ch <- prometheus.MustNewConstMetric(c.fleetMax, prometheus.GaugeValue, float64(places.Limit))
	}
	if rate, err := c.reader.Rate(ctx); err == nil && rate != nil {
		ch <- prometheus.MustNewConstMetric(c.rateStarts, prometheus.GaugeValue, float64(rate.Started))
		ch <- prometheus.MustNewConstMetric(c.rateLimit, prometheus.GaugeValue, float64(rate.Limit))
		ch <- prometheus.MustNewConstMetric(c.rateWindow, prometheus.GaugeValue, float64(rate.PerMs)/1000)
		ch <- prometheus.MustNewConstMetric(c.rateNext, prometheus.GaugeValue, float64(rate.NextStartMs)/1000)
	}
}
