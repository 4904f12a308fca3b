package redisconn

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/redis/go-redis/v9"
)

// ErrUnavailable marks a failure talking to Redis that a retry may mend:
// unreachable, timing out, or answering with a passing error (LOADING,
// READONLY during a failover, BUSY, ...).
var ErrUnavailable = errors.New("redis")

// ErrRefused marks a Redis failure that retrying cannot mend: a key of the
// wrong type, a command the server lacks, or credentials, permissions or a
// certificate that it refuses. It takes an operator.
var ErrRefused = errors.New("redis refused")

// Refusal is an ErrRefused told in w8y's own words rather than in Redis'
// reply, which names no key: a list key of another type, say (see
// schema.Keys.NotAList).
type Refusal string

func (e Refusal) Error() string        { return string(e) }
func (e Refusal) Is(target error) bool { return target == ErrRefused }

// Code is the error code that starts an error reply from Redis or Valkey,
// such as "WRONGTYPE", "NOPERM" or "ERR", or "" for an error that is not a
// reply (a connection refused, a timeout). Both servers start every error
// reply with an upper-case code; "ERR" is the generic one, told apart only
// by its text.
func Code(err error) string {
	var rerr redis.Error
	if err == nil || !errors.As(err, &rerr) {
		return ""
	}
	code, _, _ := strings.Cut(rerr.Error(), " ")
	for _, r := range code {
		if (r < 'A' || r > 'Z') && r != '_' {
			return ""
		}
	}
	return code
}

// replyText is the text of err's reply after its code.
func replyText(err error) string {
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return ""
	}
	_, text, _ := strings.Cut(rerr.Error(), " ")
	return text
}

// refusedCodes are the codes that retrying cannot mend, each with what an
// operator should look at ("" when the reply says it well enough).
var refusedCodes = map[string]string{
	"WRONGTYPE": "",
	"NOAUTH":    "",
	"WRONGPASS": "",
	"NOPERM":    aclHint,
	// Keys of one command in different slots: a Cluster (or a cluster-mode
	// managed service) needs the prefix to be one hash tag.
	"CROSSSLOT": "on a Redis Cluster or a cluster-mode managed Redis, the key prefix must be one hash tag, such as '{work}:' (see docs/recipes.md)",
}

// aclHint is what an ACL refusal adds to the reply.
const aclHint = "the ACL user lacks a command or key that w8y needs: see the ACL rule in docs/recipes.md"

// scriptACLRefusals are how the servers word an ACL refusal of a command
// that a script calls, under the generic code ERR: Redis 6 and 7 ("The user
// executing the script can't run this command or subcommand"), Valkey 8
// ("ACL failure in script: User worker has no permissions to run the
// 'zrangebyscore' command"). Redis 7.2 says NOPERM.
var scriptACLRefusals = []string{"The user executing the script can't", "ACL failure in script"}

// Wrap sorts err from a Redis call made for what (a short phrase such as
// "read length of work:list") into ErrRefused or ErrUnavailable, and
// returns nil for nil. A reply is sorted by its code; every code that
// Wrap does not name as refused (LOADING, BUSY, READONLY, MASTERDOWN,
// TRYAGAIN, CLUSTERDOWN, NOREPLICAS, NOSCRIPT, OOM, ...) is a passing state
// of the server, or of a failover, that a retry may outlast.
func Wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	err = Plain(err)
	msg := err.Error()
	// The database that --redis-url names (its /N, or ?db=N), which go-redis
	// selects on each new connection: a server that has fewer refuses it
	// on every try, so that a worker would retry it for ever.
	if strings.Contains(msg, "DB index is out of range") {
		return fmt.Errorf("%s: %w: this server has no database of the number that --redis-url names (its /N or ?db=N): its databases are numbered from 0 to its databases setting less one (16 by default)", what, ErrRefused)
	}
	// --redis-cluster against a server that is not one: every command is
	// refused the same way (CLUSTER SLOTS, which the client asks first).
	if strings.Contains(msg, "cluster support disabled") {
		return fmt.Errorf("%s: %w: --redis-cluster is given, but this server is not a Redis Cluster (its cluster-enabled is no): leave out --redis-cluster (W8Y_REDIS_CLUSTER)", what, ErrRefused)
	}
	switch code := Code(err); {
	case code == "":
	case code == "ERR":
		text := replyText(err)
		for _, words := range scriptACLRefusals {
			if strings.Contains(text, words) {
				return fmt.Errorf("%s: %w: %s (%s)", what, ErrRefused, msg, aclHint)
			}
		}
		// A command the server lacks (LMOVE before Redis 6.2, or one
		// renamed away), or AUTH with a password the server does not
		// expect.
		if strings.HasPrefix(text, "unknown command") || strings.HasPrefix(text, "AUTH") {
			return fmt.Errorf("%s: %w: %s", what, ErrRefused, msg)
		}
		return fmt.Errorf("%s: %w: %w", what, ErrUnavailable, err)
	default:
		if hint, refused := refusedCodes[code]; refused {
			if hint != "" {
				return fmt.Errorf("%s: %w: %s (%s)", what, ErrRefused, msg, hint)
			}
			return fmt.Errorf("%s: %w: %s", what, ErrRefused, msg)
		}
		return fmt.Errorf("%s: %w: %w", what, ErrUnavailable, err)
	}
	// A certificate that does not verify will not verify on the next try
	// either: it takes an operator, as a wrong password does.
	var verify *tls.CertificateVerificationError
	if errors.As(err, &verify) || strings.Contains(msg, "x509: ") {
		return fmt.Errorf("%s: %w: the server's TLS certificate was not accepted (see --tls-ca-cert and --tls-server-name): %s", what, ErrRefused, msg)
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
	text := strings.ToLower(replyText(err))
	return Code(err) == "ERR" && strings.HasPrefix(text, "unknown command") && strings.Contains(text, command)
}

// SlotMoving reports whether err is Redis Cluster refusing a command that
// names several keys of a slot that is moving between nodes, before they
// have all arrived.
func SlotMoving(err error) bool {
	return Code(err) == "TRYAGAIN"
}

// NoScript reports whether err is the server's cue that it does not have a
// script by its hash (EVALSHA), which is then sent whole.
func NoScript(err error) bool {
	return Code(err) == "NOSCRIPT"
}

// NotApplied reports whether err says that the command was not applied,
// so that one that must not be applied twice (a run's finish) may be sent
// again: a failure to connect to Redis at all, or a reply by which the
// server refused it before running it, in a state that passes.
func NotApplied(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial" || unappliedCodes[Code(err)]
}

// unappliedCodes are the replies that refuse a command without running it,
// in a state that a restart or failover passes through: a primary demoted
// to a replica (READONLY) or one that has too few replicas to take writes
// (NOREPLICAS), a full server (OOM), a server loading its data (LOADING), a replica cut off
// from its primary (MASTERDOWN), one busy with a script (BUSY), a Cluster
// without a quorum or a slot on the move (CLUSTERDOWN, TRYAGAIN). A script
// whose first write is refused (READONLY, NOREPLICAS) ends there, having
// written nothing: every write is refused alike.
var unappliedCodes = map[string]bool{
	"READONLY": true, "NOREPLICAS": true, "LOADING": true, "MASTERDOWN": true,
	"BUSY": true, "CLUSTERDOWN": true, "TRYAGAIN": true,
	// A full server refuses a script's first write, and a script may
	// write nothing before its first (Redis lets one that has written go
	// on): a refused take or finish wrote nothing.
	"OOM": true,
}
