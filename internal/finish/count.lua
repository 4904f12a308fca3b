-- Counts a run's end in the item's state hash KEYS[1], and only there, for
-- where an item's keys live on different servers (Redis Cluster):
-- finish.lua does the same in its schedule block. ARGV[1] "success" sets
-- consecutive_failures to 0, "failure" adds one to it; ARGV[2] is how long
-- the hash lives after this run, in milliseconds. Returns the count, or
-- Redis' error when the key holds another type or the count is not a
-- number, in which case nothing is written.
local n
if ARGV[1] == "success" then
  n = redis.pcall("HSET", KEYS[1], "consecutive_failures", 0)
  if not (type(n) == "table" and n.err) then
    n = 0
  end
else
  n = redis.pcall("HINCRBY", KEYS[1], "consecutive_failures", 1)
end
if type(n) == "table" and n.err then
  return n
end
redis.call("PEXPIRE", KEYS[1], ARGV[2])
return n
