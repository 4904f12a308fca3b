-- The due index's upkeep: batch.lua and look.lua start with this file (after
-- place.lua; the Go that loads them puts it before each), so that every
-- item a take passes over, and every item the fleet's sweep reads, leaves
-- an entry in the due index (the sorted set keyPrefix .. "due") that says
-- when it may run: the first promise, that every item comes round again,
-- rests on it. A busy fleet takes only what the index and the appended items
-- offer, so an item with no entry would wait for nothing.

-- blockedUntil is when item may run as its blockers say: now when no lock,
-- cooldown, backoff or pause key holds it, else the moment the last of them
-- expires, read with PTTL in the same call; nil when one never expires (an
-- operator's pause without --for, a lock or cooldown set by hand without an
-- expiry), which only its deletion ends: the sweep finds the item then.
local function blockedUntil(keyPrefix, item, now)
  local at = now
  for _, infix in ipairs({"lock:", "cooldown:", "backoff:", "pause:"}) do
    local left = redis.call("PTTL", keyPrefix .. infix .. item)
    if left == -1 then
      return nil
    end
    if left > 0 then
      at = math.max(at, now + left)
    end
  end
  return at
end

-- scoresOf reads the due index's scores of items (false where an item has
-- none) in one ZMSCORE, or one ZSCORE each on a Redis before 6.2. Any other
-- refusal (an ACL rule without ZMSCORE) fails the call, in Redis' words,
-- rather than leave the index to go without what only this keeps.
local function scoresOf(due, items)
  if #items == 0 then
    return {}
  end
  local got = redis.pcall("ZMSCORE", due, unpack(items))
  if type(got) == "table" and not got.err then
    return got
  end
  if not string.find(got.err, "nknown") then
    redis.call("ZMSCORE", due, unpack(items)) -- fails as it did, and ends the call
  end
  got = {}
  for i, item in ipairs(items) do
    got[i] = redis.call("ZSCORE", due, item)
  end
  return got
end

-- indexPassed gives each of items, which a take passed over because
-- something held it, an entry in the due index where it has none (scores,
-- from scoresOf, read before the take wrote anything, so that a refusal
-- fails the call before it has taken a lock): at the moment its blockers
-- expire (blockedUntil), so that it is found again then, whoever set them.
-- An item that already has an entry keeps it (w8y's take or finish wrote
-- it, or a look moves it when it comes due and the item is still held);
-- one whose blocker never expires is left to the sweep, which finds it once
-- the blocker is gone.
local function indexPassed(keyPrefix, items, scores, now)
  local due = keyPrefix .. "due"
  for i, item in ipairs(items) do
    if not scores[i] then
      local at = blockedUntil(keyPrefix, item, now)
      if at then
        redis.call("ZADD", due, at, item)
      end
    end
  end
end

-- sweepEvery is how long the fleet waits between two sweeps of a list of
-- length items: every_ms=MS an item, at least sweep_min=MS and at most
-- sweep_max=MS (see sweepStep).
local function sweepEvery(length, opt)
  local every = math.floor(length * tonumber(opt.every_ms))
  return math.min(math.max(every, tonumber(opt.sweep_min)), tonumber(opt.sweep_max))
end

