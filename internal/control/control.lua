-- What an operator changes with w8yctl, in one atomic call per command, so
-- that a command that is refused changes nothing and one that is accepted
-- is seen whole by every worker: add items to the list, remove them with
-- everything about them, pause or resume them, or make them run now.
--
-- KEYS[1] the list, KEYS[2] the events stream and KEYS[3] the wake list
--         (see schema.Keys.Wake), both optional: given where they live on
--         the list's server
-- ARGV[1] the verb: add, remove, pause, resume or run_now, which is also
--         the type of the event that records the change (schema.EventAdd...)
-- ARGV[2] key prefix: an item's keys are ARGV[2] .. "lock:" .. item and so on
-- ARGV[3] options, words of the form name=value as in batch.lua:
--           create=1   add: start the list when it does not exist
--           for=MS     pause: the pause's expiry (absent: none)
--           state_ttl=MS  run_now: the expiry of a state hash that it
--                      makes for an item never run (see runnow.lua)
-- ARGV[4] pause: the reason
-- ARGV[5] who gives the command (user@host, control.Who)
-- ARGV[6...] the items, each once
--
-- Each item that the command changes, or would have changed had its keys
-- been otherwise (every item but one that add finds in the list already),
-- gets an entry in the events stream, of type the verb, with the item, who
-- (by) and a pause's reason and length (for_ms): see docs/operating.md.
-- Only where the stream exists (NOMKSTREAM): a fleet run with --no-events
-- keeps none, and an operator does not start one. Without MAXLEN, which
-- only the workers know: their next XADD trims the stream. XADD keeps the
-- key's expiry, which the workers set.
--
-- Returns {"ok", item1, changed1, holder1, ...}, for each item what the verb
-- changed (add: 1 if it was appended, 0 if the list held it already;
-- remove: how many times the list held it; pause: 1; resume: 1 if it was
-- paused; run_now: how many of its cooldown, backoff and pause keys were
-- deleted) and its lock's holder when it runs now, or false. Or, changing
-- nothing: {"no_list"} when the list does not exist (and add was not told to
-- create it), {"wrong_type", type} when KEYS[1] is not a list, {"not_in_list",
-- item} when a verb other than add names an item that the list lacks.
--
-- Only add is sent where an item's keys may live on other servers than the
-- list (Redis Cluster without a hash tag): it touches the list alone, and
-- is given no KEYS[2], whose event the client adds after. The other verbs
-- are sent only where the keys live on the list's server, which the client
-- checks; elsewhere it sends one command per key instead.
local list, events, wake = KEYS[1], KEYS[2], KEYS[3]
local verb, prefix, reason, by = ARGV[1], ARGV[2], ARGV[4], ARGV[5]
local opt = {}
for name, value in string.gmatch(ARGV[3] or "", "([%w_]+)=(%S*)") do
  opt[name] = value
