-- Makes an item that never ran run now rather than wait for its first slot
-- under a schedule (see internal/take's settings.lua): where its state
-- hash KEYS[1] holds neither last_start nor next_slot, next_slot 0 says
-- that its slot has come. A hash made here expires after ARGV[1]
-- milliseconds, until a take records the run and sets the workers' own
-- expiry. The path per key of w8yctl run-now; control.lua does the same.
local seen = redis.pcall("HMGET", KEYS[1], "last_start", "next_slot")
if type(seen) == "table" and not seen.err and not seen[1] and not seen[2] then
  redis.call("HSET", KEYS[1], "next_slot", 0)
  if redis.call("PTTL", KEYS[1]) == -1 then
    redis.call("PEXPIRE", KEYS[1], ARGV[1])
  end
  return 1
end
return 0
