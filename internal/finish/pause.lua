-- Keeps an item from running for ARGV[2] milliseconds with the key KEYS[1]
-- (its cooldown or backoff key) holding our token ARGV[1], unless that key
-- already keeps it longer: an operator's pause with a longer or no expiry,
-- or a key of another type, which w8y does not own. Only one key is
-- touched, for where an item's keys live on different servers (Redis
-- Cluster); finish.lua does the same in its pause function.
--
-- ARGV[3], when given, is the moment the pause ends, Unix milliseconds on
-- Redis' clock (a --schedule slot), which then decides its length where
-- it agrees with ARGV[2] within a second: the host's ARGV[2] rests on its
-- estimate of Redis' time.
local ms = tonumber(ARGV[2])
if ARGV[3] then
  local untilSlot = tonumber(ARGV[3]) - redisNow()
  -- As finish.lua: a second or more apart, the host had no estimate yet.
  if math.abs(untilSlot - ms) < 1000 then
    ms = untilSlot
  end
  if ms <= 0 then
    return 0
  end
end
local left = redis.call("PTTL", KEYS[1])
if left == -2 or (left >= 0 and left < ms and redis.call("TYPE", KEYS[1]).ok == "string") then
  redis.call("SET", KEYS[1], ARGV[1], "PX", ms)
  return 1
end
return 0
