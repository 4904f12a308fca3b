-- Takes the lock KEYS[1] for our token ARGV[1] and ARGV[2] milliseconds if it
-- is free, as SET NX PX does, in the same single round trip. Returns {1, now}
-- when taken, now being the lock's server's clock at the take in Unix
-- milliseconds (the run's start, as a schedule counts it), 0 when another
-- holder has it, and the key's type (such as "hash")
-- when it holds something that is not a lock at all, which SET NX alone
-- would pass over without a word. Only the one key is touched, so this also
-- runs where lock keys live in other slots than the list (Redis Cluster).
--
-- Under --fleet-max-running (ARGV[3], the cap N), KEYS[2] is the set of
-- places in use and KEYS[3] the cap's record (see place.lua), which must
-- live on the lock's server: the lock is tried only while a place is
-- free, and the take takes one; -1 says that every place was in use.
-- ARGV[3] is 0 without a cap.
--
-- ARGV[4] and ARGV[5], where the item's keys live with the list's: the
-- counts' index of locks (see schema.Keys.Locks) and the item, which the
-- take adds with the lock's expiry.
--
-- Under --fleet-rate (ARGV[6], N/MS, where the keys live with the list's),
-- KEYS[4] is the log of the fleet's starts and KEYS[5] the rate's record
-- (see rate.lua), which KEYS[2] and KEYS[3] come before: the lock is tried
-- only while the rate allows a start, and the take counts its own; -2 says
-- that the rate allowed none.
local cap = tonumber(ARGV[3] or 0)
if cap > 0 then
  local free, err = placeFree(KEYS[2], cap)
  if err then
    return err
  end
  if not free then
    return -1
  end
end
local rateN, ratePer = rateOf({rate = ARGV[6]})
local now
if rateN then
  now = redisNow()
  local full, err = rateFull(KEYS[4], rateN, ratePer, now)
  if err then
    return err
  end
  if full then
    return -2
  end
end
if redis.call("SET", KEYS[1], ARGV[1], "NX", "PX", ARGV[2]) then
  if cap > 0 then
    takePlace(KEYS[2], KEYS[3], KEYS[1], cap)
  end
  if rateN then
    takeRate(KEYS[4], KEYS[5], rateN, ratePer, now)
  end
  if ARGV[4] then
    -- The counts' index of locks (see counts.lua), where the item's keys
    -- live with the list's: not a declared key, and so read with pcall,
    -- as refresh.lua reads the cancel request.
    redis.pcall("ZADD", ARGV[4], redisNow() + tonumber(ARGV[2]), ARGV[5])
  end
  return {1, redisNow()}
end
local kind = redis.call("TYPE", KEYS[1]).ok
if kind ~= "string" then
  return kind
end
return 0
