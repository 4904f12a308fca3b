package control

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/w8y/w8y/internal/redisconn"
	"github.com/w8y/w8y/internal/schema"
	"github.com/w8y/w8y/internal/script"
)

// cancelScript asks the holder of an item's lock, whoever it is now, to
// stop the item's child (cancel.lua).
//
//go:embed cancel.lua
var cancelSource string

var cancelScript = script.New(cancelSource)

var (
	// ErrNotRunning is a cancel of an item that no run holds: its lock is
	// free (or was set by hand, without an expiry). Nothing was changed.
	ErrNotRunning = errors.New("not running")
	// ErrNotColocated is a cancel under a prefix whose keys may live on
	// different servers, where one script cannot read an item's lock and
	// write its request together.
	ErrNotColocated = errors.New("cancel needs all of an item's keys on one server: on Redis Cluster, give the prefix a hash tag, such as -k '{work}'")
	// ErrReasonTooLong is a reason over MaxReason bytes.
	ErrReasonTooLong = fmt.Errorf("the reason is longer than %d bytes", MaxReason)
)

// MaxReason bounds a cancel's reason: a sentence for the state hash, the
// events and the logs, which the holder's refresh carries back, not a
// document.
const MaxReason = 1000

// Cancel asks whichever worker holds item's lock to stop its child, for
// reason: it writes item's cancel request (see schema.Keys.Cancel), aimed
// at the token the lock holds now, read in the same round trip, so that it
// can reach only the run under way. The holder notices at its next lock
// refresh, within a third of its --key-expiry, stops the child's process
// group as for a timeout, and records the run as cancelled; asFailure
// counts the run as a failure of the item too.
//
// It returns the request written, or ErrNotRunning when no run holds the
// lock, and then changes nothing.
func Cancel(ctx context.Context, client redis.Scripter, keys schema.Keys, item, reason string, asFailure bool) (schema.CancelRequest, error) {
	return CancelBy(ctx, client, keys, item, reason, Who(os.Getenv), asFailure)
}

// CancelBy is Cancel recorded as asked by by (see Who): w8yctl's verbs and
// the dashboard's actions name who gives them.
func CancelBy(ctx context.Context, client redis.Scripter, keys schema.Keys, item, reason, by string, asFailure bool) (schema.CancelRequest, error) {
	if !keys.Colocated {
		return schema.CancelRequest{}, ErrNotColocated
	}
	if len(reason) > MaxReason {
		return schema.CancelRequest{}, ErrReasonTooLong
	}
	// At as the request stores it: in whole milliseconds.
	req := schema.CancelRequest{Reason: reason, By: by, At: time.UnixMilli(time.Now().UnixMilli()), AsFailure: asFailure}
	failure := "0"
	if asFailure {
		failure = "1"
	}
	reply, err := cancelScript.Run(ctx, client, []string{keys.Lock(item), keys.Cancel(item)},
		req.Reason, req.By, strconv.FormatInt(req.At.UnixMilli(), 10), failure).Slice()
	if errors.Is(err, redis.Nil) {
		return schema.CancelRequest{}, fmt.Errorf("item %q: %w", item, ErrNotRunning)
	}
	if err != nil {
		return schema.CancelRequest{}, redisconn.Wrap("cancel item "+strconv.Quote(item), err)
	}
	holder, ok := reply[0].(string)
	if !ok || len(reply) != 2 {
		return schema.CancelRequest{}, redisconn.Wrap("cancel item "+strconv.Quote(item), fmt.Errorf("unexpected reply %v", reply))
	}
	req.Holder = holder
	return req, nil
}

// CancelRuns is w8yctl cancel: Cancel for each of items, once the list
// has been found to exist and to be a list, and each item to be in it or
// running, so that a mistyped prefix or item is refused rather than
// reported as "not running". An item that the list no longer holds is not
// refused while a run holds its lock: a removed item may still run. Each
// Result's Holder is the run asked to stop, or nil where none held the
// item's lock and nothing was changed; Changed is 1 where a request was
// written.
func (f *Fleet) CancelRuns(ctx context.Context, items []string, reason string, asFailure bool) ([]Result, error) {
	if len(reason) > MaxReason {
		return nil, ErrReasonTooLong
	}
	if err := f.checkList(ctx, nil); err != nil {
		return nil, err
	}
	if err := f.checkRunsOrListed(ctx, items); err != nil {
		return nil, err
	}
	var out []Result
	for _, item := range items {
		req, err := CancelBy(ctx, f.Client, f.Keys, item, reason, f.Who(), asFailure)
		switch {
		case errors.Is(err, ErrNotRunning):
			out = append(out, Result{Item: item})
		case err != nil:
			return out, err
		default:
			out = append(out, Result{Item: item, Changed: 1, Holder: &req.Holder})
		}
	}
	return out, nil
}

// checkRunsOrListed refuses, before any request is written, an item that
// the list does not hold and whose lock no run holds.
func (f *Fleet) checkRunsOrListed(ctx context.Context, items []string) error {
	pipe := f.Client.Pipeline()
	at := make([]*redis.IntCmd, len(items))
	held := make([]*redis.IntCmd, len(items))
	for i, item := range items {
		at[i] = pipe.LPos(ctx, f.Keys.List(), item, redis.LPosArgs{})
		held[i] = pipe.Exists(ctx, f.Keys.Lock(item))
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return redisconn.Wrap("read "+strconv.Quote(f.Keys.List()), err)
	}
	for i, item := range items {
		if errors.Is(at[i].Err(), redis.Nil) && held[i].Val() == 0 {
			return refusal{msg: fmt.Sprintf("%s is not in the list %q, and no run holds it (nothing was changed)", quote(item), f.Keys.List())}
		}
	}
	return nil
}
