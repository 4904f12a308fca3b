package redisconn

import (
	"regexp"
	"strings"
	"sync"
)

// scriptWhere is what Redis and Valkey add to an error raised inside a
// script: the script's hash and its Lua line, which tell a user nothing
// they can act on (" script: 4bee2263…, on @user_script:190."). It is
// compiled on first use, by such an error.
var scriptWhere = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`\s*script: [0-9a-f]+, on @user_script:\d+\.?`)
})

// plainWords are the replies that a user can act on, each in w8y's words
// with the fix. A script's hash and Lua line never reach a user.
var plainWords = map[string]string{
	"OOM":      "Redis is full (its used memory is above maxmemory) and refuses new writes: nothing was taken or changed; free memory or raise maxmemory (runs under way go on and are recorded)",
	"READONLY": "the server is a read-only replica, which refuses every write: give the primary's address in --redis-url, or Sentinel (--sentinel-master)",
	"LOADING":  "Redis is loading its data from disk after a restart and answers no command until it has",
	"BUSY":     "Redis is busy running another client's script and answers no command until it ends (or SCRIPT KILL ends it)",
}

// plainError is a reply told in w8y's words; errors.As still finds the
// reply beneath it, so that its code sorts it.
type plainError struct {
	msg string
	err error
}

func (e *plainError) Error() string { return e.msg }
func (e *plainError) Unwrap() error { return e.err }

// Plain is err told in words a user can act on: the replies of
// plainWords in w8y's words, and any other reply without the hash and
// Lua line of the script that raised it. Other errors are returned as
// they are.
func Plain(err error) error {
	if err == nil || !IsReply(err) {
		return err
	}
	if words, ok := plainWords[Code(err)]; ok {
		return &plainError{msg: words, err: err}
	}
	if msg := err.Error(); scriptWhere().MatchString(msg) {
		return &plainError{msg: strings.TrimSpace(scriptWhere().ReplaceAllString(msg, "")), err: err}
	}
	return err
}
