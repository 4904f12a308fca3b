-- Rotates the circular list KEYS[1] and tries each candidate's lock for a
-- whole batch of candidates in one call, leaving Redis exactly as w8y's
-- per-candidate path does with an LMOVE and a SET NX per candidate. A
-- candidate is eligible when its lock is free and it has no cooldown key
-- (ARGV[1] .. "cooldown:" .. item), backoff key (ARGV[1] .. "backoff:" ..
-- item) or pause key (ARGV[1] .. "pause:" .. item): whoever set them, w8y
-- or an operator.
--
-- ARGV[1] key prefix: a candidate's lock is ARGV[1] .. "lock:" .. item
-- ARGV[2] our token
-- ARGV[3] lock TTL in milliseconds
-- ARGV[4] candidates left in this pass, or -1 to start a pass: the length of
--         the list now, which saves the client a round trip for LLEN
-- ARGV[5] longest item the child can be given
-- ARGV[6] options: words of the form name=value, separated by spaces, read
--         into opt below; a name the script does not know is ignored. They
--         share one argument because Redis refuses commands of more than 10
--         parts before AUTH (see clipLen), and EVALSHA with one key and six
--         arguments is exactly 10. Known options:
--           batch=N      most candidates to look at in this call
--           state_ttl=MS record a take in the item's state hash, which
--                        then expires after MS (absent: record nothing)
--           events=N     add a start event to the events stream, capped
--                        at about N entries (absent or 0: no event)
--           start=N      the list's length when the pass started: a
--                        call that ends the pass without a take marks
--                        that many items tried (see look.lua's "seen")
--           cap=N        --fleet-max-running: take only while fewer than N
--                        runs of the fleet hold a place (see place.lua),
--                        and take a place with the lock
--           rate=N/MS    --fleet-rate: take only while fewer than N starts
--                        of the fleet came in the last MS milliseconds (see
--                        rate.lua), and count this one with the lock
--           first=all|own  an item never run waits for its first slot
--                        (see settings.lua's takenSettings)

--
-- Returns {left, taken, length, fence, settings, now, head1, size1, head2,
-- size2, ...}: the candidates left in the pass after this call (0 when it is
-- over), the item whose lock is now ours or nil, the list's length when
-- this call read it (at the start of a pass) or -1, the take's fencing
-- token (0 without a take; absent when the call ends early; -1 when cap=N
-- found every place in use, and the call looked at no candidate), the
-- taken item's settings and whether it is fresh (settings.lua's
-- takenSettings; false without a take), Redis' clock at the take (Unix
-- milliseconds: the run's start as last_start records it and a schedule
-- counts it), and for each item skipped because
-- the child cannot be given it (empty, too long, holding a NUL byte) its
-- first clipLen bytes and its size,
-- then for each item whose lock key was found holding another type (a hash,
-- say) its first clipLen bytes and that type's name.
--
-- An item's lock, cooldown, backoff and state keys and the events stream are
-- not declared in KEYS: this is only correct where they live on the same
-- server as the list (standalone Redis, or a prefix with a hash tag
-- on Redis Cluster), which the client checks before using this script.
local find, sub = string.find, string.sub
local list = KEYS[1]
local keyPrefix, token, ttl = ARGV[1], ARGV[2], ARGV[3]
local prefix = keyPrefix .. "lock:"
local coolPrefix, backPrefix = keyPrefix .. "cooldown:", keyPrefix .. "backoff:"
local pausePrefix = keyPrefix .. "pause:"
local opt = {}
for name, value in string.gmatch(ARGV[6] or "", "([%w_]+)=(%S*)") do
  opt[name] = value
end
-- now is Redis' clock, the fleet's one clock (internal/clock's now.lua).
local now = redisNow()
local left = tonumber(ARGV[4])
local maxLen = tonumber(ARGV[5])
-- clipLen is w8y's clipLen, how much of a skipped item a warning shows. It
-- is not an argument because Redis refuses commands of more than 10 parts
-- from a client that has not authenticated, which would hide the NOAUTH
-- error behind a protocol error.
local clipLen = 64
local seenKey = keyPrefix .. "seen"

-- length is the list's length when this call knows it.
local length
if left < 0 then
  -- pcall, then return the error: a key of the wrong type reaches the client
  -- as Redis' own WRONGTYPE error, as it would without a script.
  left = redis.pcall("LLEN", list)
  if type(left) == "table" then
    return left
  end
  length = left
  -- A list that no worker has tried yet: this pass is the first to, and
  -- the fleet's marks start here, as a look starts them (see look.lua's
  -- "untried"), so that status counts what the pass has yet to reach.
  if length > 0 and not redis.pcall("GET", keyPrefix .. "untried") then
    redis.pcall("SET", keyPrefix .. "untried", length)
    redis.pcall("SET", seenKey, length)
  end
