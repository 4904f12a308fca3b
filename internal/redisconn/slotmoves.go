package redisconn

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// slotMoveWait bounds how long a command refused because its Cluster slot
// is moving (TRYAGAIN) is sent again, slotMoveRetry apart: a reshard
// moves a slot's keys in seconds, and an operator's command waits that
// long rather than fail.
const (
	slotMoveWait  = 30 * time.Second
	slotMoveRetry = 50 * time.Millisecond
)

// RideOutSlotMoves makes client send a command again, for up to
// slotMoveWait, while Redis refuses it because its keys are in a Cluster
// slot that is moving between nodes (TRYAGAIN: a command of several keys,
// or a script, that are not all on one node yet), as the workers' takes
// wait (see the root's slotMoving). Such a command was not applied, so
// that sending it again is safe. Pipelines are left alone: one command of
// a pipeline may have been applied where another was refused.
func RideOutSlotMoves(client redis.UniversalClient) {
	client.AddHook(slotMoveHook{})
}

type slotMoveHook struct{}

func (slotMoveHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (slotMoveHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		deadline := time.Now().Add(slotMoveWait)
		for {
			err := next(ctx, cmd)
			if !SlotMoving(err) || time.Now().After(deadline) {
				return err
			}
			select {
			case <-ctx.Done():
				return err
			case <-time.After(slotMoveRetry):
			}
			cmd.SetErr(nil)
		}
	}
}

func (slotMoveHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
