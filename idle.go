package main

import (
	"context"
	"time"
)

// listCheckEvery is how often an idle --continuous worker checks again
// that its list exists: a missing list is said at the first idle pass, and
// again now and then while it stays missing, so that a worker with a
// mistyped --key-prefix is not silent forever, nor noisy.
const listCheckEvery = 10 * time.Minute

// warnIfListMissing warns when the list does not exist, after a pass that
// found nothing to take: a mistyped --key-prefix otherwise looks just like
// a list whose items are all taken. Redis keeps no empty list, so an empty
// one reads as missing too. A failed read says nothing: the next pass meets
// the same failure and reports it.
func (w *worker) warnIfListMissing(ctx context.Context) {
	list := w.rotator.Keys.List()
	n, err := w.rotator.Client.LLen(ctx, list).Result()
	if err != nil || n > 0 {
		return
	}
	w.log.Warn().Str("list", clip(list)).Msgf("the list %s does not exist or is empty: is --key-prefix (W8Y_KEY_PREFIX) right? Other programs add items with RPUSH %s ...", quoteKey(list), clip(list))
}
