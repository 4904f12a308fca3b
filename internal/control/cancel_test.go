package control

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/w8y/w8y/internal/redistest"
	"github.com/w8y/w8y/internal/schema"
)

// TestCancel: a cancel writes a request aimed at the lock's token, which
// expires when the lock would; one of an item that no run holds, or one
// that cannot be asked for, says so and changes nothing.
func TestCancel(t *testing.T) {
	keys := schema.Keys{Prefix: "w:", Colocated: true}
	for _, tt := range []struct {
		name string
		// lock sets up the item's lock key, if any.
		lock   func(t *testing.T, s *redistest.Server)
		keys   schema.Keys
		reason string
		want   error
	}{
		{name: "running", lock: setLock(time.Minute), keys: keys, reason: "deploy in progress"},
		{name: "no lock", lock: func(*testing.T, *redistest.Server) {}, keys: keys, want: ErrNotRunning},
		{name: "a lock without an expiry", lock: setLock(0), keys: keys, want: ErrNotRunning},
		{
			name: "a lock key of another type",
			lock: func(t *testing.T, s *redistest.Server) {
				if err := s.Client.HSet(context.Background(), "w:lock:a", "f", "v").Err(); err != nil {
					t.Fatal(err)
				}
			},
			keys: keys, want: ErrNotRunning,
		},
		{name: "keys not colocated", lock: setLock(time.Minute), keys: schema.Keys{Prefix: "w:"}, want: ErrNotColocated},
		{name: "a reason too long", lock: setLock(time.Minute), keys: keys, reason: strings.Repeat("x", MaxReason+1), want: ErrReasonTooLong},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := redistest.Start(t)
			ctx := context.Background()
			tt.lock(t, s)
			before := s.Client.Keys(ctx, "*").Val()
			req, err := Cancel(ctx, s.Client, tt.keys, "a", tt.reason, true)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Cancel: %v, want %v", err, tt.want)
			}
			if tt.want != nil {
				if after := s.Client.Keys(ctx, "*").Val(); len(after) != len(before) {
					t.Errorf("keys %q after a refused cancel, %q before", after, before)
				}
				return
			}
			stored := s.Client.HGetAll(ctx, "w:cancel:a").Val()
			want := map[string]string{
				schema.CancelHolder: "token-1", schema.CancelReason: tt.reason, schema.CancelBy: req.By,
				schema.CancelAt: itoa(req.At.UnixMilli()), schema.CancelAsFailure: "1",
			}
			if len(stored) != len(want) {
				t.Fatalf("request %q, want %q", stored, want)
			}
			for f, v := range want {
				if stored[f] != v {
					t.Errorf("request's %s is %q, want %q", f, stored[f], v)
				}
			}
			if req.Holder != "token-1" || !strings.Contains(req.By, "@") {
				t.Errorf("Cancel returned %+v", req)
			}
			// The request expires when the lock would, a millisecond
			// before; the request's time to live is read last.
			lockLeft, reqLeft := s.Client.PTTL(ctx, "w:lock:a").Val(), s.Client.PTTL(ctx, "w:cancel:a").Val()
			if reqLeft <= 0 || reqLeft > lockLeft || lockLeft-reqLeft > 50*time.Millisecond {
				t.Errorf("request expires in %s, the lock in %s", reqLeft, lockLeft)
			}
		})
	}
}

// setLock sets the lock of item "a" to token-1, expiring after ttl (0: no
// expiry).
func setLock(ttl time.Duration) func(t *testing.T, s *redistest.Server) {
	return func(t *testing.T, s *redistest.Server) {
		if err := s.Client.Set(context.Background(), "w:lock:a", "token-1", ttl).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
