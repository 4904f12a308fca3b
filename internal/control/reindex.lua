-- w8yctl check: compares the counts' indexes (see schema.Keys.Locks) and
-- the due index with the keys of each item of a batch, and with fix=1
-- writes what the keys say where they differ. A summary that does not read
-- the list (internal/status's counts.lua) counts an item by its entries:
-- running while its entry among the locks is in the future, paused,
-- backing off and failing likewise, cooling while its due entry is in the
-- future and nothing else holds it. Its entries drift from its keys only
-- where something other than w8y wrote the keys (a cooldown or a lock set
-- or deleted by hand, an item removed by an outside LREM while something
-- held it).
--
-- KEYS[1] the list, KEYS[2..6] the indexes: locks, pauses, backoffs,
--         failing, due; then for each item its lock, pause, backoff,
--         cooldown and state keys. Declared, so that a Cluster whose slot
--         moves refuses the call (TRYAGAIN, which w8yctl waits out) rather
--         than the script meeting a key gone to another node.
-- ARGV[1] "1" to write what differs, "0" to report it only
-- ARGV[2..] the items, in the order of their keys
--
-- Returns the items whose entries differed from their keys (each once,
-- in the order given), but those whose keys check reports under a kind of
-- their own (of another type, a lock without expiry), whose entries fix=1
-- writes all the same.
local now = redisNow()
local fix = ARGV[1] == "1"
local index = {locks = KEYS[2], pauses = KEYS[3], backoffs = KEYS[4], failing = KEYS[5]}
local due = KEYS[6]

-- ends is when a key with time to live ttl (PTTL's reply) ends: nil for
-- no key, +inf for one without expiry.
local function ends(ttl)
  -- -2: no key. 0: a key that expires this very millisecond, which holds
  -- nothing any more (a take at this moment would find it gone a moment
  -- later), and whose entries a finish wrote for this moment too.
  if ttl == -2 or ttl == 0 then
    return nil
  end
  if ttl == -1 then
    return math.huge
  end
  return now + ttl
end

-- agrees reports whether an index's score (ZSCORE's reply) says what want
-- (a key's end, or nil) says: an entry in the future while the key lasts,
-- ending within a second of it, and none in the future without it.
local function agrees(score, want)
  local got = score and tonumber(score)
  if not want then
    return not got or got <= now
  end
  if not got or got <= now then
    return false
  end
  if want == math.huge or got == math.huge then
    return want == got
  end
  return math.abs(got - want) <= 1000
end

local function write(index, item, want)
  if want then
    redis.call("ZADD", index, want == math.huge and "+inf" or want, item)
  else
    redis.call("ZREM", index, item)
  end
end

local drifted = {}
for i = 2, #ARGV do
  local item = ARGV[i]
  local at0 = 6 + (i - 2) * 5
  local keyOf = {["lock:"] = KEYS[at0 + 1], ["pause:"] = KEYS[at0 + 2], ["backoff:"] = KEYS[at0 + 3],
    ["cooldown:"] = KEYS[at0 + 4], ["state:"] = KEYS[at0 + 5]}
  -- reported is false where check reports the item's keys under a kind of
  -- their own (a key of another type, a lock without expiry): its entries
  -- are written all the same, but their drift is not reported twice.
  local reported = true
  local function held(infix, want)
    local key = keyOf[infix]
    local at = ends(redis.call("PTTL", key))
    if at and redis.call("TYPE", key).ok ~= want then
      reported = false
    end
    return at
  end
  local lockKey = keyOf["lock:"]
  local lock = held("lock:", "string")
  if lock == math.huge then
    -- A lock without expiry is no take's (check reports it as such):
    -- counted by no entry, which the DEL that check prints for it leaves
    -- right.
    reported, lock = false, nil
  end
  if lock and redis.call("TYPE", lockKey).ok ~= "string" then
    -- Not a lock, and not w8y's: the item is blocked, which a whole read
    -- counts.
    lock = nil
  end
  local pause = held("pause:", "hash")
  local backoff = held("backoff:", "string")
  local cooldown = held("cooldown:", "string")
  local failing
  local state = keyOf["state:"]
  -- HMGET, which the operators' ACL rule has (docs/recipes.md), not HGET.
  local count = redis.pcall("HMGET", state, "consecutive_failures")
  if type(count) == "table" and type(count[1]) == "string" and (tonumber(count[1]) or 0) > 0 then
    failing = ends(redis.call("PTTL", state))
  end
  local wrong = false
  local want = {locks = lock, pauses = pause, backoffs = backoff, failing = failing}
  for _, name in ipairs({"locks", "pauses", "backoffs", "failing"}) do
    local score = redis.call("ZSCORE", index[name], item)
    local ok = agrees(score, want[name])
    if name == "failing" and not ok and want.failing and score then
      -- A take pushes the state hash's expiry back, and the finish its
      -- entry: an entry in the future agrees.
      ok = tonumber(score) > now
    end
    if not ok then
      wrong = true
      if fix then
        write(index[name], item, want[name])
      end
    end
  end
  -- The due entry: in the future while a cooldown or a backoff holds the
  -- item (until the last of its blockers ends), not while nothing holds
  -- it; while only a lock or a pause holds it, the summary does not read
  -- it.
  local score = redis.call("ZSCORE", due, item)
  local at = score and tonumber(score)
  -- A due entry that says "now" for an item held a moment longer (its
  -- cooldown's key expiring within a second of its entry's score, as the
  -- indexes' scores are judged) is no drift: the look it brings finds the
  -- item free a moment later, or writes its entry again.
  local hold = math.max(cooldown or 0, backoff or 0)
  if cooldown or backoff then
    if not at or (at <= now and hold > now + 1000) then
      wrong = true
      if fix then
        local last = math.max(cooldown or 0, backoff or 0, lock or 0, pause or 0)
        redis.call("ZADD", due, last == math.huge and "+inf" or last, item)
      end
    end
  elseif not lock and not pause and at and at > now then
    wrong = true
    if fix then
      -- Due now, as the fleet's sweep makes an entry whose blockers are
      -- gone.
      redis.call("ZADD", due, now, item)
    end
  end
  if wrong and reported then
    drifted[#drifted + 1] = item
  end
end
return drifted
