package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/w8y/w8y/internal/childcmd"
	"github.com/w8y/w8y/internal/clip"
	"github.com/w8y/w8y/internal/duration"
	"github.com/w8y/w8y/internal/finish"
	"github.com/w8y/w8y/internal/keepoutput"
	"github.com/w8y/w8y/internal/schema"
	"github.com/w8y/w8y/internal/status"
)

// How w8y checks its options once they are parsed (see options.go): each
// failed check is one line in the user's words (usageError), before
// anything connects.

// validate checks the options that go-flags cannot check by itself, one
// concern at a time. It normalises KeyPrefix as a side effect.
func (o *Options) validate() error {
	if err := o.validateRecord(); err != nil {
		return err
	}
	if o.Status {
		return o.validateStatus()
	}
	for _, check := range []func() error{o.validateCommand, o.validateItemInScript, o.validateStop, o.validateOneItem, o.validateLock, o.validateSchedule, o.validateContinuous, o.validateRedis} {
		if err := check(); err != nil {
			return err
		}
	}
	o.KeyPrefix = schema.NormalizePrefix(o.KeyPrefix)
	return nil
}

// validateStatus checks the options of --status, which takes no executable.
func (o *Options) validateStatus() error {
	if len(o.Command) > 0 {
		return usageError("--status takes no executable, got %q", o.Command[0])
	}
	if o.Watch < 0 || (o.Watch > 0 && time.Duration(o.Watch) < minWatch) {
		return usageError("--watch must be at least %s, got %s", minWatch, o.Watch)
	}
	filter, err := status.ParseFilter(o.State, o.Match, o.Limit)
	if err != nil {
		return usageError("%s", err)
	}
	o.filter = filter
	if err := o.Options.Validate(); err != nil {
		return usageError("%s", err)
	}
	o.KeyPrefix = schema.NormalizePrefix(o.KeyPrefix)
	return nil
}

// validateCommand checks the executable and the options of its child.
func (o *Options) validateCommand() error {
	if o.JSON || o.Watch != 0 || o.State != "" || o.Match != "" || o.Limit != "" {
		return usageError("--json, --watch, --state, --match and --limit go with --status")
	}
	if len(o.Command) == 0 {
		return usageError("missing executable (usage: w8y [OPTIONS] [--] executable [args...])")
	}
	if o.Command[0] == "" {
		return usageError("the executable name is empty")
	}
	if o.Timeout < 0 {
		return usageError("--timeout must not be negative, got %s", o.Timeout)
	}
	if k := o.KeepOutput; k != nil && (*k < 0 || *k > keepoutput.Max) {
		return usageError("--keep-output must be from 0 to %d bytes (1 MiB), got %d", keepoutput.Max, *k)
	}
	if o.EnvVar != "" && (strings.ContainsAny(o.EnvVar, "=\x00") || o.EnvVar != strings.TrimSpace(o.EnvVar)) {
		return usageError("--env-var %q is not a valid environment variable name", o.EnvVar)
	}
	return nil
}

// validateItemInScript refuses a command that pastes the item into a
// shell's script (sh -c 'echo {}'), unless --unsafe-item-in-script: an item
// is data that anyone who may write the list wrote, and must not run as
// code on the worker's host. The line shows the safe form.
func (o *Options) validateItemInScript() error {
	found := childcmd.ItemInScript(o.Command)
	if found == nil || o.UnsafeItemInScript {
		return nil
	}
	return usageError("{} is inside the script of %s -c %s, where an item runs as shell code: pass it as an argument, as in %s -c '... \"$1\" ...' %s {}, or use \"$W8Y_ITEM\" in the script (--unsafe-item-in-script allows it)",
		found.Shell, quoteArg(found.Script), found.Shell, found.Shell)
}

// quoteArg is arg as a shell would need it quoted: between single quotes,
// clipped.
func quoteArg(arg string) string {
	return "'" + strings.ReplaceAll(clip.Item(arg), "'", `'\''`) + "'"
}

// validateLock checks the lock's expiry and the --kill-after that must fit
// in it, and sets --kill-after's default, which depends on the expiry.
func (o *Options) validateLock() error {
	if time.Duration(o.KeyExpiry) < minKeyExpiry {
		return usageError("--key-expiry must be at least %s, got %s", minKeyExpiry, o.KeyExpiry)
	}
	// A child whose lock is being lost gets SIGTERM, then SIGKILL after
	// --kill-after, and must be gone before the server could expire the lock
	// and let another host take the item. Refreshes every third of the
	// expiry leave about two thirds to notice the loss and stop the child;
	// a third keeps room for the refresh retries and the margin.
	maxKillAfter := duration.Flag(time.Duration(o.KeyExpiry) / 3)
	switch {
	case !o.KillAfter.Given:
		o.KillAfter.Flag = min(duration.Flag(defaultKillAfter), maxKillAfter)
	case o.KillAfter.Flag < 0:
		return usageError("--kill-after must not be negative, got %s", o.KillAfter)
	case o.KillAfter.Flag > maxKillAfter:
		fix := "lower --kill-after"
		// An expiry three times as long exists only for a --kill-after
		// that can be counted three times over.
		if time.Duration(o.KillAfter.Flag) <= duration.Forever/3 {
			fix += fmt.Sprintf(" or raise --key-expiry to %s or more", 3*time.Duration(o.KillAfter.Flag))
		}
		return usageError("--kill-after %s cannot fit in --key-expiry %s: a child whose lock is lost must be killed before the lock expires, so --kill-after may be at most a third of --key-expiry (%s); %s",
			o.KillAfter, o.KeyExpiry, maxKillAfter, fix)
	}
	return nil
}

