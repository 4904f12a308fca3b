-- Takes the lock KEYS[1] for our token ARGV[1] and ARGV[2] milliseconds if it
-- is free, as SET NX PX does, in the same single round trip. Returns 1 when
-- taken, 0 when another holder has it, and the key's type (such as "hash")
-- when it holds something that is not a lock at all, which SET NX alone
-- would pass over without a word. Only the one key is touched, so this also
-- runs where lock keys live in other slots than the list (Redis Cluster).
if redis.call("SET", KEYS[1], ARGV[1], "NX", "PX", ARGV[2]) then
  return 1
end
local kind = redis.call("TYPE", KEYS[1]).ok
if kind ~= "string" then
  return kind
end
return 0
