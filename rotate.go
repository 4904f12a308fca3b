package main

import "github.com/w8y/w8y/internal/take"

// Choosing an item: the Rotator is what the worker asks for the next item
// and its Lock. How an item is taken (a pass per candidate or in batches, an
// idle look, a sweep, --item's named take) is internal/take's, whose Pass the
// worker takes from directly (worker.take); this file turns what a take took
// into the Lock that the run holds.

// Rotator takes work items from the circular list: a take.Taker, whose
// settings (the client, the keys, the token, the lock's TTL...) are the
// Rotator's own, and whose takes become Locks (lock). Its client also
// refreshes and releases them: a take.Client is a lockClient.
type Rotator struct {
	take.Taker
}

// lock is the Lock of what a take of this Rotator took.
func (r *Rotator) lock(t take.Taken) *Lock {
	return &Lock{
		Key: t.Key, Token: t.Token, TTL: r.TTL, Item: t.Item, Fence: t.Fence, Taken: t.At, Start: t.Start, CancelKey: t.CancelKey, LocksKey: t.LocksKey, Run: t.Run,
		client: r.Client, acks: r.ReplicaAcks, expires: t.Expires,
	}
}