// validateCron reads --schedule, --schedule-timezone and --jitter into
// o.cron.
func (o *Options) validateCron() error {
	if o.Schedule == "" {
		if o.Jitter != 0 {
			return usageError("--jitter goes with --schedule")
		}
		return nil
	}
	if o.Cooldown != 0 {
		return usageError("--schedule and --cooldown are alternatives: give one")
	}
	c, err := finish.ParseCron(o.Schedule, o.ScheduleTimezone, time.Duration(o.Jitter))
	if err != nil {
		return usageError("%s", err)
	}
	o.cron = c
	return nil
}

// validateSchedule checks --cooldown, --schedule (with its zone and jitter)
// and --failure-backoff.
func (o *Options) validateSchedule() error {
	if err := o.validateCron(); err != nil {
		return err
	}
	if o.Cooldown < 0 {
		return usageError("--cooldown must not be negative, got %s", o.Cooldown)
	}
	if o.Cooldown > 0 && time.Duration(o.Cooldown) < time.Millisecond {
		return usageError("--cooldown must be 0 or at least 1ms, got %s: Redis keeps expiries in milliseconds", o.Cooldown)
	}
	if b := o.FailureBackoff; b != (finish.Backoff{}) {
		if b.Min < minBackoff {
			return usageError("--failure-backoff MIN must be at least %s, got %s", minBackoff, duration.Format(b.Min))
		}
		if b.Max < b.Min {
			return usageError("--failure-backoff MAX %s is less than MIN %s", duration.Format(b.Max), duration.Format(b.Min))
		}
		// The count that doubles the delay lives in the state hash: were it
		// to expire while the item waits, the next failure would start over
		// at MIN.
		if b.Max > time.Duration(o.StateTTL) {
			return usageError("--failure-backoff MAX %s is longer than --state-ttl %s, which would forget the consecutive failures that the delay doubles with", duration.Format(b.Max), o.StateTTL)
		}
	}
	return nil
}

// validateContinuous checks the options that bound a run: --parallel,
// --idle-wait and the limits of a --continuous worker.
func (o *Options) validateContinuous() error {
	if o.Parallel < 1 {
		return usageError("--parallel must be at least 1, got %d", o.Parallel)
	}
	if o.MaxItems < 0 {
		return usageError("--max-items must not be negative, got %d", o.MaxItems)
	}
	if o.MaxRuntime < 0 {
		return usageError("--max-runtime must not be negative, got %s", o.MaxRuntime)
	}
	if !o.Continuous && (o.MaxItems > 0 || o.MaxRuntime > 0 || o.UntilIdle) {
		return usageError("--max-items, --max-runtime and --until-idle bound a --continuous worker; a one-shot run takes at most --parallel items")
	}
	if o.NoWorkExitCode < 0 || o.NoWorkExitCode > 255 {
		return usageError("--no-work-exit-code must be 0-255, got %d", o.NoWorkExitCode)
	}
	if time.Duration(o.IdleWait) < minIdleWait {
		return usageError("--idle-wait must be at least %s, got %s", minIdleWait, o.IdleWait)
	}
	return nil
}

// validateRedis checks the connection options and --replica-acks.
func (o *Options) validateRedis() error {
	if err := o.Options.Validate(); err != nil {
		return usageError("%s", err)
	}
	if o.ReplicaAcks < 0 {
		return usageError("--replica-acks must not be negative, got %d", o.ReplicaAcks)
	}
	// WAIT counts the replicas of the writes made on its own connection,
	// and a Cluster client cannot send it on the connection that took a
	// lock: it would count nothing, and promise what it cannot keep.
	if o.ReplicaAcks > 0 && o.Cluster {
		return usageError("--replica-acks does not work with --redis-cluster")
	}
	return nil
}

// validateRecord checks the options of the state hash and events stream.
func (o *Options) validateRecord() error {
	if time.Duration(o.StateTTL) < minStateTTL {
		return usageError("--state-ttl must be at least %s, got %s", minStateTTL, o.StateTTL)
	}
	if o.EventsMaxLen < 1 {
		return usageError("--events-max-len must be at least 1, got %d (--no-events turns events off)", o.EventsMaxLen)
	}
	return nil
}

// minStateTTL is the shortest --state-ttl accepted: a state hash that
// expires sooner would vanish between an item's start and its end.
const minStateTTL = time.Minute

// minWatch is the shortest --watch interval: each refresh reads every item,
// and a status screen needs no more than a few a second.
const minWatch = 100 * time.Millisecond
