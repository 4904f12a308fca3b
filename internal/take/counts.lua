-- The counts' indexes at a take (see schema.Keys.Locks): batch.lua and
-- look.lua start with this file (the Go that loads them puts it before
-- each), and call countTake where they have taken a lock, so that a
-- summary counts the item as running until its lock expires, unless its
-- refresh moves the entry on (refresh.lua) or its release removes it
-- (finish.lua). pcall: a key of another type must not fail a take.

-- countTake records item's lock, taken at now for ttl milliseconds.
--
-- Its entry among the failing (the state hash's expiry, which a take's
-- record pushes back) is left to the run's finish, which writes it again:
-- only an item whose run never ends (its worker killed) and that no run
-- takes again before the failure's --state-ttl (a paused one) counts as
-- failing a whole read no longer sees, until the state hash that the take
-- kept expires too.
local function countTake(keyPrefix, item, now, ttl)
  redis.pcall("ZADD", keyPrefix .. "locks", now + tonumber(ttl), item)
end

-- countsTrim drops up to n entries of each index whose score has passed:
-- they count for nothing, and an item that is never run again (removed
-- by an outside LREM, say) would keep its entry for good. Each step of
-- the fleet's sweep makes one (see index.lua's sweepStep), so that a list
-- of any length is trimmed a bounded number of entries at a time.
local function countsTrim(keyPrefix, now, n)
  for _, index in ipairs({"locks", "pauses", "backoffs", "failing"}) do
    local key = keyPrefix .. index
    local old = redis.pcall("ZRANGEBYSCORE", key, "-inf", "(" .. now, "LIMIT", 0, n)
    if type(old) == "table" and not old.err and #old > 0 then
      redis.pcall("ZREM", key, unpack(old))
    end
  end
end
