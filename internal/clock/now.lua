-- redisNow is Redis' clock in Unix milliseconds, the fleet's one clock
-- (docs/how-it-works.md, "One clock: Redis'"): a host whose clock is wrong
-- changes nothing in a script that reads it. A Redis older than 5
-- replicates a script by its body, whose TIME a replica would read again: a
-- script that reads it replicates its effects instead. It reads TIME once
-- a call: a script runs whole, at one moment, and a call that does two
-- scripts' work (next.lua's finish and take) reads one time for both.
local redisNowRead
local function redisNow()
  if redisNowRead then
    return redisNowRead
  end
  if redis.replicate_commands then redis.replicate_commands() end
  local t = redis.call("TIME")
  redisNowRead = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  return redisNowRead
end
