-- A worker's beat in the registry of live workers, in one call where its
-- keys live on one server (see Presence.announce, which sends the same
-- writes as a pipeline elsewhere): the entry and its expiry, its member in
-- the registry and, while it looks for work, in the lookers, the dead
-- workers' members dropped, and the counts that the worker spaces its
-- looks and beats by.
--
-- KEYS[1] the worker's entry (schema.Keys.Worker), KEYS[2] the registry
--         (schema.Keys.Workers), KEYS[3] the lookers (schema.Keys.Looking)
-- ARGV[1] the worker's holder token
-- ARGV[2] the entry's time to live, in milliseconds
-- ARGV[3] 1 if the worker looks for work now, else 0
-- ARGV[4...] the entry's fields and their values
--
-- Returns {lookers, live, now}: the live lookers and workers, and Redis'
-- clock in Unix milliseconds, which the worker measures its clock's skew
-- by.
local now = redisNow()
local holder, ttl = ARGV[1], tonumber(ARGV[2])
local expires, dead = now + ttl, "(" .. now
local fields = {}
for i = 4, #ARGV do
  fields[#fields + 1] = ARGV[i]
end
redis.call("HSET", KEYS[1], unpack(fields))
redis.call("PEXPIRE", KEYS[1], ttl)
redis.call("ZADD", KEYS[2], expires, holder)
redis.call("ZREMRANGEBYSCORE", KEYS[2], "-inf", dead)
if ARGV[3] == "1" then
  redis.call("ZADD", KEYS[3], expires, holder)
else
  redis.call("ZREM", KEYS[3], holder)
end
redis.call("ZREMRANGEBYSCORE", KEYS[3], "-inf", dead)
return {redis.call("ZCOUNT", KEYS[3], dead, "+inf"), redis.call("ZCOUNT", KEYS[2], dead, "+inf"), now}
