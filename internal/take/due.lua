-- An idle worker's look at the list: instead of a pass over every item, it
-- tries only the items that may have become eligible since its last look,
-- and takes the first whose lock it gets, in one call whose cost does not
-- grow with the list:
--
-- - items appended since the last look, when the list has grown: outside
--   writers add items with RPUSH, so they are at the tail while no worker
--   rotates the list. ARGV[4] is how far the last look got, and the look
--   tries the oldest of them first, at most `most`, and replies how far it
--   got: a thousand items pushed at once are all tried, ten a look;
-- - items of the due index (ARGV[1] .. "due") whose score has passed: w8y
--   writes it at each take (the moment the lock would expire) and finish
--   (when the cooldown or backoff expires, or now), and an operator adds one
--   with score 0 to run an item now.
--
-- A due entry that turns out ineligible (locked, cooling down, backing off
-- or paused) is moved to when its blocker expires, or dropped when the blocker has no expiry or the item is no
-- longer in the list. A due item taken is moved to the tail of the list
-- (RPUSH, then LREM of its first occurrence: the list keeps exactly its
-- items), as a rotation would have, so that the items that come due next
-- stay near the head and LPOS finds them early.
--
-- When nothing is taken, it also decides whether this worker passes over
-- the whole list for the fleet now: it does when it sets the sweep key
-- (ARGV[1] .. "sweep"), which then keeps the other idle workers from it for
-- sweep=MS. The sweep notices what neither the index nor the list's length
-- shows: keys deleted by hand, items added while others rotate the list.
--
-- KEYS[1] the list
-- ARGV[1] key prefix, ARGV[2] our token, ARGV[3] lock TTL in milliseconds
-- ARGV[4] how much of the list the last look had seen (its length then, or
--         less when more items had been appended than it tried), or -1
--         when unknown
-- ARGV[5] longest item the child can be given
-- ARGV[6] options, words of the form name=value as in take.lua:
--           now=MS       the time of the look, Unix milliseconds
--           most=N       most due entries, and most new items, to try
--           sweep=MS     how long a sweep keeps others from sweeping (absent
--                        or 0: this worker does not sweep)
--           state_ttl=MS, events=N   record a take as take.lua does
--
-- Returns {seen, taken, sweep, fence, head1, size1, ...}: how much of the
-- list the next look may take as seen (the list's length, or less; see
-- above), the item whose lock is now ours or false, 1 when this worker must
-- sweep now (else 0), the take's fencing token as take.lua returns it (0
-- without a take), and for each item skipped because the child cannot be given it,
-- or because its lock key holds another type, its head and size or type
-- name, as take.lua reports them.
--
-- The item's keys are not declared in KEYS: as for take.lua, the client
-- uses this script only where they live on the list's server.
local find, sub = string.find, string.sub
local list = KEYS[1]
local keyPrefix, token, ttl = ARGV[1], ARGV[2], tonumber(ARGV[3])
local last, maxLen = tonumber(ARGV[4]), tonumber(ARGV[5])
local due = keyPrefix .. "due"
local opt = {}
for name, value in string.gmatch(ARGV[6] or "", "([%w_]+)=(%S*)") do
  opt[name] = value
end
local now, most = tonumber(opt.now), tonumber(opt.most or 10)
local clipLen = 64

local length = redis.pcall("LLEN", list)
if type(length) == "table" then
  return length
end

local reply = {length, false, 0, 0}
local function skip(item, why)
  reply[#reply + 1] = sub(item, 1, clipLen)
  reply[#reply + 1] = why
end

-- The candidates: new items first, the oldest first, then due ones, each
-- at most once. newAt[i] is the list's length up to and including the new
-- candidate i.
local candidates, fromIndex, seen, newAt = {}, {}, {}, {}
if last >= 0 and length > last then
  for i, item in ipairs(redis.call("LRANGE", list, last, last + most - 1)) do
    if not seen[item] then
      seen[item] = true
      candidates[#candidates + 1] = item
      newAt[#candidates] = last + i
    end
    reply[1] = last + i
  end
end
for _, item in ipairs(redis.call("ZRANGEBYSCORE", due, "-inf", now, "LIMIT", 0, most)) do
  if seen[item] then
    fromIndex[item] = true
  else
    seen[item] = true
    candidates[#candidates + 1] = item
    fromIndex[item] = true
  end
end

local taken
for c, item in ipairs(candidates) do
  local size = #item
  local lock = keyPrefix .. "lock:" .. item
  local blockers = {lock, keyPrefix .. "cooldown:" .. item, keyPrefix .. "backoff:" .. item, keyPrefix .. "pause:" .. item}
  if size == 0 or size > maxLen or find(item, "\0", 1, true) then
    -- Never runnable: dropped from the index, reported once per look.
    redis.call("ZREM", due, item)
    skip(item, size)
  elseif redis.call("EXISTS", list, unpack(blockers)) == 1 then
    -- Free. A due item must still be in the list: outside writers remove
    -- items with LREM, leaving their entries behind. A new item is.
    local at = 0
    if fromIndex[item] then
      at = redis.pcall("LPOS", list, item)
      if type(at) == "table" and at.err then
        -- Redis before 6.0.6 has no LPOS: say so in the words of a command
        -- Redis does not know, which the client falls back on.
        if string.find(at.err, "nknown") then
          return redis.error_reply("ERR unknown command 'LPOS', called from due.lua: " .. at.err)
        end
        return at
      end
    end
    if not at then
      redis.call("ZREM", due, item)
    elseif redis.call("SET", lock, token, "NX", "PX", ttl) then
      taken = item
      if fromIndex[item] then
        redis.call("RPUSH", list, item)
        redis.call("LREM", list, 1, item)
      end
      redis.call("ZADD", due, now + ttl, item)
      -- The new items after this one are for the next look.
      if newAt[c] then
        reply[1] = newAt[c]
      end
      break
    end
  elseif fromIndex[item] then
    -- Held: look again when the last blocker expires, or leave it to the
    -- sweep when one never does (an operator's pause without --for, a
    -- cooldown or a lock set by hand).
    local at = now
    for _, key in ipairs(blockers) do
      local left = redis.call("PTTL", key)
      if left == -1 then
        at = nil
        if key == lock and redis.call("TYPE", lock).ok ~= "string" then
          skip(item, redis.call("TYPE", lock).ok)
        end
        break
      end
      at = math.max(at, now + left)
    end
    if at then
      redis.call("ZADD", due, at, item)
    else
      redis.call("ZREM", due, item)
    end
  end
end

if taken then
  reply[2] = taken
  -- Fence: as take.lua's.
  local fence = redis.pcall("INCR", keyPrefix .. "fence")
  if type(fence) == "number" then
    reply[4] = fence
  end
  if opt.state_ttl then
    local state = keyPrefix .. "state:" .. taken
    redis.pcall("HSET", state, "last_start", opt.now, "last_holder", token, "last_fence", reply[4])
    redis.pcall("PEXPIRE", state, opt.state_ttl)
  end
  if tonumber(opt.events or 0) > 0 then
    local events = keyPrefix .. "events"
    redis.pcall("XADD", events, "MAXLEN", "~", opt.events, "*", "type", "start", "item", taken, "holder", token, "fence", reply[4])
    redis.pcall("PEXPIRE", events, opt.state_ttl)
  end
elseif tonumber(opt.sweep or 0) > 0 and redis.call("SET", keyPrefix .. "sweep", token, "NX", "PX", opt.sweep) then
  reply[3] = 1
end
return reply
