package duration

import (
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"5", 5 * time.Second, true},
		{"0.5", 500 * time.Millisecond, true},
		{"0", 0, true},
		{"1500ms", 1500 * time.Millisecond, true},
		{"2h45m", 2*time.Hour + 45*time.Minute, true},
		{"-3", -3 * time.Second, true},
		{"", 0, false},
		{"abc", 0, false},
		{"5 s", 0, false},
	}
	for _, tt := range tests {
		got, err := Parse(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("Parse(%q) = %s, %v; want %s, ok %v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func TestFlag(t *testing.T) {
	var d Flag
	if err := d.UnmarshalFlag("1.5"); err != nil || time.Duration(d) != 1500*time.Millisecond {
		t.Errorf("UnmarshalFlag(1.5) = %s, %v", time.Duration(d), err)
	}
	if s, _ := d.MarshalFlag(); s != "1.5s" {
		t.Errorf("MarshalFlag = %q", s)
	}
	if err := d.UnmarshalFlag("soon"); err == nil {
		t.Error("UnmarshalFlag(soon) succeeded")
	}
}
