-- The starts of --fleet-rate in its window, for status: how many of the
-- fleet's starts in the log KEYS[1] (see internal/take's rate.lua: Unix
-- milliseconds on Redis' clock, newest first) came in the last ARGV[2]
-- milliseconds, and how long until the rate, ARGV[1] starts per window,
-- allows the next. It reads Redis' clock itself (clock.Lua's redisNow),
-- as the takes do, and writes nothing.
--
-- KEYS[1] the log of the fleet's starts
-- ARGV[1] N, ARGV[2] the window in milliseconds
--
-- Returns {started, next}: the starts in the window, and the milliseconds
-- until a take may start an item (0: now).
local n, per = tonumber(ARGV[1]), tonumber(ARGV[2])
local now = redisNow()
local length = redis.call("LLEN", KEYS[1])
-- The starts in the window are the log's first ones: a binary search for
-- the first start outside it, a few LINDEX however long the log.
local function inside(i)
  local at = tonumber(redis.call("LINDEX", KEYS[1], i))
  return at ~= nil and now - at <= per
end
local lo, hi = 0, length
while lo < hi do
  local mid = math.floor((lo + hi) / 2)
  if inside(mid) then
    lo = mid + 1
  else
    hi = mid
  end
end
local nextIn = 0
if inside(n - 1) then
  nextIn = tonumber(redis.call("LINDEX", KEYS[1], n - 1)) + per + 1 - now
end
return {lo, nextIn}
