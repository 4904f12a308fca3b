package main

import (
	"context"
	"errors"

	"github.com/w8y/w8y/internal/take"
)

// Choosing an item: the Rotator is what the loop asks for the next item and
// its Lock. How an item is taken (a pass per candidate or in batches, an idle
// look, a sweep) is internal/take's; this file turns its Taken into the Lock
// that the run holds.

// Rotator takes work items from the circular list: a take.Taker, whose
// settings (the client, the keys, the token, the lock's TTL...) are the
// Rotator's own, and whose takes come back as Locks. Its client also
// refreshes and releases them: a take.Client is a lockClient.
type Rotator struct {
	take.Taker
}

// Pass is one pass over the list (see take.Pass), whose takes come back as
// Locks: --parallel takes several items from one pass.
type Pass struct {
	r    *Rotator
	pass *take.Pass
}

// Pass starts a whole pass over the list (--until-idle's).
func (r *Rotator) Pass() *Pass { return &Pass{r: r, pass: r.Taker.Pass()} }

// LookFirst starts the way a worker takes (see take.Taker.LookFirst): each
// take looks at the appended items and the due index, and passes over the
// whole list only when elected to sweep for the fleet. Where the Rotator
// does not look, it is Pass.
func (r *Rotator) LookFirst() *Pass { return &Pass{r: r, pass: r.Taker.LookFirst()} }

// Take takes the next item of the pass and returns it with its Lock. It
// returns take.ErrNoWork once the pass has looked at every candidate, jobctl.ErrStopped
// if stop is closed before an item is taken, and an unconfirmedError for a
// lock that too few replicas confirmed.
func (p *Pass) Take(ctx context.Context, stop <-chan struct{}) (string, *Lock, error) {
	taken, err := p.pass.Take(ctx, stop)
	var unconfirmed *take.UnconfirmedError
	if errors.As(err, &unconfirmed) {
		return "", nil, &unconfirmedError{lock: p.r.lock(unconfirmed.Taken), err: err}
	}
	if err != nil {
		return "", nil, err
	}
	return taken.Item, p.r.lock(taken), nil
}

// unconfirmedError is a take.UnconfirmedError with the Lock to give back
// before any child runs (see worker.giveBack).
type unconfirmedError struct {
	lock *Lock
	err  error
}

func (e *unconfirmedError) Error() string { return e.err.Error() }
func (e *unconfirmedError) Unwrap() error { return e.err }

// lock is the Lock of what a take of this Rotator took.
func (r *Rotator) lock(t take.Taken) *Lock {
	return &Lock{
		Key: t.Key, Token: t.Token, TTL: r.TTL, Item: t.Item, Fence: t.Fence, Taken: t.At, CancelKey: t.CancelKey, LocksKey: t.LocksKey,
		client: r.Client, acks: r.ReplicaAcks, expires: t.Expires,
	}
}
