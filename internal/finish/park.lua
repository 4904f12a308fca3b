-- Gives back the lock of a take whose item waits for its first slot (a new
-- item under a schedule, see internal/take's settings.lua): no child ran,
-- and none is recorded; the item is kept from running until the slot, as
-- a success under --schedule keeps it, by its cooldown key, and the slot
-- goes into its state hash as next_slot, which status shows and which
-- makes the item's next take run it. All the keys must live on one
-- server; elsewhere, park.go sends pause.lua, the state's commands and
-- the release (finish.lua with the lock alone) instead.
--
-- KEYS[1] the item's lock, KEYS[2] its cooldown key, KEYS[3] its state
--         hash, KEYS[4] the due index, KEYS[5] the places in use under
--         --fleet-max-running, KEYS[6] the counts' index of locks (see
--         schema.Keys.Locks), whose entry goes with the lock
-- ARGV[1] our token, ARGV[2] the item
-- ARGV[3] how long until the slot, in milliseconds, as the host counts
-- ARGV[4] the slot, Unix milliseconds on Redis' clock, which decides the
--         cooldown's length where it agrees with ARGV[3] within a second
--         (as pause.lua)
-- ARGV[5] the state hash's expiry, in milliseconds
--
-- Returns 1 when our lock was deleted, 0 when it was gone or someone
-- else's; the rest is written either way.
local now = redisNow()
local token, item = ARGV[1], ARGV[2]
local ms, slot = tonumber(ARGV[3]), tonumber(ARGV[4])
if math.abs((slot - now) - ms) < 1000 then
  ms = slot - now
end

-- The cooldown, unless its key already keeps the item longer (an
-- operator's, or one of another type, which w8y does not own): as
-- finish.lua's pause. left is the key's time to live after it: the cooldown
-- set, as set (a PTTL read after the SET may have crossed a millisecond,
-- and would put the due entry a millisecond before the slot), or the key's
-- own.
local left = redis.call("PTTL", KEYS[2])
if ms > 0 and (left == -2 or (left >= 0 and left < ms and redis.call("TYPE", KEYS[2]).ok == "string")) then
  redis.call("SET", KEYS[2], token, "PX", ms)
  left = ms
end
-- pcall: a state key of another type must not keep the lock from going.
redis.pcall("HSET", KEYS[3], "next_slot", slot)
redis.pcall("PEXPIRE", KEYS[3], ARGV[5])

-- Due when the cooldown ends, or left to the sweep where it never does.
if left == -1 then
  redis.pcall("ZREM", KEYS[4], item)
else
  redis.pcall("ZADD", KEYS[4], now + math.max(left, 0), item)
end

-- The lock goes last, with its place: a take that comes after it finds
-- the cooldown.
local released = 0
if redis.pcall("GET", KEYS[1]) == token then
  released = redis.call("DEL", KEYS[1])
  redis.pcall("SREM", KEYS[5], KEYS[1])
  redis.pcall("ZREM", KEYS[6], item)
end
return released