end
-- now is Redis' clock, the fleet's one clock (internal/clock's now.lua).
local now = redisNow()

local kind = redis.call("TYPE", list).ok
if kind == "none" and not (verb == "add" and opt.create == "1") then
  return {"no_list"}
end
if kind ~= "list" and kind ~= "none" then
  return {"wrong_type", kind}
end
local items = {}
for i = 6, #ARGV do
  items[#items + 1] = ARGV[i]
end
if verb ~= "add" then
  for _, item in ipairs(items) do
    if not redis.call("LPOS", list, item) then
      return {"not_in_list", item}
    end
  end
end

-- holder is the token in item's lock, or false when no run holds it. A lock
-- key of another type is nobody's lock: pcall keeps it from failing the call.
local function holder(item)
  local value = redis.pcall("GET", prefix .. "lock:" .. item)
  if type(value) == "string" then
    return value
  end
  return false
end

local due = prefix .. "due"
local pauseFor = tonumber(opt["for"] or 0)

-- The counts' indexes (see schema.Keys.Locks), which the verbs keep in
-- step with the keys they change. pcall: a key of another type does not
-- undo the change.
local counts = {"locks", "pauses", "backoffs", "failing"}

-- heldUntil is when the last of item's lock, cooldown and backoff expires,
-- or nil when none holds it, or one never expires.
local function heldUntil(item)
  local at
  for _, infix in ipairs({"lock:", "cooldown:", "backoff:"}) do
    local left = redis.call("PTTL", prefix .. infix .. item)
    if left == -1 then
      return nil
    end
    if left > 0 then
      at = math.max(at or 0, now + left)
    end
  end
  return at
end

-- record adds the event of verb's change of item. pcall: a stream key of
-- another type is no stream, and does not undo the change.
local function record(item)
  if not events then
    return
  end
  local fields = {"type", verb, "item", item, "by", by}
  if verb == "pause" then
    fields[#fields + 1] = "reason"
    fields[#fields + 1] = reason
    if pauseFor > 0 then
      fields[#fields + 1] = "for_ms"
      fields[#fields + 1] = opt["for"]
    end
  end
  redis.pcall("XADD", events, "NOMKSTREAM", "*", unpack(fields))
end

-- woken counts the items that the command makes takeable now: each pushes
-- a token to the wake list, which wakes one idle worker (see
-- schema.Keys.Wake), up to wakeMost tokens, which expire after wakeTTL.
local woken = 0
local wakeMost, wakeTTL = tonumber(opt.wake_most or 16), tonumber(opt.wake_ttl or 60000)

local reply = {"ok"}
for _, item in ipairs(items) do
  local changed = 0
  if verb == "add" then
    if not redis.call("LPOS", list, item) then
      redis.call("RPUSH", list, item)
      changed = 1
    end
  elseif verb == "remove" then
    changed = redis.call("LREM", list, 0, item)
    redis.call("DEL", prefix .. "cooldown:" .. item, prefix .. "backoff:" .. item,
      prefix .. "pause:" .. item, prefix .. "state:" .. item, prefix .. "settings:" .. item)
    redis.call("ZREM", due, item)
    -- Out of every count, a run under way too: the list no longer holds
    -- it, and its refreshes and its end leave the indexes alone.
    for _, index in ipairs(counts) do
      redis.pcall("ZREM", prefix .. index, item)
    end
  elseif verb == "pause" then
    local key = prefix .. "pause:" .. item
    redis.call("DEL", key)
    redis.call("HSET", key, "reason", reason, "by", by, "at", now)
    redis.pcall("ZADD", prefix .. "pauses", pauseFor > 0 and now + pauseFor or "+inf", item)
    if pauseFor > 0 then
      redis.call("PEXPIRE", key, pauseFor)
      -- An idle worker looks at the item when the pause ends. An entry
      -- already there is left: one due sooner is moved to the pause's end
      -- by the look that finds the item paused (look.lua), and one due later
      -- waits for a blocker that lasts longer.
      if not redis.call("ZSCORE", due, item) then
        redis.call("ZADD", due, now + pauseFor, item)
      end
    end
    changed = 1
  elseif verb == "resume" then
    changed = redis.call("DEL", prefix .. "pause:" .. item)
    redis.pcall("ZREM", prefix .. "pauses", item)
    -- An idle worker looks at it within a second; one that a lock, a
    -- cooldown or a backoff still holds is due when the last of them
    -- expires, as a finish would have written it, so that the summary
    -- counts it as held until then.
    redis.call("ZADD", due, heldUntil(item) or 0, item)
  elseif verb == "run_now" then
    changed = redis.call("DEL", prefix .. "cooldown:" .. item, prefix .. "backoff:" .. item, prefix .. "pause:" .. item)
    redis.pcall("ZREM", prefix .. "pauses", item)
    redis.pcall("ZREM", prefix .. "backoffs", item)
    -- An item never run would wait for its first slot under a schedule
    -- (internal/take's settings.lua): its state says that its slot has
    -- come (next_slot 0), which makes it run. Keep in step with
    -- ranow.lua, the same for the path per key.
    local state = prefix .. "state:" .. item
    local seen = redis.pcall("HMGET", state, "last_start", "next_slot")
    if type(seen) == "table" and not seen.err and not seen[1] and not seen[2] then
      redis.call("HSET", state, "next_slot", 0)
      if redis.call("PTTL", state) == -1 then
        redis.call("PEXPIRE", state, opt.state_ttl)
      end
    end
    -- Due now: an idle worker takes it within a second, unless its lock is
    -- held, which keeps it from running twice at once.
    redis.call("ZADD", due, 0, item)
  else
    return redis.error_reply("unknown verb " .. verb)
  end
  if verb ~= "add" or changed == 1 then
    record(item)
  end
  if (verb == "add" and changed == 1) or verb == "resume" or verb == "run_now" then
    woken = woken + 1
  end
  reply[#reply + 1] = item
  reply[#reply + 1] = changed
  -- add touches the list alone (see above): whether the item runs is not
  -- its business.
  if verb == "add" then
    reply[#reply + 1] = false
  else
    reply[#reply + 1] = holder(item)
  end
end
-- pcall: a wake key of another type wakes nobody, and fails nothing.
local have = wake and woken > 0 and redis.pcall("LLEN", wake)
if type(have) == "number" and have < wakeMost then
  for _ = 1, math.min(woken, wakeMost - have) do
    redis.call("RPUSH", wake, "1")
  end
  redis.call("PEXPIRE", wake, wakeTTL)
end
return reply
