package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/w8y/w8y/internal/redistest"
)

// TestLeasePauseAndResume: a lease paused while w8y is stopped refreshes
// nothing; on Resume it goes on at once within the lease it knows of, and
// past that only once a refresh finds the lock still its own. A lock lost
// meanwhile is reported on Lost before kill is called, so that whoever sees
// the child end knows why.
func TestLeasePauseAndResume(t *testing.T) {
	for _, tt := range []struct {
		name string
		// meanwhile happens to the lock while the lease is paused.
		meanwhile func(t *testing.T, s *redistest.Server, lock *Lock)
		lost      bool
	}{
		{name: "a short pause", meanwhile: func(*testing.T, *redistest.Server, *Lock) {}},
		{
			name: "a pause past the give-up point, the lock still ours",
			meanwhile: func(t *testing.T, s *redistest.Server, lock *Lock) {
				// As if w8y had been stopped past the give-up point
				// while the server kept the key a little longer.
				lock.expires = time.Now()
			},
		},
		{
			name: "the lock expired",
			meanwhile: func(t *testing.T, s *redistest.Server, lock *Lock) {
				redistest.WaitFor(t, "the lock to expire", func() bool { return s.Client.Exists(context.Background(), lock.Key).Val() == 0 })
			},
			lost: true,
		},
		{
			name: "another took it after it expired",
			meanwhile: func(t *testing.T, s *redistest.Server, lock *Lock) {
				redistest.WaitFor(t, "the lock to expire", func() bool { return s.Client.Exists(context.Background(), lock.Key).Val() == 0 })
				s.Client.Set(context.Background(), lock.Key, "another", time.Minute)
			},
			lost: true,
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := redistest.Start(t)
			const ttl = 600 * time.Millisecond
			lock := &Lock{Key: "lease:lock:a", Token: "ours", TTL: ttl, Item: "a", client: s.Client, expires: time.Now().Add(ttl)}
			if err := s.Client.Set(context.Background(), lock.Key, lock.Token, ttl).Err(); err != nil {
				t.Fatal(err)
			}
			k := lock.keepAlive(context.Background(), 100*time.Millisecond, zerolog.Nop())
			defer k.Stop()
			k.Pause()
			tt.meanwhile(t, s, lock)
			killed := false
			err := k.Resume(func() {
				killed = true
				select {
				case <-k.Lost():
				default:
					t.Error("kill was called before the loss was reported")
				}
			})
			if tt.lost != (err != nil) || tt.lost != killed || (err != nil && !errors.Is(err, ErrLockLost)) {
				t.Fatalf("Resume = %v, killed %v; want lost %v", err, killed, tt.lost)
			}
			if tt.lost {
				return
			}
			// Refreshing goes on: the lock outlives its TTL twice over,
			// which only the passing of that time can show.
			time.Sleep(2 * ttl)
			if got := s.Client.Get(context.Background(), lock.Key).Val(); got != lock.Token {
				t.Errorf("after Resume the lock holds %q", got)
			}
		})
	}
}
