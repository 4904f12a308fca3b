-- Deletes the lock KEYS[1], but only while it still holds our token ARGV[1].
-- Returns 1 when deleted, 0 when the lock is gone or belongs to someone else.
-- pcall: a key of another type is not our lock, not an error.
if redis.pcall("GET", KEYS[1]) == ARGV[1] then
  return redis.call("DEL", KEYS[1])
end
return 0
