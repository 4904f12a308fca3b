-- Counts the list's items by state without reading the list: the summary
-- that opens w8y --status, the dashboard's counts and w8yctl status
-- without rows, in O(log n) of the list's length n plus the items that
-- run or are paused now (see schema.Keys.Locks for the indexes, which
-- every w8y writer keeps in step with an item's keys).
--
-- An item's state is the first of locked, paused, backoff, cooldown, idle
-- that holds it, as a whole read classifies it (status.go's classify):
--   running      the locks whose entry is in the future;
--   paused       the pauses in the future (without an expiry: +inf), of
--                which paused_running also run;
--   backoff      the backoffs in the future, less those of the running
--                and the paused;
--   cooling      the due index's entries in the future, which are the items
--                held by a lock, a cooldown, a backoff or a pause until
--                then, less the backoffs and those of the running and the
--                paused;
--   failing      the failing in the future (the state hash's expiry).
-- What only a whole read of the list can count (items held twice, items
-- that no child can be given, locks of another type) comes from the last
-- whole read's record (schema.Keys.Counted).
--
-- KEYS[1] the list, and then every key it reads under the prefix, in this
--         order: schema, fence, seen, untried, events, locks, pauses,
--         backoffs, failing, due, counted. Declared, so that a Cluster
--         whose slot moves refuses the call (TRYAGAIN, which w8yctl waits
--         out) rather than the script meeting a key gone to another node.
-- ARGV[1] "1" to count also the items that back off without a failure on
--         record (the dashboard's "failing" counts them): one ZMSCORE a
--         thousand items that back off
--
-- Returns {"not_indexed"} where the list's indexes are not whole (see
-- schema.Version: a list that an earlier fleet has run, which w8yctl check
-- --fix indexes), or {length, running, paused, paused_running, backoff,
-- cooling, failing, backoff_not_failing, duplicates, blocked, invalid,
-- counted_at, now}, the last four "" where no whole read is on record.
-- A list key of another type fails the call with Redis' WRONGTYPE.
local list = KEYS[1]
local key = {}
for i, name in ipairs({"schema", "fence", "seen", "untried", "events", "locks", "pauses", "backoffs", "failing", "due", "counted"}) do
  key[name] = KEYS[1 + i]
end
local now = redisNow()

local version = redis.pcall("GET", key.schema)
if type(version) == "string" then
  if (tonumber(version) or 0) < 2 then
    return {"not_indexed"}
  end
elseif redis.call("EXISTS", key.fence, key.seen, key.untried, key.events) > 0 then
  -- Run by a fleet before the version (see schema.ClaimVersion).
  return {"not_indexed"}
end

local length = redis.call("LLEN", list)
local after = "(" .. now
local function members(index)
  local got = redis.pcall("ZRANGEBYSCORE", key[index], after, "+inf")
  if type(got) ~= "table" or got.err then
    return {}
  end
  return got
end
local function count(index)
  local n = redis.pcall("ZCOUNT", key[index], after, "+inf")
  if type(n) ~= "number" then
    return 0
  end
  return n
end

local locked, paused = members("locks"), members("pauses")
local backoffs, failing, held = count("backoffs"), count("failing"), count("due")

-- The running and the paused are few (a fleet's runs, an operator's
-- pauses): each is looked up in the backoffs and the due index, so that
-- one that also backs off or cools down counts once, as what it is first.
local running, pausedRunning = {}, 0
for _, item in ipairs(locked) do
  running[item] = true
end
local hidden = {}
for _, item in ipairs(locked) do
  hidden[#hidden + 1] = item
end
for _, item in ipairs(paused) do
  if running[item] then
    pausedRunning = pausedRunning + 1
  else
    hidden[#hidden + 1] = item
  end
end
local backoffHidden, coolingHidden = 0, 0
local function scores(key, items, from, to)
  local got = redis.pcall("ZMSCORE", key, unpack(items, from, to))
  if type(got) == "table" and not got.err then
    return got
  end
  got = {}
  for i = from, to do
    got[#got + 1] = redis.call("ZSCORE", key, items[i])
  end
  return got
end
for from = 1, #hidden, 1000 do
  local to = math.min(from + 999, #hidden)
  local back = scores(key.backoffs, hidden, from, to)
  local due = scores(key.due, hidden, from, to)
  for i = 1, to - from + 1 do
    if back[i] and tonumber(back[i]) > now then
      backoffHidden = backoffHidden + 1
    elseif due[i] and tonumber(due[i]) > now then
      coolingHidden = coolingHidden + 1
    end
  end
end

-- The dashboard's failing also counts what backs off with no failure on
-- record (a backoff set by hand, or that outlived a success of w8y
-- --item).
local backoffNotFailing = 0
if ARGV[1] == "1" and backoffs > 0 then
  local back = members("backoffs")
  for from = 1, #back, 1000 do
    local to = math.min(from + 999, #back)
    local f = scores(key.failing, back, from, to)
    for i = 1, to - from + 1 do
      local item = back[from + i - 1]
      if not (f[i] and tonumber(f[i]) > now) and not running[item] then
        backoffNotFailing = backoffNotFailing + 1
      end
    end
  end
  -- The paused that back off are not "backoff" either: they were
  -- counted above only if not running; take out those paused.
  for _, item in ipairs(paused) do
    if not running[item] then
      local b = redis.call("ZSCORE", key.backoffs, item)
      local f = redis.call("ZSCORE", key.failing, item)
      if b and tonumber(b) > now and not (f and tonumber(f) > now) then
        backoffNotFailing = backoffNotFailing - 1
      end
    end
  end
end

local record = redis.pcall("HMGET", key.counted, "duplicates", "blocked", "invalid", "at")
if type(record) ~= "table" or record.err then
  record = {}
end
return {length, #locked, #paused, pausedRunning, backoffs - backoffHidden,
  held - backoffs - coolingHidden, failing, backoffNotFailing,
  record[1] or "", record[2] or "", record[3] or "", record[4] or "", now}
