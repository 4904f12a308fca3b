-- Finishes a run in one round trip: deletes our lock, but only while it
-- still holds our token, and writes what the run's end changes: the item's
-- cooldown or backoff, its state hash and the end event.
-- Given fewer than four keys (KEYS[1] alone), it is a plain release.
--
-- KEYS[1] the item's lock
-- KEYS[2] its state hash, KEYS[3] its cooldown key, KEYS[4] its backoff key
-- KEYS[5] the due index (see schema.Keys.Due), KEYS[6] its cancel request
--         (see schema.Keys.Cancel), KEYS[7] the places in use under
--         --fleet-max-running (see schema.Keys.Running), KEYS[8] the events
--         stream (optional: without it, no event is added)
-- ARGV[1] our token
-- ARGV[2] the item
-- ARGV[3] options: words of the form name=value, separated by spaces, as in
--         batch.lua; a name the script does not know is ignored. Known:
--           result=NAME     success, failure, timeout, lock_lost,
--                           interrupted or cancelled (see internal/schema)
--           failed=1        the result counts as a failure (runs.End.Failed
--                           says which do)
--           exit_code=N     the child's exit code (absent: no child ran)
--           duration_ms=N   how long the child ran
--           event=TYPE      finish, timeout, lock_lost or cancelled
--           state_ttl=MS    expiry of the state hash and the stream
--           events=N        the stream's approximate cap (MAXLEN ~ N)
--           cooldown=MS     cooldown after a success (absent or 0: none)
--           next_slot=MS    under --schedule, the slot that the cooldown
--                           lasts until, Unix milliseconds: the state
--                           hash's next_slot (absent: the field is deleted),
--                           and the cooldown's end on Redis' clock
--           backoff_min=MS  MIN of the failure backoff (absent or 0: none)
--           backoff_max=MS  MAX of the failure backoff
--           jitter=F        factor for the failure delay, in [0.75, 1], drawn
--                           by the client: a script must not depend on
--                           randomness
--           reason=1        the run was cancelled: ARGV[4] and ARGV[5] say why
--           output=1        the child's output was kept (--keep-output):
--                           ARGV[6] and ARGV[7] hold its tails
--           event_output=N  with output=1, the end event of a run that did
--                           not succeed carries the last N bytes of each
--                           tail that is not empty (stdout, stderr)
--           wake=N          where the run's end leaves something takeable
--                           now (its item due now, or a place of
--                           --fleet-max-running freed), push a token to the
--                           wake list, beside the due index (its name less
--                           "due", then "wake": see schema.Keys.Wake), to
--                           wake an idle worker, while it holds fewer than
--                           N (absent or 0: none)
--           wake_ttl=MS     the wake list's expiry after a push
--           placed=0        the run took no place of --fleet-max-running
--                           (its take had no cap): its lock is not looked
--                           for among the places (a member that another
--                           run left there is dropped by the next capped
--                           take that counts it, once its lock is gone)
-- ARGV[4] the reason that a cancelled run's request gave, and ARGV[5] who
--         asked: free text, so not among the words
-- ARGV[6] the last bytes of the child's stdout, and ARGV[7] of its stderr
--
-- As a plain release, returns 1 when our lock was deleted, 0 when it was gone
-- or someone else's. Otherwise returns {released, failures, delay, problem}:
-- released as above, the item's consecutive failures after this run (-1 if
-- unchanged), the failure delay set in milliseconds (-1 if none), and "" or
-- the error that kept the count of consecutive failures from being written.
--
-- All the keys must live on one server; where they may not (Redis Cluster
-- without a hash tag in the prefix), w8y's finish.go sends per-key commands
-- instead (count.lua, pause.lua, this script with KEYS[1] alone and the
-- record's plain commands), which must leave the same result.

-- now is Redis' clock, the fleet's one clock (internal/clock's now.lua).
local now = redisNow()

-- Release: the lock is deleted only while it still holds our token.
-- pcall: a key of another type is not our lock, not an error.
local released = 0
if redis.pcall("GET", KEYS[1]) == ARGV[1] then
  released = redis.call("DEL", KEYS[1])
end
-- The counts' indexes (see schema.Keys.Locks) live under the lock's
-- prefix, the lock key less "lock:" and the item: not declared keys, and
-- so written with pcall, as the cancel request is read in refresh.lua.
-- counted is 0 where the lock key is not named so (a test's lock).
local keyPrefix = string.sub(KEYS[1], 1, #KEYS[1] - #(ARGV[2] or "") - 5)
local counted = 0
if ARGV[2] and KEYS[1] == keyPrefix .. "lock:" .. ARGV[2] then
  counted = 1
  if released == 1 then
    redis.pcall("ZREM", keyPrefix .. "locks", ARGV[2])
  end
end
if #KEYS < 4 then
  return released
end
-- The run's place under --fleet-max-running goes with its lock, in the same
-- step, and only if the lock was still ours: a lock lost and taken again
-- by another run is that run's place now.
local token, item = ARGV[1], ARGV[2]
local opt = {}
for name, value in string.gmatch(ARGV[3] or "", "([%w_]+)=(%S*)") do
  opt[name] = value
end
local freed = 0
if released == 1 and opt.placed ~= "0" then
  freed = redis.pcall("SREM", KEYS[7], KEYS[1])
end
-- Everything below is written whether or not the lock was still ours: a
-- lost lock is a failed run.
local state = KEYS[2]
-- A primary that a failover demoted runs the script as a replica, which
-- refuses every write: redis.pcall's below would fail one by one, unseen,
-- and the run's end would be lost as though recorded. This first write
-- (the state's expiry) makes the whole script fail with READONLY instead,
-- having written nothing, so that the finish is sent again to the new
-- primary. (w8y always gives a state_ttl of a minute or more.)
local kept = 0
if tonumber(opt.state_ttl or 0) > 0 then
  kept = redis.call("PEXPIRE", state, opt.state_ttl)
end
-- was is what the existing state hash holds of the fields that the record
-- below changes by what they were: one read (HMGET) that spares a busy
-- item's finish the writes that would change nothing (the HDEL of fields
-- it does not have, the failing index's ZREM of an item that was not
-- failing) and the HINCRBY of the runs, which the record's HSET writes.
-- nil where there was no hash (or another type): the writes, as always.
local was
if kept == 1 then
  local got = redis.pcall("HMGET", state, "consecutive_failures", "runs", "last_reason", "last_stdout", "last_stderr", "next_slot")
  if type(got) == "table" and not got.err then
    was = got
  end
end
local reason, by
if opt.reason == "1" then
  reason, by = ARGV[4], ARGV[5]
end
local failures, delay, problem = -1, -1, ""

-- Schedule: the count of consecutive failures, which a failure increments
-- here and a success resets with the record below, then the cooldown after
-- a success or the backoff after a failure, which doubles with the count.
-- An interrupted run changes none of them.

-- left[i] is the time to live of KEYS[i] once this script has written it,
-- as PTTL would read it (-2: no key), where the script already knows it;
-- the due entry below reads the others.
local left = {}

-- pause keeps the item from running for ms milliseconds with the key `key`,
-- unless that key already keeps it longer (an operator's pause, with a
-- longer or no expiry, or a key of another type, which w8y does not own).
-- It returns the key's time to live after it. Keep in step with pause.lua.
local function pause(key, ms)
  -- Most often no key holds the item: one SET, which also tells.
  if redis.call("SET", key, token, "PX", ms, "NX") then
    return ms
  end
  local ttl = redis.call("PTTL", key)
  if ttl == -2 or (ttl >= 0 and ttl < ms and redis.call("TYPE", key).ok == "string") then
    redis.call("SET", key, token, "PX", ms)
    return ms
  end
  return ttl
end

-- push appends a field and its value to fields, and another pair if given.
-- lastWords is the last n bytes of s, from the start of a UTF-8
-- character: the end of a kept output that an event carries (see
-- runs.LastWords, which the per-key finish uses).
local function lastWords(s, n)
  if n <= 0 or s == nil then
    return ""
  end
  if #s > n then
    s = string.sub(s, -n)
    local i = 1
    while i <= #s and i <= 4 and s:byte(i) >= 0x80 and s:byte(i) < 0xC0 do
      i = i + 1
    end
    s = string.sub(s, i)
  end
  return s
end

local function push(fields, name, value, name2, value2)
  fields[#fields + 1] = name
  fields[#fields + 1] = value
  if name2 then
    fields[#fields + 1] = name2
    fields[#fields + 1] = value2
  end
end

-- The record's fields (see below); a success resets the count of
-- consecutive failures in the same write.
local record = {"last_end", now, "last_result", opt.result}
if released == 1 then
  left[1] = -2
end
if opt.result == "success" then
  push(record, "consecutive_failures", 0)
  -- A hash whose count is 0 or absent has no entry among the failing
  -- (a failure's finish writes both; the entry outlives no hash).
  if counted == 1 and not (was and (not was[1] or was[1] == "0")) then
    redis.pcall("ZREM", keyPrefix .. "failing", item)
  end
  local cooldown = tonumber(opt.cooldown or 0)
  -- Under --schedule the cooldown lasts until the slot itself, on Redis'
  -- clock: the host's count of milliseconds rests on its estimate of
  -- Redis' time, which a loaded host gets wrong by some milliseconds, and
  -- a cooldown that ended that much early would start the item before
  -- its slot. Where the two disagree by a second or more, the host had no
  -- estimate yet (its slot is on its own clock): its count stands.
  if cooldown > 0 and opt.next_slot then
    local untilSlot = tonumber(opt.next_slot) - now
    if math.abs(untilSlot - cooldown) < 1000 then
      cooldown = untilSlot
    end
  end
  if cooldown > 0 then
    left[3] = pause(KEYS[3], cooldown)
  end
elseif opt.failed == "1" then
  local n = redis.pcall("HINCRBY", state, "consecutive_failures", 1)
  if type(n) == "table" and n.err then
    -- Back off as after a first failure: the count is unreadable.
    problem, n = n.err, 1
  else
    failures = n
  end
  local backoffMin = tonumber(opt.backoff_min or 0)
  if backoffMin > 0 then
    -- The same arithmetic as backoffDelay in schedule.go.
    local nominal = math.min(tonumber(opt.backoff_max), backoffMin * 2 ^ (math.max(n, 1) - 1))
    delay = math.max(math.floor(nominal * tonumber(opt.jitter or 1)), 1)
    left[4] = pause(KEYS[4], delay)
  end
  -- The counts' indexes: failing until the state hash expires, backing
  -- off until the backoff does (+inf without an expiry).
  if counted == 1 then
    -- A count that could not be written (not a number) is no failure on
    -- record, as a whole read sees it.
    if failures > 0 then
      redis.pcall("ZADD", keyPrefix .. "failing", now + tonumber(opt.state_ttl or 0), item)
    end
    if left[4] and left[4] ~= -2 then
      redis.pcall("ZADD", keyPrefix .. "backoffs", left[4] == -1 and "+inf" or now + left[4], item)
    end
  end
elseif kept == 1 and counted == 1 then
  -- Neither: the state hash's expiry moved above, and its entry among the
  -- failing, if it has one, with it.
  redis.pcall("ZADD", keyPrefix .. "failing", "XX", now + tonumber(opt.state_ttl), item)
end

-- Due: when the item may run again, as its keys now say, for the idle
-- workers that read only what has come due (see look.lua): now, once the
-- lock is gone and no cooldown or backoff holds the item, or when the last
-- of them expires. A key without an expiry (an operator's pause, a lock
-- set by hand) leaves the item out of the index: the fleet's sweep over the
-- whole list notices when it goes.
local dueAt = now
for i = 1, 4 do
  if i ~= 2 then
    local ttl = left[i] or redis.call("PTTL", KEYS[i])
    if ttl == -1 then
      dueAt = nil
      break
    end
    if ttl > 0 then
      dueAt = math.max(dueAt, now + ttl)
    end
  end
end
if dueAt then
  redis.pcall("ZADD", KEYS[5], dueAt, item)
else
  redis.pcall("ZREM", KEYS[5], item)
end

-- Wake: an item due now, or a place freed, is worth a look to an idle
-- worker, which a token in the wake list wakes at once (see
-- schema.Keys.Wake). pcall: a wake key of another type wakes nobody.
local wakeMost = tonumber(opt.wake or 0)
if wakeMost > 0 and ((released == 1 and dueAt == now) or freed == 1) then
  local wake = string.sub(KEYS[5], 1, -4) .. "wake"
  local have = redis.pcall("LLEN", wake)
  if type(have) == "number" and have < wakeMost then
    redis.call("RPUSH", wake, "1")
    redis.call("PEXPIRE", wake, opt.wake_ttl)
  end
end

-- Cancel: a request aimed at our token is spent, whether or not it stopped
-- this run (one made as the child ended by itself did not): left, it would
-- stop this worker's next run of the item, which has the same token.
if redis.pcall("HGET", KEYS[6], "holder") == token then
  redis.call("DEL", KEYS[6])
end

-- Record: the state hash and the end event. pcall: a key of another type in
-- their place must not hide whether the lock was released.
-- One HSET writes them all, and one HDEL drops what this run has not to
-- say, so that an earlier run's does not seem to be this one's.
-- dropped adds a field to drop unless was shows the hash without it.
local drop = {}
local function dropped(name, at)
  if not was or was[at] then
    drop[#drop + 1] = name
  end
end
if reason then
  push(record, "last_reason", reason)
else
  dropped("last_reason", 3)
end
if opt.output == "1" then
  push(record, "last_stdout", ARGV[6], "last_stderr", ARGV[7])
else
  dropped("last_stdout", 4)
  dropped("last_stderr", 5)
end
if opt.next_slot then
  push(record, "next_slot", opt.next_slot)
else
  dropped("next_slot", 6)
end
-- The runs: counted in the record's HSET where was read a whole number
-- (or none), else by HINCRBY, which fails as it always has on a value
-- that is not one.
local runs
if was then
  if not was[2] then
    runs = 1
  elseif string.match(was[2], "^%d+$") and #was[2] < 16 then
    runs = tonumber(was[2]) + 1
  end
end
if runs then
  push(record, "runs", runs)
end
if opt.exit_code then
  push(record, "last_exit_code", opt.exit_code, "last_duration_ms", opt.duration_ms)
end
local ok = redis.pcall("HSET", state, unpack(record))
if opt.result == "success" and type(ok) == "table" and ok.err then
  problem = ok.err
end
if #drop > 0 then
  redis.pcall("HDEL", state, unpack(drop))
end
if not runs then
  redis.pcall("HINCRBY", state, "runs", 1)
end
if opt.failed == "1" then
  redis.pcall("HINCRBY", state, "failures", 1)
end
-- A hash that existed above keeps the expiry it was given there (HSET and
-- HINCRBY keep a key's expiry, and the record's fields leave it never
-- empty); one that the writes above made gets its own.
if kept ~= 1 then
  redis.pcall("PEXPIRE", state, opt.state_ttl)
end
if KEYS[8] then
  local fields = {"type", opt.event, "item", item, "holder", token, "result", opt.result}
  if opt.exit_code then
    push(fields, "exit_code", opt.exit_code, "duration_ms", opt.duration_ms)
  end
  if reason then
    push(fields, "reason", reason, "cancelled_by", by)
  end
  if opt.output == "1" and opt.result ~= "success" then
    local n = tonumber(opt.event_output or 0)
    for i, name in ipairs({"stdout", "stderr"}) do
      local tail = lastWords(ARGV[5 + i], n)
      if tail ~= "" then
        push(fields, name, tail)
      end
    end
  end
  redis.pcall("XADD", KEYS[8], "MAXLEN", "~", opt.events, "*", unpack(fields))
  redis.pcall("PEXPIRE", KEYS[8], opt.state_ttl)
end

return {released, failures, delay, problem}
