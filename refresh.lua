-- Extends the lock KEYS[1] to ARGV[2] milliseconds, but only while it still
-- holds our token ARGV[1], and reports a cancel request aimed at our token,
-- so that the holder notices one without a round trip of its own.
--
-- KEYS[1] the item's lock
-- KEYS[2] the item's cancel request (optional; see schema.Keys.Cancel)
--
-- Returns 0 when the lock is gone or belongs to someone else. Otherwise
-- returns PEXPIRE's 1, or, when KEYS[2] holds a request whose holder is
-- our token, {1, reason, by, at, as_failure} from that request.
-- pcall: a key of another type is not our lock, nor a request, not an error.
if redis.pcall("GET", KEYS[1]) ~= ARGV[1] then
  return 0
end
local extended = redis.call("PEXPIRE", KEYS[1], ARGV[2])
if KEYS[2] then
  local req = redis.pcall("HMGET", KEYS[2], "holder", "reason", "by", "at", "as_failure")
  if type(req) == "table" and req[1] == ARGV[1] then
    return {extended, req[2] or "", req[3] or "", req[4] or "", req[5] or ""}
  end
end
return extended
