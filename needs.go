package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/w8y/w8y/internal/redisconn"
)

// allowEvictionFlag is how a user who accepts an evicting Redis says so.
const allowEvictionFlag = "--allow-eviction (W8Y_ALLOW_EVICTION)"

// needsTimeout bounds one read of the server's INFO: a server that does not
// answer it in time is the take's to report.
const needsTimeout = 2 * time.Second

// watchEvery is how often a worker that runs on a server that may evict
// (--allow-eviction) reads evicted_keys, to log a rise.
var watchEvery = 10 * time.Second

// needs checks that the Redis a worker writes to keeps w8y's keys until
// w8y deletes them or they expire (docs/operating.md, "The Redis w8y
// needs"): at start and each time Redis is reachable again after an
// outage, since a failover or a restart may bring another configuration.
// A server that may evict (a maxmemory with a policy other than
// noeviction) is refused unless --allow-eviction, and then watched; a
// replica is refused; a server that hides INFO is said to be unchecked,
// once.
type needs struct {
	client redisconn.Infoer
	allow  bool
	log    zerolog.Logger

	mu        sync.Mutex
	unchecked bool  // said that INFO is refused
	warned    bool  // said that eviction is allowed
	evicting  bool  // the server may evict, and --allow-eviction lets w8y run
	evicted   int64 // evicted_keys when last read
}

// check reads the server's INFO and returns the refusal of a server that
// breaks w8y's promises; nil where it keeps them, or where INFO cannot be
// read (said once when refused; the take reports a server that fails).
func (n *needs) check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, needsTimeout)
	defer cancel()
	s, err := redisconn.ReadServer(ctx, n.client)
	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case redisconn.Unchecked(err):
		if !n.unchecked {
			n.unchecked = true
			n.log.Warn().Err(redisconn.Plain(err)).Msg("could not check whether Redis may evict w8y's keys, as INFO is refused (an ACL rule without +info?): make sure that its maxmemory-policy is noeviction")
		}
	case err != nil:
		n.log.Debug().Err(err).Msg("could not read Redis' INFO")
	case s.Replica():
		return redisconn.ReplicaRefusal(s)
	case s.MayEvict() && !n.allow:
		return redisconn.EvictionRefusal(s, allowEvictionFlag)
	case s.MayEvict():
		if !n.warned {
			n.warned = true
			n.log.Warn().Str("maxmemory_policy", s.Policy).Msgf("Redis may evict w8y's keys when it is full (maxmemory %s, maxmemory-policy %s), and --allow-eviction lets w8y run: a lock evicted lets a second worker run the same item", redisconn.Bytes(s.MaxMemory), s.Policy)
		}
		if !n.evicting {
			n.evicting, n.evicted = true, s.EvictedKeys
		}
	default:
		n.evicting = false
	}
	return nil
}

// watch logs each rise of the server's evicted_keys while w8y runs on a
// server that may evict, every watchEvery, until ctx ends.
func (n *needs) watch(ctx context.Context) {
	tick := time.NewTicker(watchEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		n.mu.Lock()
		evicting := n.evicting
		n.mu.Unlock()
		if !evicting {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, needsTimeout)
		s, err := redisconn.ReadServer(rctx, n.client)
		cancel()
		if err != nil {
			continue
		}
		n.mu.Lock()
		rise := s.EvictedKeys - n.evicted
		n.evicted = s.EvictedKeys
		n.mu.Unlock()
		if rise > 0 {
			n.log.Warn().Int64("evicted_keys", rise).Str("maxmemory_policy", s.Policy).Msgf("Redis evicted %d keys in the last %s (maxmemory %s, maxmemory-policy %s): a lock among them lets a second worker run its item", rise, watchEvery, redisconn.Bytes(s.MaxMemory), s.Policy)
		}
	}
}

// full adds to err, a reply that Redis is full, how full it is; any other
// error is returned as it is.
func (n *needs) full(ctx context.Context, err error) error {
	if redisconn.Code(err) != "OOM" {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, needsTimeout)
	defer cancel()
	s, rerr := redisconn.ReadServer(ctx, n.client)
	if rerr != nil || s.MaxMemory == 0 {
		return err
	}
	return fmt.Errorf("%w (used memory %s of maxmemory %s, maxmemory-policy %s)", err, redisconn.Bytes(s.UsedMemory), redisconn.Bytes(s.MaxMemory), s.Policy)
}
