package integration_test

import (
	"os"
	"os/user"
	"testing"
	"time"
)

// TestOneWhoForPauseAndCancel: a pause and a cancel given by one person
// record the same who: $USER, else the login name (not "uid 0"), at the
// host.
func TestOneWhoForPauseAndCancel(t *testing.T) {
	t.Parallel()
	s := setup(t, "who")
	s.items("a", "b")
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		env  []string
		want string
	}{
		{nil, me.Username + "@" + host},
		{[]string{"USER=ops"}, "ops@" + host},
	} {
		// b runs somewhere, for cancel to ask its holder.
		s.Client.Set(ctx(t), s.key("lock:b"), "elsewhere:1:abc", time.Minute)
		at := []string{"-u", s.URL, "-k", "who"}
		runCtl(t, tt.env, append(at, "pause", "a")...).mustExit(t, 0)
		runCtl(t, tt.env, append(at, "cancel", "b")...).mustExit(t, 0)
		paused := s.Client.HGet(ctx(t), s.key("pause:a"), "by").Val()
		cancelled := s.Client.HGet(ctx(t), s.key("cancel:b"), "by").Val()
		if paused != tt.want || cancelled != tt.want {
			t.Errorf("with %q: pause by %q, cancel by %q, want both %q", tt.env, paused, cancelled, tt.want)
		}
		s.Client.Del(ctx(t), s.key("cancel:b"))
	}
}
