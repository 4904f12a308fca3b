package take

import (
	"context"
	"sync"
	"time"
)

// CutShort runs take, a take of an item, so that a stop cuts it short
// however long Redis takes to answer: Ctrl-C must not wait out the
// timeouts of a Redis that hangs.
//
// When stop closes, take's context ends at once, so that it sends no
// further command and a dial, a wait for a connection or a retry's pause
// ends; a command under way still gets its reply, so a lock that it took
// is released as every interrupted run's is. But go-redis bounds a read
// that is under way only by its timeout. So when hangUp is given (the
// caller says that nothing else needs the client any more) and take has not
// returned grace after the stop, CutShort calls hangUp, which must close the
// client and so end that read, and reports that it did. What Redis did with
// a command it had already received stays done: if it took a lock, that
// lock expires by itself, its run recorded as started.
//
// CutShort returns once take has, and calls hangUp only while take runs.
func CutShort(ctx context.Context, stop <-chan struct{}, grace time.Duration, hangUp func(), take func(context.Context)) (hungUp bool) {
	takeCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var mu sync.Mutex
	taking := true
	returned, watched := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-stop:
		case <-returned:
			return
		}
		cancel()
		if hangUp == nil {
			return
		}
		timer := time.NewTimer(grace)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-returned:
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if taking {
			hungUp = true
			hangUp()
		}
	}()
	take(takeCtx)
	mu.Lock()
	taking = false
	mu.Unlock()
	close(returned)
	<-watched
	return hungUp
}
