-- What a take returns with the lock of the item it took (see settings.go),
-- so that the worker applies the item's own settings without a round trip
-- of its own. Prepended to batch.lua and look.lua (and so next.lua) by
-- indexed().
--
-- takenSettings is {fresh, field1, value1, ...}: the item's own settings,
-- keyPrefix .. "settings:" .. item as HGETALL reads it (none where the key
-- holds another type: the worker's options stand), and fresh 1 where the
-- item waits for its first slot instead of running now: the worker asks
-- new items to wait (opt.first: "all" under its own --schedule, "own"
-- where only an item's own schedule counts), the item runs on a schedule
-- (its own, or under first=all the worker's, unless its own cooldown
-- stands in for it), and no run of it is known: its state hash holds
-- neither last_start nor next_slot. A fresh take records no start; the
-- worker gives its lock back at once, with a cooldown until the item's
-- first slot (internal/finish's park.lua). Keep the rule in step with
-- settings.Scheduled.
local function takenSettings(keyPrefix, item, opt)
  local got = redis.pcall("HGETALL", keyPrefix .. "settings:" .. item)
  if type(got) ~= "table" or got.err then
    got = {}
  end
  local fresh = 0
  if opt.first == "all" or opt.first == "own" then
    local own, cools = false, false
    for i = 1, #got, 2 do
      if got[i] == "schedule" then
        own = true
      elseif got[i] == "cooldown" then
        cools = true
      end
    end
    if own or (opt.first == "all" and not cools) then
      local seen = redis.pcall("HMGET", keyPrefix .. "state:" .. item, "last_start", "next_slot")
      if type(seen) == "table" and not seen.err and not seen[1] and not seen[2] then
        fresh = 1
      end
    end
  end
  table.insert(got, 1, fresh)
  return got
end
