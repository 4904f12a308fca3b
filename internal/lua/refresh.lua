-- Extends the lock KEYS[1] to ARGV[2] milliseconds, but only while it still
-- holds our token ARGV[1]. Returns 1 when extended, 0 when the lock is gone or
-- belongs to someone else.
-- pcall: a key of another type is not our lock, not an error.
if redis.pcall("GET", KEYS[1]) == ARGV[1] then
  return redis.call("PEXPIRE", KEYS[1], ARGV[2])
end
return 0
