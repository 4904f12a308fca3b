package dashboard

import (
	"context"
	"sync"
	"time"
)

// cached is a value that is costly to read (the whole list's summary, the
// chart's pass over the events stream), read for every browser at once: one
// request at a time reads it, while the others are given the last one read,
// so that the cost to Redis does not grow with the number of browsers open.
type cached[T any] struct {
	read func(context.Context) (T, error)
	now  func() time.Time
	// every is the least time between two reads. A read that takes long
	// (a long list) spaces the next one further: at most one fifth of the
	// time is spent reading, however slow Redis is.
	every time.Duration

	// turn is held by the request that reads.
	turn chan struct{}

	mu    sync.Mutex
	last  T
	at    time.Time
	took  time.Duration
	valid bool
	reads int
}

func newCached[T any](every time.Duration, now func() time.Time, read func(context.Context) (T, error)) *cached[T] {
	return &cached[T]{read: read, now: now, every: every, turn: make(chan struct{}, 1)}
}

// fresh returns the last value read and whether it is recent enough to
// serve without reading again.
func (c *cached[T]) fresh() (value T, ok, fresh bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last, c.valid, c.valid && c.now().Sub(c.at) < max(c.every, 4*c.took)
}

// get returns a value at most every old, reading it anew if it is older and
// nobody else is reading it; a request that finds another reading gets the
// last value, or, before the first, waits for that read.
func (c *cached[T]) get(ctx context.Context) (T, error) {
	value, ok, fresh := c.fresh()
	if fresh {
		return value, nil
	}
	select {
	case c.turn <- struct{}{}:
	default:
		if ok {
			return value, nil
		}
		select {
		case c.turn <- struct{}{}:
		case <-ctx.Done():
			var zero T
			return zero, ctx.Err()
		}
	}
	defer func() { <-c.turn }()
	// The request that held the turn before may have just read it.
	if value, _, fresh := c.fresh(); fresh {
		return value, nil
	}
	start := c.now()
	value, err := c.read(ctx)
	if err != nil {
		return value, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.last, c.valid, c.reads = value, true, c.reads+1
	c.at = c.now()
	c.took = c.at.Sub(start)
	return value, nil
}

// count is how many times the value has been read.
func (c *cached[T]) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reads
}
