package duration

import (
	"strconv"
	"strings"
	"testing"
)

// FuzzParse: whatever a user types, Parse answers without panicking, an
// error quotes what was typed, and a length it takes is written by Format
// in a form that Parse reads back as the same length.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{"5", "0.5", "1e-3", "1500ms", "2h45m", "30d", "-1s", "+3", "inf", "-inf", "nan",
		"1e400", "0.0000000001", "1.5µs", "2μs", "9223372036.854775807", "9223372036854775807ns", "1d1d", "--1", "1e", ".", "s", "1 s", ""} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, value string) {
		d, err := Parse(value)
		if err != nil {
			if !strings.Contains(err.Error(), strconv.Quote(value)) {
				t.Errorf("Parse(%q): error %q does not quote what was typed", value, err)
			}
			return
		}
		back, err := Parse(Format(d))
		if err != nil || back != d {
			t.Errorf("Parse(%q) = %v, written %q, read back as %v, %v", value, d, Format(d), back, err)
		}
	})
}
