-- redisNow is Redis' clock in Unix milliseconds, the fleet's one clock
-- (docs/how-it-works.md, "One clock: Redis'"): a host whose clock is wrong
-- changes nothing in a script that reads it. A Redis older than 5
-- replicates a script by its body, whose TIME a replica would read again: a
-- script that reads it replicates its effects instead.
local function redisNow()
  if redis.replicate_commands then redis.replicate_commands() end
  local t = redis.call("TIME")
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
