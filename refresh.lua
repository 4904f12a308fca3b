-- Extends the lock KEYS[1] to ARGV[2] milliseconds, but only while it still
-- holds our token ARGV[1], and reports a cancel request aimed at our token,
-- so that the holder notices one without a round trip of its own.
--
-- KEYS[1] the item's lock
-- ARGV[1] our token
-- ARGV[2] the lock's new time to live, in milliseconds
-- ARGV[3] the item's cancel request (optional; see schema.Keys.Cancel),
--         in the lock's slot where the keys are colocated
-- ARGV[4] and ARGV[5], with ARGV[3]: the counts' index of locks (see
--         schema.Keys.Locks) and the item, whose entry moves to the
--         lock's new expiry; read with pcall, as the request is
--
-- The cancel request is not a declared key, and is read with pcall after
-- the lock is extended: while a Cluster reshard moves the lock's slot,
-- Redis refuses a call of two keys that are not both on the node yet
-- (TRYAGAIN), which a lock whose cancel request does not exist (the usual
-- case) would meet on every refresh until its lease ran out, and the
-- child with it. Read from the script, a request that is not on this node
-- yet is an error that pcall catches: the lock is extended all the same,
-- and the request read at a later refresh.
--
-- Returns 0 when the lock is gone or belongs to someone else. Otherwise
-- returns PEXPIRE's 1, or, when ARGV[3] holds a request whose holder is
-- our token, {1, reason, by, at, as_failure} from that request.
-- pcall: a key of another type is not our lock, nor a request, not an error.
-- now is Redis' clock (clock.Lua's redisNow, which the Go that loads this
-- script puts before it), for the index's entry, read before any write.
local now = 0
if ARGV[4] then
  now = redisNow()
end
if redis.pcall("GET", KEYS[1]) ~= ARGV[1] then
  return 0
end
local extended = redis.call("PEXPIRE", KEYS[1], ARGV[2])
if ARGV[4] then
  -- The counts' index of locks moves with the lock (XX: an item that
  -- w8yctl remove took out of the index while it ran stays out).
  redis.pcall("ZADD", ARGV[4], "XX", now + tonumber(ARGV[2]), ARGV[5])
end
if ARGV[3] then
  local req = redis.pcall("HMGET", ARGV[3], "holder", "reason", "by", "at", "as_failure")
  if type(req) == "table" and not req.err and req[1] == ARGV[1] then
    return {extended, req[2] or "", req[3] or "", req[4] or "", req[5] or ""}
  end
end
return extended
