package schema

import (
	"strings"
	"testing"
)

// FuzzKeys: an item is any bytes (Redis strings are binary), and so is a
// prefix; every key of an item is the prefix, its kind and the item itself,
// unchanged, so that two items never share a key and w8yctl check can read
// the item back from the key.
func FuzzKeys(f *testing.F) {
	f.Add("work", "report-42")
	f.Add("", "")
	f.Add("{work}:", "a:b")
	f.Add("w:", "lock:x")
	f.Add("w", "\x00\xff\n \"")
	f.Fuzz(func(t *testing.T, prefix, item string) {
		norm := NormalizePrefix(prefix)
		if NormalizePrefix(norm) != norm {
			t.Errorf("NormalizePrefix(%q) = %q, which it changes again", prefix, norm)
		}
		if prefix != "" && (!strings.HasSuffix(norm, ":") || strings.TrimSuffix(norm, ":") != strings.TrimSuffix(prefix, ":")) {
			t.Errorf("NormalizePrefix(%q) = %q", prefix, norm)
		}
		k := Keys{Prefix: norm}
		for kind, key := range map[string]string{
			"lock:": k.Lock(item), "cooldown:": k.Cooldown(item), "backoff:": k.Backoff(item),
			"pause:": k.Pause(item), "state:": k.State(item), "cancel:": k.Cancel(item),
		} {
			if got, ok := strings.CutPrefix(key, norm+kind); !ok || got != item {
				t.Errorf("the %s key of %q under %q is %q, which does not give the item back", kind, item, norm, key)
			}
		}
		// The item's keys never name one of the prefix's own keys.
		for _, own := range []string{k.List(), k.Events(), k.Due(), k.Fence(), k.Sweep(), k.Swept()} {
			if own == k.Lock(item) || own == k.State(item) {
				t.Errorf("item %q's key is the prefix's %q", item, own)
			}
		}
	})
}
