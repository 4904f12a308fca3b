-- A look at the list: instead of a pass over every item, it tries only the
-- items that may have become eligible, and takes the first whose lock it
-- gets, in one call whose cost does not grow with the list. Every take of a
-- worker whose items' keys live on the list's server starts with it: a
-- one-shot run, a worker's first take, a busy worker's next one, an idle
-- worker's look.
--
-- - items appended since workers last looked: outside writers add items
--   with RPUSH, at the tail. The fleet shares how much of the list, from
--   its head, has been tried (ARGV[1] .. "seen"), and a look tries the
--   items after it, the oldest first, at most new=N, and moves it on past
--   what it tried: a thousand items pushed at once are tried by the whole
--   fleet, each once. A rotation (batch.lua) and a move to the tail here
--   move it back by the items they moved while appended items wait, so
--   that it never passes one; an outside LREM before it can make it pass
--   one, which the fleet's sweep then finds;
-- - the items at the head that no worker has tried since w8y first saw the
--   list (ARGV[1] .. "untried"; a list that w8y has never run is all
--   untried): the look leaves them to the caller, which passes over that
--   many with batch.lua, rotating them as a pass always has, so that the
--   whole fleet takes from a fresh list at once, each take a rotation;
-- - items of the due index (ARGV[1] .. "due") whose score has passed: w8y
--   writes it at each take (the moment the lock would expire) and finish
--   (when the cooldown or backoff expires, or now), and an operator adds one
--   with score 0 to run an item now.
--
-- A due entry that turns out ineligible (locked, cooling down, backing off
-- or paused) is moved to when its blocker expires, or dropped when the
-- blocker has no expiry or the item is no longer in the list. An appended
-- item that is not eligible is passed, and given an entry for when its
-- blocker expires if it has none (index.lua's indexPassed). A due item
-- taken is moved to the tail of the list (RPUSH, then LREM of its first
-- occurrence: the list keeps exactly its items), as a rotation would have,
-- so that the items that come due next stay near the head and LPOS finds
-- them early; but not while appended items wait (see below).
--
-- Before it reads the due index, a look makes the next step of the fleet's
-- sweep while one is due (index.lua's sweepStep), which gives an entry to
-- what neither the index nor the appended items show (keys deleted by
-- hand, a due entry lost, items appended behind an outside LREM): what it
-- finds is a candidate of this very look. A list seen for the first time
-- waits a whole sweep's interval for its first sweep: its items are all
-- untried, and tried as such.
--
-- KEYS[1] the list
-- ARGV[1] key prefix, ARGV[2] our token, ARGV[3] lock TTL in milliseconds
-- ARGV[4] longest item the child can be given
-- ARGV[5] options, words of the form name=value as in batch.lua:
--           most=N       most due entries to try
--           new=N        most appended items to try
--           sweep=N      how many items a step of the fleet's sweep reads
--                        (absent or 0: this look makes no step)
--           every_ms=MS, sweep_min=MS, sweep_max=MS
--                        the wait between two sweeps, by the list's length
--                        (see index.lua's sweepEvery)
--           sweep_lease=MS  how long the caller that made the last step
--                        keeps the sweep's steps its own (see sweepStep)
--           head=0       look on while items at the head are untried, rather
--                        than reply at once for the caller to pass over them
--           state_ttl=MS, events=N   record a take as batch.lua does
--           cap=N        --fleet-max-running, as batch.lua takes it
--           rate=N/MS    --fleet-rate, as batch.lua takes it
--           first=all|own  as batch.lua takes it
--           stream_ttl_set=1
--                        the events stream's expiry was set earlier in the
--                        same call (next.lua's finish): not set again
--
-- Returns {unseen, taken, swept, fence, untried, sweeping, settings, now,
-- head1, size1, ...}: how many appended items are still to be tried after this look (a
-- caller that took nothing looks again at once while there are), the item
-- whose lock is now ours or false, how many items the sweep's step gave an
-- entry in the due index (or an earlier one), the take's
-- fencing token as batch.lua returns it (0 without a take, -1 when cap=N
-- found every place in use and the look tried nothing, -2 when rate=N/MS
-- found the rate's window full and the look tried nothing), how many items
-- at the list's head no worker has tried yet (a caller that took nothing
-- passes over them with batch.lua, as a pass of that many), 1 when this
-- caller drives the fleet's sweep and its next step may come at once (a
-- caller that took nothing looks again at once), the taken item's
-- settings as batch.lua returns them (false without a take), Redis' clock
-- at the take (Unix milliseconds, as batch.lua returns it), and for each
-- item skipped because the child cannot be given it, or because its lock
-- key holds another type, its head and size or type name, as batch.lua
-- reports them.
--
-- The item's keys are not declared in KEYS: as for batch.lua, the client
-- uses this script only where they live on the list's server.
local find, sub = string.find, string.sub
local list = KEYS[1]
local keyPrefix, token, ttl = ARGV[1], ARGV[2], tonumber(ARGV[3])
local maxLen = tonumber(ARGV[4])
local due, seenKey = keyPrefix .. "due", keyPrefix .. "seen"
local opt = {}
for name, value in string.gmatch(ARGV[5] or "", "([%w_]+)=(%S*)") do
  opt[name] = value
end
-- now is Redis' clock, the fleet's one clock (internal/clock's now.lua).
local now = redisNow()
local most, newMost = tonumber(opt.most or 10), tonumber(opt.new or 10)
local clipLen = 64

local length = redis.pcall("LLEN", list)
if type(length) == "table" then
  return length
end
-- A worker's first look makes the checks of its start (see start.lua).
local refused = startChecks(keyPrefix, length, opt)
if refused then
  return refused
end
-- untried is how many items at the list's head no worker has tried since
-- w8y first saw the list: all of them, the first time (no key). The caller
-- passes over them (batch.lua rotates them, as a one-shot run always has)
-- before the look elects a sweep. An empty or missing list forgets both
-- marks, so that a list made anew is tried whole. pcall: a key of another
-- type reads as missing, and is replaced.
-- One MGET reads both marks, whether the fleet's sweep waits (its key
-- exists: see index.lua's sweepStep) and whether the fleet's records of a
-- cap and a rate are there (see the take below); MGET reads a key of
-- another type as missing, as GET under pcall did.
local untriedKey, sweepKey = keyPrefix .. "untried", keyPrefix .. "sweep"
local capKey, rateKey = keyPrefix .. "fleet-max-running", keyPrefix .. "fleet-rate"
local marks = redis.call("MGET", untriedKey, seenKey, sweepKey, capKey, rateKey)
local untried, stored, sweepWaits = tonumber(marks[1]), tonumber(marks[2]), marks[3] ~= false
if length == 0 then
  redis.call("DEL", seenKey, untriedKey)
  untried, stored = 0, nil
elseif not untried then
  untried, stored = length, length
  redis.pcall("SET", untriedKey, length)
  redis.pcall("SET", seenKey, length)
  if tonumber(opt.sweep or 0) > 0 then
    redis.pcall("SET", sweepKey, now, "NX", "PX", sweepEvery(length, opt))
    sweepWaits = true
  end
end
-- A capped look whose places are all in use tries nothing, and elects no
-- sweep: the caller waits as an idle worker does, and looks again.
local cap, full, err = placesFull(keyPrefix, opt)
if err then
  return err
elseif full then
  return {0, false, 0, -1, 0, 0, false, now}
end
-- So does a look that --fleet-rate refuses: the fleet started N items in
-- the rate's last window (see rate.lua).
local rateN, ratePer, rateIsFull, rateErr = ratesFull(keyPrefix, opt, now)
if rateErr then
  return rateErr
elseif rateIsFull then
  return {0, false, 0, -2, 0, 0, false, now}
end
-- A pass tries the head first: while items there are untried, the caller
-- (unless it asks for the rest, head=0) passes over them before anything
-- else, as a take always has.
if untried > 0 and opt.head ~= "0" then
  return {0, false, 0, 0, untried, 0, false, now}
end
-- last is where the appended items start; seen where the next look's will.
local last = math.min(stored or length, length)
local seen = last

local swept, sweeping = sweepStep(list, length, keyPrefix, now, maxLen, token, opt, sweepWaits)
local reply = {0, false, swept, 0, untried, sweeping, false, now}
local function skip(item, why)
  reply[#reply + 1] = sub(item, 1, clipLen)
  reply[#reply + 1] = why
end

-- The candidates: new items first, the oldest first, then due ones, each
-- at most once. newAt[i] is the list's length up to and including the new
-- candidate i. passed are the appended items found held, which the index
-- must know of (indexPassed, below).
local candidates, fromIndex, tried, newAt, held, passed = {}, {}, {}, {}, {}, {}
local function blockersOf(item)
  return {keyPrefix .. "lock:" .. item, keyPrefix .. "cooldown:" .. item, keyPrefix .. "backoff:" .. item, keyPrefix .. "pause:" .. item}
end
-- The appended items are read a chunk at a time, from 16 doubling, up to
-- the first that is free: a list that w8y has never run, whose first
-- items are mostly free, costs a take a handful of items, not new=N; one
-- whose free items are few costs about a candidate per item passed, each
-- once for the fleet. An item passed here as held is not checked again.
local from, chunk = last, 16
while from < length and from - last < newMost do
  local read = redis.call("LRANGE", list, from, math.min(from + chunk, last + newMost) - 1)
  if #read == 0 then
    break
  end
  local free = false
  for i, item in ipairs(read) do
    seen = from + i
    if not tried[item] then
      tried[item] = true
      candidates[#candidates + 1] = item
      newAt[#candidates] = from + i
      local size = #item
      if size == 0 or size > maxLen or find(item, "\0", 1, true) then
        -- Left to the loop below, which reports it.
      elseif redis.call("EXISTS", list, unpack(blockersOf(item))) == 1 then
        free = true
        break
      else
        held[item] = true
        passed[#passed + 1] = item
      end
    end
  end
  if free then
    break
  end
  from, chunk = from + #read, chunk * 2
end
-- Their entries, read before anything below is written (see indexPassed).
local passedScores = scoresOf(due, passed)
for _, item in ipairs(redis.call("ZRANGEBYSCORE", due, "-inf", now, "LIMIT", 0, most)) do
  if tried[item] then
    fromIndex[item] = true
  else
    tried[item] = true
    candidates[#candidates + 1] = item
    fromIndex[item] = true
  end
end

local taken
for c, item in ipairs(candidates) do
  local size = #item
  local lock = keyPrefix .. "lock:" .. item
  local blockers = blockersOf(item)
  if held[item] and not fromIndex[item] then
    -- An appended item found held above: passed.
  elseif size == 0 or size > maxLen or find(item, "\0", 1, true) then
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
          return redis.error_reply("ERR unknown command 'LPOS', called from look.lua: " .. at.err)
        end
        return at
      end
    end
    if not at then
      redis.call("ZREM", due, item)
    elseif redis.call("SET", lock, token, "NX", "PX", ttl) then
      taken = item
      -- The appended items after this one are for the next look.
      if newAt[c] then
        seen = newAt[c]
      end
      -- A due item moves to the tail only while no appended item waits:
      -- behind them it would count as appended itself, and so would every
      -- item taken after it, and a busy fleet, always finding an appended
      -- item first, would never come to the due index (an item due since
      -- long ago would starve). Left where it is, it is simply not
      -- rotated; the appended items drain, each taken where it stands.
      if fromIndex[item] and seen >= length then
        -- At the head, where the item that comes due next most often is
        -- (the items are moved to the tail in the order they run), one
        -- LMOVE is the move; elsewhere, or on a server without LMOVE (see
        -- README.md), RPUSH then LREM of its first occurrence.
        local moved = at == 0 and redis.pcall("LMOVE", list, list, "LEFT", "RIGHT")
        if not moved or type(moved) == "table" then
          redis.call("RPUSH", list, item)
          redis.call("LREM", list, 1, item)
        end
        -- Every item after it moved one towards the head; the mark, at the
        -- list's end, stays there.
      end
      redis.call("ZADD", due, now + ttl, item)
      countTake(keyPrefix, item, now, ttl)
      break
    end
  elseif fromIndex[item] then
    -- Held: look again when the last blocker expires, or leave it to the
    -- sweep when one never does (an operator's pause without --for, a
    -- cooldown or a lock set by hand), which finds it once that is gone.
    local at = blockedUntil(keyPrefix, item, now)
    if at then
      redis.call("ZADD", due, at, item)
    else
      redis.call("ZREM", due, item)
      local kind = redis.call("TYPE", lock).ok
      if kind ~= "string" and kind ~= "none" and redis.call("PTTL", lock) == -1 then
        skip(item, kind)
      end
    end
  end
end
indexPassed(keyPrefix, passed, passedScores, now)

if taken then
  reply[2] = taken
  -- The item's own settings, and whether it waits for its first slot
  -- (fresh), which records no start (see settings.lua).
  reply[7] = takenSettings(keyPrefix, taken, opt)
  local fresh = reply[7][1] == 1
  -- Fence: as batch.lua's.
  local fence = redis.pcall("INCR", keyPrefix .. "fence")
  if type(fence) == "number" then
    reply[4] = fence
  end
  -- An item that waits for its first slot starts nothing: the fleet's
  -- rate does not count it. A take under neither a cap nor a rate deletes
  -- both records (takePlace's and takeRate's), in one DEL and only where
  -- the MGET above found one: a fleet that never had a cap or a rate, or
  -- whose records an earlier take deleted, writes nothing for them.
  if cap <= 0 and not rateN and not fresh then
    if marks[4] or marks[5] then
      redis.pcall("DEL", capKey, rateKey)
    end
  else
    takePlace(keyPrefix .. "running", capKey, keyPrefix .. "lock:" .. taken, cap)
    if not fresh then
      takeRate(keyPrefix .. "starts", rateKey, rateN, ratePer, now)
    end
  end
  if opt.state_ttl and not fresh then
    local state = keyPrefix .. "state:" .. taken
    redis.pcall("HSET", state, "last_start", now, "last_holder", token, "last_fence", reply[4])
    redis.pcall("PEXPIRE", state, opt.state_ttl)
  end
  if not fresh and tonumber(opt.events or 0) > 0 then
    local events = keyPrefix .. "events"
    redis.pcall("XADD", events, "MAXLEN", "~", opt.events, "*", "type", "start", "item", taken, "holder", token, "fence", reply[4])
    if opt.stream_ttl_set ~= "1" then
      redis.pcall("PEXPIRE", events, opt.state_ttl)
    end
  end
end
if length > 0 and seen ~= stored then
  redis.pcall("SET", seenKey, seen)
end
reply[1] = length - seen
return reply
