-- The rate of --fleet-rate: batch.lua, look.lua and each.lua start with
-- this file (after place.lua; the Go that loads them puts it before each),
-- so that a take under a rate of N starts per MS milliseconds checks the
-- fleet's latest starts and counts its own in the same call as it takes
-- the lock.
--
-- The starts are a sliding log (ARGV[1] .. "starts", see schema.Keys.Starts):
-- a list of the Unix milliseconds of the fleet's latest starts under a
-- rate, on Redis' clock (TIME), newest first. A take may start an item
-- only while the N-th newest is more than MS ago (now - at > MS), and
-- pushes its own start: no window of MS milliseconds, closed at both ends,
-- ever holds more than N starts. The log keeps N entries, or as many as it
-- held, where another worker's rate had a larger N (so that its check
-- still sees its own N newest), and expires a second after the longest
-- window that a take pushed into it: a quiet fleet leaves nothing behind.

-- rateOf reads a take's rate from its options (rate=N/MS): N and MS, or
-- nil without one.
local function rateOf(opt)
  local n, per = string.match(opt.rate or "", "^(%d+)/(%d+)$")
  if not n then
    return nil
  end
  return tonumber(n), tonumber(per)
end

-- rateFull reports whether the log starts says that N starts came in the
-- last MS milliseconds before now: a take under the rate may start nothing.
-- When starts holds a key of another type, it returns nil and Redis' error,
-- for the script to return, so that a rate that cannot be counted fails the
-- take rather than being ignored. An entry that is not a number counts as
-- long ago.
local function rateFull(starts, n, per, now)
  local at = redis.pcall("LINDEX", starts, n - 1)
  if type(at) == "table" then
    return nil, at
  end
  at = tonumber(at)
  return at ~= nil and now - at <= per
end

-- takeRate records, once a lock is taken under a rate of n per per, the
-- start at now in the log starts, and the rate that w8yctl status shows
-- (record: "N/MS"). A take without a rate (n nil) deletes record: the
-- fleet no longer enforces one. The log itself is left to the workers that
-- still count it, and to its expiry.
local function takeRate(starts, record, n, per, now)
  if not n then
    redis.pcall("DEL", record)
    return
  end
  local length = redis.call("LPUSH", starts, now)
  if length > n then
    redis.call("LTRIM", starts, 0, math.max(n, length - 1) - 1)
  end
  if redis.call("PTTL", starts) < per + 1000 then
    redis.call("PEXPIRE", starts, per + 1000)
  end
  redis.pcall("SET", record, n .. "/" .. per)
end

-- ratesFull is rateFull for batch.lua and look.lua, whose log is under
-- keyPrefix: the rate's N and MS (nil without a rate), and whether the
-- rate is full, or Redis' error.
local function ratesFull(keyPrefix, opt, now)
  local n, per = rateOf(opt)
  if not n then
    return nil, nil, false
  end
  local full, err = rateFull(keyPrefix .. "starts", n, per, now)
  return n, per, full, err
end
