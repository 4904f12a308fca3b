-- Ends a run in one round trip: releases our lock and records how the run
-- ended in the item's state hash and the events stream.
--
-- KEYS[1] the lock
-- KEYS[2] the item's state hash (optional: without it, nothing is recorded)
-- KEYS[3] the events stream (optional: without it, no event is added)
-- ARGV[1] our token
-- ARGV[2] the item
-- ARGV[3] options: words of the form name=value, separated by spaces, as in
--         scan.lua; a name the script does not know is ignored. Known:
--           now=MS          the end of the run, Unix milliseconds
--           result=NAME     success, failure, timeout, lock_lost, interrupted
--           failed=1        the result counts as a failure
--           exit_code=N     the child's exit code (absent: no child ran)
--           duration_ms=N   how long the child ran
--           event=TYPE      finish, timeout or lock_lost
--           state_ttl=MS    expiry of the state hash and the stream
--           events=N        the stream's approximate cap (MAXLEN ~ N)
--
-- Returns 1 when our lock was deleted, 0 when it was gone or someone else's.
--
-- Where w8y cannot run one script on all three keys (Redis Cluster without a
-- hash tag in the prefix), it sends only KEYS[1] and writes the state and
-- the event with plain commands in the same pipeline (see record.go).

-- Release: the lock is deleted only while it still holds our token.
-- pcall: a key of another type is not our lock, not an error.
local released = 0
if redis.pcall("GET", KEYS[1]) == ARGV[1] then
  released = redis.call("DEL", KEYS[1])
end

local opt = {}
for name, value in string.gmatch(ARGV[3] or "", "([%w_]+)=(%S*)") do
  opt[name] = value
end

-- Observability (issue 7): the state hash and the end event. They are
-- written even when the lock was lost, which is a failed run. pcall: a key of
-- another type in their place must not hide whether the lock was released.
if KEYS[2] then
  local state = KEYS[2]
  redis.pcall("HSET", state, "last_end", opt.now, "last_result", opt.result)
  if opt.exit_code then
    redis.pcall("HSET", state, "last_exit_code", opt.exit_code, "last_duration_ms", opt.duration_ms)
  end
  redis.pcall("HINCRBY", state, "runs", 1)
  if opt.failed == "1" then
    redis.pcall("HINCRBY", state, "failures", 1)
    redis.pcall("HINCRBY", state, "consecutive_failures", 1)
  elseif opt.result == "success" then
    redis.pcall("HSET", state, "consecutive_failures", 0)
  end
  redis.pcall("PEXPIRE", state, opt.state_ttl)
end
if KEYS[3] then
  local fields = {"type", opt.event, "item", ARGV[2], "holder", ARGV[1], "result", opt.result}
  if opt.exit_code then
    fields[#fields + 1] = "exit_code"
    fields[#fields + 1] = opt.exit_code
    fields[#fields + 1] = "duration_ms"
    fields[#fields + 1] = opt.duration_ms
  end
  redis.pcall("XADD", KEYS[3], "MAXLEN", "~", opt.events, "*", unpack(fields))
  redis.pcall("PEXPIRE", KEYS[3], opt.state_ttl)
end

return released