-- sweepStep is the fleet's sweep, one bounded step a call: every look makes
-- one while the sweep is due, so that every item of the list is read once
-- in a while however the fleet takes (busy, idle or one-shot), and none
-- waits for what neither the index nor the appended items show (a key
-- deleted by hand, a due entry lost, an item that an outside LREM left
-- behind the appended ones). It reads the list from its tail towards its
-- head, step=N items a call, and keeps how far it has come in keyPrefix ..
-- "swept" ("covered length"); going that way, the moves that takes make
-- (a taken item to the tail, a rotation of the head) pass no item it has
-- yet to read but the ones they take or pass over, which have entries, and
-- an outside LREM among the items already read is made up for by reading
-- again as many as the list lost. An item read that a child can be given
-- (maxLen, as the take's) that has no entry is given one for when its
-- blockers expire (now if none), and one whose entry is in the future
-- though nothing holds it any more is due now. The step that reaches the
-- head sets keyPrefix .. "sweep", which keeps the next sweep away for
-- every_ms=MS a list item (at least sweep_min=MS, at most sweep_max=MS):
-- its cost, a small share of Redis' time, stays the same whatever the
-- list's length.
--
-- One caller drives a sweep: the one (token) that made the last step, which
-- the mark records with its time, until it makes none for sweep_lease=MS;
-- the others' looks leave the steps to it, so that a fleet of idle workers
-- does not make the steps all at once.
--
-- waits is whether keyPrefix .. "sweep" exists, where the caller has read
-- it already (look.lua, with its marks); nil: the step reads it.
--
-- Returns how many items it gave an entry, or moved one earlier, and 1 when
-- this caller drives a sweep that is not over (it may step again at once),
-- else 0.
local function sweepStep(list, length, keyPrefix, now, maxLen, token, opt, waits)
  local step = tonumber(opt.sweep or 0)
  local sweepKey, sweptKey = keyPrefix .. "sweep", keyPrefix .. "swept"
  if step <= 0 or length == 0 or waits or (waits == nil and redis.call("EXISTS", sweepKey) == 1) then
    return 0, 0
  end
  local covered, was = 0, length
  local mark = redis.pcall("GET", sweptKey)
  if type(mark) == "string" then
    local c, l, driver, at = string.match(mark, "^(%d+) (%d+) (%S+) (%d+)$")
    if driver and driver ~= token and now - tonumber(at) < tonumber(opt.sweep_lease or 1000) then
      return 0, 0
    end
    covered, was = tonumber(c) or 0, tonumber(l) or length
  end
  if length < was then
    covered = math.max(covered - (was - length), 0)
  end
  covered = math.min(covered, length)
  local upto = math.min(covered + step, length)
  countsTrim(keyPrefix, now, step)
  local read = redis.call("LRANGE", list, -upto, -(covered + 1))
  local due = keyPrefix .. "due"
  local items, once = {}, {}
  for _, item in ipairs(read) do
    -- An item that no child can be given is every take's to skip, and to
    -- report: it gets no entry.
    if #item > 0 and #item <= maxLen and not once[item] and not string.find(item, "\0", 1, true) then
      once[item] = true
      items[#items + 1] = item
    end
  end
  local scores = scoresOf(due, items)
  -- Most of a fleet's list cools down between runs, or runs: one MGET of
  -- the cooldowns, then one of the locks of the rest, tell those held
  -- without a call an item. (A value read means a key; none, no key or
  -- one of another type, which EXISTS then finds.)
  local cools = {}
  for i, item in ipairs(items) do
    cools[i] = keyPrefix .. "cooldown:" .. item
  end
  local cooling = #items > 0 and redis.call("MGET", unpack(cools)) or {}
  local fixed, later, locks = 0, {}, {}
  for i, item in ipairs(items) do
    local score = tonumber(scores[i])
    if not score then
      local at = blockedUntil(keyPrefix, item, now)
      if at then
        redis.call("ZADD", due, at, item)
        fixed = fixed + 1
      end
    elseif score > now + 1000 and not cooling[i] then
      -- A future entry (later than a clock's error between two hosts: one
      -- a second ahead is about due anyway): is anything still holding it?
      later[#later + 1] = item
      locks[#locks + 1] = keyPrefix .. "lock:" .. item
    end
  end
  local locked = #locks > 0 and redis.call("MGET", unpack(locks)) or {}
  for j, item in ipairs(later) do
    if not locked[j] and redis.call("EXISTS", locks[j], keyPrefix .. "cooldown:" .. item,
        keyPrefix .. "backoff:" .. item, keyPrefix .. "pause:" .. item) == 0 then
      -- Nothing holds it any more (a cooldown or pause deleted by hand, a
      -- lock released without a finish): due now. A blocker shortened by
      -- hand still holds it until its entry, which its first length
      -- bounds.
      redis.call("ZADD", due, now, item)
      fixed = fixed + 1
    end
  end
  if upto >= length then
    redis.pcall("DEL", sweptKey)
    redis.call("SET", sweepKey, now, "PX", sweepEvery(length, opt))
    return fixed, 0
  end
  redis.pcall("SET", sweptKey, upto .. " " .. length .. " " .. token .. " " .. now, "PX", 2 * tonumber(opt.sweep_max))
  return fixed, 1
end
