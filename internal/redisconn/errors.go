package redisconn

import (
	"crypto/tls"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// ErrUnavailable marks a failure talking to Redis that a retry may mend:
// unreachable, timing out, or answering with a passing error (LOADING).
var ErrUnavailable = errors.New("redis")

// ErrRefused marks a Redis failure that retrying cannot mend: a key of the
// wrong type, a command the server lacks, or credentials, permissions or a
// certificate that it refuses. It takes an operator.
var ErrRefused = errors.New("redis refused")

// Wrap sorts err from a Redis call made for what (a short phrase such as
// "read length of work:list") into ErrRefused or ErrUnavailable, and
// returns nil for nil.
func Wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	// A certificate that does not verify will not verify on the next try
	// either: it takes an operator, as a wrong password does.
	var verify *tls.CertificateVerificationError
	if errors.As(err, &verify) || strings.Contains(msg, "x509: ") {
		return fmt.Errorf("%s: %w: the server's TLS certificate was not accepted (see --tls-ca-cert and --tls-server-name): %s", what, ErrRefused, msg)
	}
	for _, prefix := range []string{"WRONGTYPE", "NOAUTH", "WRONGPASS", "NOPERM", "ERR unknown command", "ERR AUTH"} {
		if strings.HasPrefix(msg, prefix) {
			return fmt.Errorf("%s: %w: %s", what, ErrRefused, msg)
		}
	}
	// What an ACL refuses a script (a command or a key the user may not
	// touch) is NOPERM in other words.
	if strings.Contains(msg, "The user executing the script can't") {
		return fmt.Errorf("%s: %w: %s (the ACL user lacks a command or key that w8y needs: see the ACL rule in docs/recipes.md)", what, ErrRefused, msg)
	}
	// go-redis' words for a reply that is not Redis' protocol: another
	// server (a web server, say) answers at that address.
	if strings.Contains(msg, "redis: invalid reply") || strings.Contains(msg, "redis: can't parse") {
		return fmt.Errorf("%s: %w: the server does not answer as Redis does (is --redis-url's host and port a Redis?): %.80s", what, ErrUnavailable, msg)
	}
	return fmt.Errorf("%s: %w: %w", what, ErrUnavailable, err)
}

// IsReply reports whether err is an answer from Redis (a nil reply, or an
// error such as WRONGTYPE) rather than a failure to reach it.
func IsReply(err error) bool {
	var rerr redis.Error
	return errors.As(err, &rerr)
}

// UnknownCommand reports whether err is Redis' answer to a command it does
// not know, such as LMOVE before Redis 6.2 or a command renamed away.
func UnknownCommand(err error, command string) bool {
	msg := strings.ToLower(err.Error())
	return strings.HasPrefix(msg, "err unknown command") && strings.Contains(msg, command)
}

// SlotMoving reports whether err is Redis Cluster refusing a command that
// names several keys of a slot that is moving between nodes, before they
// have all arrived.
func SlotMoving(err error) bool {
	return strings.HasPrefix(err.Error(), "TRYAGAIN")
}
