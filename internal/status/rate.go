package status

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/w8y/w8y/internal/clock"
	"github.com/w8y/w8y/internal/redisconn"
	"github.com/w8y/w8y/internal/schema"
	"github.com/w8y/w8y/internal/script"
)

//go:embed rate.lua
var rateSource string

// rateScript counts the fleet's starts in the window of --fleet-rate, on
// Redis' clock (rate.lua says how).
var rateScript = script.New(clock.Lua, rateSource)

// Rate is the --fleet-rate that the list's last take enforced, and the
// fleet's starts in its last window: "5 of 5 in the last 2s, next start in
// 400ms".
type Rate struct {
	// Rate is the rate as the option takes it ("5/2s"); Limit and PerMs
	// are its N and window.
	Rate  string `json:"rate"`
	Limit int64  `json:"limit"`
	PerMs int64  `json:"per_ms"`
	// Started is how many starts the fleet made in the last PerMs
	// milliseconds, on Redis' clock.
	Started int64 `json:"started"`
	// NextStartMs is how long until the rate allows a start, in
	// milliseconds: 0 when it allows one now.
	NextStartMs int64 `json:"next_start_ms"`
}

// Rate reads the rate of --fleet-rate that the last take recorded (see
// schema.Keys.FleetRate) and counts the fleet's starts in its window
// (schema.Keys.Starts): one GET, then, with a rate, one script that reads
// only. It returns nil when no rate is recorded: the fleet runs without one.
func (s *Reader) Rate(ctx context.Context) (*Rate, error) {
	pipe := s.Client.Pipeline()
	record := pipe.Get(ctx, s.Keys.FleetRate())
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, redisconn.Wrap("read the rate of --fleet-rate ("+strconv.Quote(s.Keys.FleetRate())+")", err)
	}
	rate, ok := schema.ParseRate(record.Val())
	if !ok {
		return nil, nil
	}
	got, err := rateScript.Run(ctx, s.Client, []string{s.Keys.Starts()}, rate.Starts, rate.Per.Milliseconds()).Int64Slice()
	if err != nil || len(got) != 2 {
		if err == nil {
			err = errors.New("unexpected reply from rate.lua")
		}
		return nil, redisconn.Wrap("count the starts of --fleet-rate ("+strconv.Quote(s.Keys.Starts())+")", err)
	}
	return &Rate{Rate: rate.String(), Limit: int64(rate.Starts), PerMs: rate.Per.Milliseconds(), Started: got[0], NextStartMs: got[1]}, nil
}

// Line is the rate as status shows it, on the summary's last line:
// "rate: 5 of 5 in the last 2s, next start in 400ms (--fleet-rate 5/2s)",
// or without the next start while the rate allows one now.
func (r *Rate) Line() string {
	per := schema.FormatPer(time.Duration(r.PerMs) * time.Millisecond)
	line := fmt.Sprintf("rate: %d of %d in the last %s", r.Started, r.Limit, per)
	if r.NextStartMs > 0 {
		line += ", next start in " + short(time.Duration(r.NextStartMs)*time.Millisecond)
	}
	return line + " (--fleet-rate " + r.Rate + ")"
}
