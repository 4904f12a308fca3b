-- Asks the worker that holds an item's lock to stop its child: writes the
-- cancel request, aimed at the token that the lock holds now, read in the
-- same call, so that the request can never reach a later run of the item.
--
-- KEYS[1] the item's lock
-- KEYS[2] its cancel request (see schema.Keys.Cancel)
-- ARGV[1] the reason, ARGV[2] who asks, ARGV[3] when (Unix milliseconds),
-- ARGV[4] "1" to count the cancelled run as a failure, else "0"
--
-- Returns {token, ttl}: the lock's token and how many milliseconds are left
-- of it, or false when no run holds the lock (no key, one of another type,
-- or one without an expiry, which no running w8y leaves: it was set by
-- hand), and then changes nothing.
--
-- The request expires when the lock would expire unrefreshed. The holder
-- refreshes before that, in a call that reads the request, so it cannot
-- miss it; and a request that outlived its lock (its holder died, or could
-- not finish) would hit the next run of the same worker, whose token is
-- the same. finish.lua deletes it with the lock.
local token = redis.pcall("GET", KEYS[1])
if type(token) ~= "string" then
  return false
end
local left = redis.call("PTTL", KEYS[1])
if left <= 1 then
  return false
end
redis.call("DEL", KEYS[2])
redis.call("HSET", KEYS[2], "holder", token, "reason", ARGV[1], "by", ARGV[2], "at", ARGV[3], "as_failure", ARGV[4])
-- A millisecond less: PTTL rounds the lock's expiry to one, and the
-- request must not outlive the lock by it. A holder whose refresh comes
-- so late has lost the lock anyway.
redis.call("PEXPIRE", KEYS[2], left - 1)
return {token, left}
