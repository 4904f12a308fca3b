-- Finishes a run in one round trip: deletes the lock KEYS[1], but only while
-- it still holds our token ARGV[1], and records what the run's end changes.
-- With KEYS[1] alone it is a plain release, which returns 1 if the lock was
-- ours and is now deleted, else 0.
--
-- KEYS[1] the item's lock
-- KEYS[2] its cooldown key, KEYS[3] its backoff key, KEYS[4] its state hash
-- ARGV[1] our token
-- ARGV[2] the run's result: success, failure, timeout, lock_lost or
--         interrupted (see result.go)
-- ARGV[3] cooldown after a success, in milliseconds; 0 for none
-- ARGV[4] MIN of the failure backoff in milliseconds; 0 for none
-- ARGV[5] MAX of the failure backoff in milliseconds
-- ARGV[6] jitter factor for the failure delay, in [0.75, 1], drawn by the
--         client: a script must not depend on randomness
-- ARGV[7] how long the state hash lives after this run, in milliseconds
--
-- Returns {released, failures, delay, problem}: 1 if our lock was deleted
-- (0 if it was gone or someone else's), the item's consecutive failures
-- after this run (-1 if unchanged), the failure delay set in milliseconds
-- (-1 if none), and "" or the error that kept the state from being written.
--
-- The other keys are written whether or not the lock was still ours: a lost
-- lock is a failed run. All four keys must live on one server; where they
-- may not (Redis Cluster without a hash tag in the prefix), finish.go sends
-- per-key commands instead, which must leave the same result.
local released = 0
-- pcall: a key of another type is not our lock, not an error.
if redis.pcall("GET", KEYS[1]) == ARGV[1] then
  released = redis.call("DEL", KEYS[1])
end
if #KEYS < 4 then
  return released
end

-- Scheduling (issue 6): cooldown after a success; backoff and the count of
-- consecutive failures after a failure.
local token, outcome = ARGV[1], ARGV[2]
local cooldown, backoffMin, backoffMax = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local factor, stateTTL = tonumber(ARGV[6]), ARGV[7]
local failures, delay, problem = -1, -1, ""

-- pause keeps the item from running for ms milliseconds with the key `key`,
-- unless that key already keeps it longer (an operator's pause, with a
-- longer or no expiry, or a key of another type, which w8y does not own).
-- Keep in step with pause.lua.
local function pause(key, ms)
  local left = redis.call("PTTL", key)
  if left == -2 or (left >= 0 and left < ms and redis.call("TYPE", key).ok == "string") then
    redis.call("SET", key, token, "PX", ms)
  end
end

if outcome == "success" then
  local ok = redis.pcall("HSET", KEYS[4], "consecutive_failures", 0)
  if type(ok) == "table" and ok.err then
    problem = ok.err
  else
    redis.call("PEXPIRE", KEYS[4], stateTTL)
  end
  if cooldown > 0 then
    pause(KEYS[2], cooldown)
  end
elseif outcome == "failure" or outcome == "timeout" or outcome == "lock_lost" then
  local n = redis.pcall("HINCRBY", KEYS[4], "consecutive_failures", 1)
  if type(n) == "table" and n.err then
    -- Back off as after a first failure: the count is unreadable.
    problem, n = n.err, 1
  else
    failures = n
    redis.call("PEXPIRE", KEYS[4], stateTTL)
  end
  if backoffMin > 0 then
    -- The same arithmetic as backoffDelay in schedule.go.
    local nominal = math.min(backoffMax, backoffMin * 2 ^ (math.max(n, 1) - 1))
    delay = math.max(math.floor(nominal * factor), 1)
    pause(KEYS[3], delay)
  end
end

return {released, failures, delay, problem}
