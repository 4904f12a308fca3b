-- The probe: what an idle worker sends instead of a look while its last
-- look found nothing (see probe.go). It writes nothing, and reports whether
-- a look could find anything: only when the list's length is not the
-- fleet's "seen" mark (items were appended, or removed), items at the head
-- are untried, an entry of the due index has passed, or the sweep key is
-- gone (a step of the fleet's sweep is due). Otherwise look.lua would try
-- no candidate and write nothing. It also says when that could change
-- without a write that wakes the worker (see schema.Keys.Wake): the due
-- index's first score; and when the fleet's sweep comes due (the sweep
-- key's expiry), which no wait ends for: its step is no item's pickup, and
-- waits for the worker's fallback (see probe.go).
--
-- KEYS[1] the list
-- ARGV[1] the key prefix (the marks, the due index, the sweep key and the
--         places are under it, on the list's server)
-- ARGV[2] --fleet-max-running, or 0 for no cap: with a cap, a look that
--         could find something finds nothing while every place is in use
--         (place.lua counts them so: a place is in use while its lock
--         lives)
-- ARGV[3] --fleet-rate's N, or 0 for none, and ARGV[4] its D in
--         milliseconds: a look starts nothing while the N-th newest start
--         of the fleet's log (<prefix>starts) is D old or less (rate.lua)
--
-- Returns {worth, full, next, now, sweep}: worth 1 or 0; full 1 when worth
-- is 0 because every place is in use, 2 because the rate allows no start;
-- next the Unix millisecond on Redis' clock at which the due index's first
-- entry passes, or -1 if none; now Redis' clock, in the same unit; sweep
-- the moment the sweep's next step is due, or -1 if the probe did not read
-- it.
local list, prefix, cap = KEYS[1], ARGV[1], tonumber(ARGV[2])
local rateStarts, ratePer = tonumber(ARGV[3] or 0), tonumber(ARGV[4] or 0)
local now = redisNow()

-- A key of another type is the look's to report, in its own words.
local n = redis.pcall("LLEN", list)
local seen = redis.pcall("GET", prefix .. "seen")
local untried = redis.pcall("GET", prefix .. "untried")
if type(n) ~= "number" or type(seen) == "table" or type(untried) == "table" then
  return {1, 0, -1, now, -1}
end

local nextAt, sweepAt = -1, -1

local worth
if n == 0 then
  -- An empty or missing list: nothing to take, which the look would find
  -- too; the look is what forgets the marks of an emptied list.
  worth = seen ~= false or untried ~= false
elseif seen ~= tostring(n) or untried ~= "0" then
  worth = true
else
  local first = redis.pcall("ZRANGE", prefix .. "due", 0, 0, "WITHSCORES")
  if type(first) == "table" and first[2] then
    nextAt = tonumber(first[2])
  end
  local sweep = redis.call("PTTL", prefix .. "sweep")
  if sweep == -2 then
    worth = true
  elseif sweep > 0 then
    sweepAt = now + sweep
  end
  worth = worth or (nextAt >= 0 and nextAt <= now)
end

if worth and rateStarts > 0 then
  local at = redis.pcall("LINDEX", prefix .. "starts", rateStarts - 1)
  at = type(at) == "string" and tonumber(at)
  if at and now - at <= ratePer then
    -- The rate's window passes by itself: the wait ends then.
    return {0, 2, at + ratePer + 1, now, -1}
  end
end

if worth and cap > 0 then
  local running = prefix .. "running"
  local members = redis.pcall("SMEMBERS", running)
  if type(members) == "table" and not members.err and #members >= cap then
    local live = 0
    for _, lock in ipairs(members) do
      live = live + redis.call("EXISTS", lock)
    end
    if live >= cap then
      -- A place frees when its run's finish wakes the worker, or when a
      -- dead worker's lock expires, which the fallback's look finds.
      return {0, 1, -1, now, -1}
    end
  end
end
return {worth and 1 or 0, 0, nextAt, now, sweepAt}