end
local want = math.min(left, tonumber(opt.batch))
if want <= 0 then
  return {0, false, length or -1}
end
-- A capped take whose places are all in use looks at no candidate: the
-- list is left as it was, and the caller waits as an idle worker does.
local cap, full, err = placesFull(keyPrefix, opt)
if err then
  return err
elseif full then
  return {0, false, length or -1, -1, false, now}
end
-- So does one that --fleet-rate refuses (see rate.lua).
local rateN, ratePer, rateIsFull, rateErr = ratesFull(keyPrefix, opt, now)
if rateErr then
  return rateErr
elseif rateIsFull then
  return {0, false, length or -1, -2, false, now}
end

-- The script runs atomically, so reading the candidates, trying their locks
-- and then rotating the list by as many as were looked at leaves the list as
-- the same number of LMOVEs would, with a handful of calls instead of two per
-- candidate.
local items = redis.pcall("LRANGE", list, 0, want - 1)
if items.err then
  return items
end
local n = #items
if n == 0 then
  -- The list is empty or gone, which ends the pass.
  return {0, false, length or -1}
end

-- Items that the child cannot be given (empty, too long, holding a NUL byte)
-- are skipped, but rotated like any other candidate.
local keys, at, bad, cools, good = {}, {}, {}, {}, {}
local nkeys, nbad = 0, 0
for i = 1, n do
  local item = items[i]
  local size = #item
  if size == 0 or size > maxLen or find(item, "\0", 1, true) then
    nbad = nbad + 1
    bad[nbad] = i
  else
    nkeys = nkeys + 1
    cools[nkeys] = coolPrefix .. item
    at[nkeys] = i
    good[nkeys] = item
  end
