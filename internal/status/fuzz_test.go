package status

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// FuzzDecode: what Redis hands back for an item (the item itself, any
// bytes, and its state hash's fields, any strings or missing, with or
// without a cooldown) decodes without panicking into a known state, and
// shows as one row of the table and one JSON object that reads back as the
// same item.
func FuzzDecode(f *testing.F) {
	f.Add("report-42", "1700000000000", "1700000001000", "0", "1000", "w1:123:abcd", "success", "3", "1", "0", "1700086400000", true, false, true)
	f.Add("", "x", "", "-1", "9223372036854775808", "", "", "", "", "", "-9223372036854775808", false, true, false)
	f.Add("a\nb\x00\xff", "1", "2", "3", "4", "h\n", "failure\x1b[31m", "-5", "nan", "1e3", "9223372036854775807", true, true, true)
	f.Fuzz(func(t *testing.T, item, start, end, code, took, holder, result, runs, failures, streak, slot string, missing, wrongType, cooling bool) {
		values := []any{start, end, code, took, holder, result, runs, failures, streak, slot}
		if missing {
			// HMGET answers nil for a field the hash lacks.
			values[1], values[4] = nil, nil
		}
		st := Item{Item: item}
		if cooling {
			st.Cooldown = ptr(int64(86_400_000))
		}
		st.setState(values, time.Now().UnixMilli())
		var holderErr error
		if wrongType {
			holderErr = reply("WRONGTYPE Operation against a key holding the wrong kind of value")
		}
		st.classify(holderErr)
		switch st.State {
		case StateLocked, StatePaused, StateBackoff, StateCooldown, StateIdle, StateBlocked, StateInvalid:
		default:
			t.Fatalf("item %q: unknown state %q", item, st.State)
		}
		if (item == "" || strings.IndexByte(item, 0) >= 0) != (st.State == StateInvalid) {
			t.Errorf("item %q: state %q", item, st.State)
		}

		var table bytes.Buffer
		writeTable(&table, []Item{st}, time.UnixMilli(1700000002000), 80)
		lines := strings.Split(strings.TrimSuffix(table.String(), "\n"), "\n")
		// The heading, the row, and for a blocked or invalid item its
		// note: an item's bytes never add a line.
		want := 2
		if st.Problem != nil {
			want = 3
		}
		if len(lines) != want {
			t.Errorf("item %q: the table has %d lines, want %d:\n%s", item, len(lines), want, table.String())
		}

		var out bytes.Buffer
		if err := writeJSON(&out, turn{Items: []Item{st}}); err != nil {
			t.Fatalf("item %q: %v", item, err)
		}
		var back struct{ Items []Item }
		if err := json.Unmarshal(out.Bytes(), &back); err != nil || len(back.Items) != 1 {
			t.Fatalf("item %q: the JSON does not read back (%v):\n%s", item, err, out.String())
		}
		if utf8.ValidString(item) && back.Items[0].Item != item {
			t.Errorf("item %q reads back from JSON as %q", item, back.Items[0].Item)
		}
	})
}

// reply is an error reply as go-redis hands it over.
type reply string

func (r reply) Error() string { return string(r) }
func (reply) RedisError()     {}
