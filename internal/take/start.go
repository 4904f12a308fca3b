package take

import (
	"errors"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The checks of a worker's start in its first look (start.lua): a one-shot
// run asks for them in the call that takes its item, instead of a round
// trip each before it (see Taker.Start).

// StartWords are the words of look.lua's options that ask its first look
// for the checks of a start: needs, that the server keeps w8y's keys (no
// replica, no eviction); version, that the list's keys are kept in that
// layout or an earlier one (0: not asked).
func StartWords(needs bool, version int) string {
	var words []string
	if needs {
		words = append(words, "needs=1")
	}
	if version > 0 {
		words = append(words, "schema="+strconv.Itoa(version))
	}
	return strings.Join(words, " ")
}

// StartRefusal is a first look that its checks refused, having taken
// nothing: Needs, because the server may evict w8y's keys or is a replica
// (or hides INFO), which the caller reads for itself to say how; or Found,
// the version key's value, a layout that this w8y does not know.
type StartRefusal struct {
	Needs bool
	Found string
}

func (e *StartRefusal) Error() string {
	if e.Needs {
		return "the server may not keep w8y's keys"
	}
	return "the list's keys are kept in layout " + strconv.Quote(e.Found)
}

// startRefusal is err as a *StartRefusal where start.lua refused the look,
// and nil otherwise.
func startRefusal(err error) *StartRefusal {
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return nil
	}
	msg := rerr.Error()
	switch {
	case strings.HasPrefix(msg, "W8YNEEDS "):
		return &StartRefusal{Needs: true}
	case strings.HasPrefix(msg, "W8YSCHEMA "):
		return &StartRefusal{Found: strings.TrimPrefix(msg, "W8YSCHEMA ")}
	}
	return nil
}