end
-- The candidates' entries in the due index, for those passed over below,
-- read before anything is written (see index.lua's indexPassed).
local scores = scoresOf(keyPrefix .. "due", good)

-- looked is how many candidates this call rotated: up to the one taken, or
-- all it wanted. When the list is shorter than that (someone removed items
-- during the pass), LMOVE would have gone round it again, where every lock
-- is as taken as the first time round.
local looked, took = want, false
local wrong, nwrong = {}, 0
-- A candidate is passed by when its lock, cooldown, backoff or pause key
-- exists. The cooldown is read first, for the whole batch at once: a list
-- that a fleet has run is mostly items that cool down (a lock lasts as long
-- as a run; a cooldown, between runs), and so is most of a batch that
-- takes nothing. A value read means that the key exists, and the candidate
-- is passed by, as the exact check below would say; no value (no key, or
-- a key of another type) leaves it to the locks and that check. So a batch
-- of cooling items costs one MGET, not a call per candidate.
--
-- The list is named in MGET and EXISTS too, though it is known to exist:
-- on Redis Cluster, while the slot moves to another node, the node that
-- imports it runs a command that names several keys only when all of them
-- have arrived, and refuses it otherwise. With a single key it would run,
-- find a lock or cooldown missing because it has not arrived yet, and take
-- the item that its holder still runs on the other node.
local cooling = nkeys > 0 and redis.call("MGET", list, unpack(cools, 1, nkeys)) or {}
local rest, nrest = {}, 0
for j = 1, nkeys do
  if not cooling[j + 1] then
    nrest = nrest + 1
    rest[nrest] = j
    keys[nrest] = prefix .. items[at[j]]
  end
end
-- Of the rest, most batches of a busy list find every lock taken: EXISTS
-- tells so without sending the locks' values back. A lock that holds our
-- own token is taken too, as it is for SET NX: it is one that another
-- child of this process (--parallel) runs, or comes from a call whose
-- reply was lost, and expires.
if nrest > 0 and redis.call("EXISTS", list, unpack(keys, 1, nrest)) < nrest + 1 then
  -- MGET reads no value for a key of another type: SET NX then fails, and
  -- the candidate counts as locked, as it does without a script.
  local values = redis.call("MGET", unpack(keys, 1, nrest))
  for r = 1, nrest do
    local j = rest[r]
    local item = items[at[j]]
    -- A free lock is checked exactly for a cooldown, backoff or pause, in
    -- the same call: an item that waits out any of them is passed by as a
    -- locked one is.
    if not values[r] and redis.call("EXISTS", list, cools[j], backPrefix .. item, pausePrefix .. item) == 1 then
      if redis.call("SET", keys[r], token, "NX", "PX", ttl) then
        looked, took = at[j], true
        break
      end
      -- The key exists but holds no string: something other than a lock,
      -- which w8y can neither take nor wait out. Tell the client.
      nwrong = nwrong + 1
      wrong[nwrong] = r
    end
  end
end

local reply = {left - looked, false, length or -1, 0, false, now}
-- fresh: the item taken waits for its first slot, and runs not now (see
-- settings.lua): its start is not recorded.
local fresh = false
if took then
  reply[2] = items[looked]
  reply[5] = takenSettings(keyPrefix, items[looked], opt)
  fresh = reply[5][1] == 1
  -- Fence: every take increments the list's token (ARGV[1] .. "fence"),
  -- which the child gets as W8Y_FENCE. pcall: a key of another type gives
  -- no token (0, which the client warns of) rather than failing a take
  -- whose lock is ours already.
  local fence = redis.pcall("INCR", keyPrefix .. "fence")
  if type(fence) == "number" then
    reply[4] = fence
  end
  takePlace(keyPrefix .. "running", keyPrefix .. "fleet-max-running", prefix .. items[looked], cap)
  -- An item that waits for its first slot starts nothing: the fleet's
  -- rate does not count it.
  if not fresh then
    takeRate(keyPrefix .. "starts", keyPrefix .. "fleet-rate", rateN, ratePer, now)
  end
end

-- A list shorter than the candidates wanted was read whole. Going round a
-- list whole leaves it as it was, which spares an idle pass over a short
-- list any write.
if n < want then
  length = n
end
local turn = looked
-- listLen is the list's length after the rotation, once known.
local listLen = length
if length then
  turn = looked % length
end
if turn > 0 then
  -- RPUSH before LTRIM, so that the list never empties and keeps any
  -- expiry set on it.
  listLen = redis.call("RPUSH", list, unpack(items, 1, turn)) - turn
  redis.call("LTRIM", list, turn, -1)
  -- The items appended after what the fleet has tried (see look.lua's
  -- "seen"), if there are any, moved turn places towards the head, and the
  -- mark moves with them: the tried items rotated behind them are tried
  -- again by a look, rather than an appended item left to a sweep. With
  -- none, every item stays tried.
  local seen = tonumber(redis.pcall("GET", seenKey))
  if seen and seen < listLen then
    redis.pcall("SET", seenKey, math.max(seen - turn, 0))
  end
end
-- The items at the head that no worker had tried (see look.lua's
-- "untried") are fewer by those this call looked at.
local untried = tonumber(redis.pcall("GET", keyPrefix .. "untried"))
if untried and untried > 0 then
  redis.pcall("SET", keyPrefix .. "untried", math.max(untried - looked, 0))
end
-- A pass that went round the whole list without a take tried every item
-- that the list held when it started (opt.start), and left them in their
-- order at the head; the items after them were appended since.
if not took and left - looked <= 0 and opt.start then
  local seen = tonumber(redis.pcall("GET", seenKey)) or 0
  local start = math.min(tonumber(opt.start), listLen or redis.call("LLEN", list))
  if seen < start then
    redis.pcall("SET", seenKey, start)
  end
end
-- Every candidate passed over was held (the first free one is taken): each
-- gets an entry in the due index for when its blockers expire, where it has
-- none, so that the fleet finds it again then (see index.lua).
local passed, passedScores = {}, {}
for j = 1, nkeys do
  local i = at[j]
  if i <= looked and not (took and i == looked) then
    passed[#passed + 1] = good[j]
    passedScores[#passed] = scores[j]
  end
end
indexPassed(keyPrefix, passed, passedScores, now)

-- Due: the item may run again when its lock expires, if its holder dies
-- and stops refreshing it; an idle worker that looks then finds it still
-- locked while it runs, and looks again when the lock would next expire
-- (see look.lua). pcall: a key of another type must not fail the take.
if took then
  redis.pcall("ZADD", keyPrefix .. "due", now + tonumber(ttl), items[looked])
  countTake(keyPrefix, items[looked], now, ttl)
end

-- Record: a take is recorded in the item's state hash and
-- as a start event, in the same call. It comes after the rotation, and pcall
-- keeps a key of another type in their place from failing the take: a run
-- must never depend on its record.
if took and not fresh and opt.state_ttl then
  local state = keyPrefix .. "state:" .. items[looked]
  redis.pcall("HSET", state, "last_start", now, "last_holder", token, "last_fence", reply[4])
  redis.pcall("PEXPIRE", state, opt.state_ttl)
end
if took and not fresh and tonumber(opt.events or 0) > 0 then
  local events = keyPrefix .. "events"
  redis.pcall("XADD", events, "MAXLEN", "~", opt.events, "*", "type", "start", "item", items[looked], "holder", token, "fence", reply[4])
  redis.pcall("PEXPIRE", events, opt.state_ttl)
end

for _, i in ipairs(bad) do
  if i > looked then
    break
  end
  reply[#reply + 1] = sub(items[i], 1, clipLen)
  reply[#reply + 1] = #items[i]
end
for _, r in ipairs(wrong) do
  reply[#reply + 1] = sub(items[at[rest[r]]], 1, clipLen)
  reply[#reply + 1] = redis.call("TYPE", keys[r]).ok
end
return reply
