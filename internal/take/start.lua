-- The checks of a worker's start, made by its first look in the same call
-- (look.lua calls startChecks once it has read the list's length), so that
-- a one-shot run, whose first take is most often its only one, costs Redis
-- no round trip for them (see Taker.Start). Each is asked by a word of the
-- look's options:
--
--   needs=1   the server must keep w8y's keys until w8y deletes them or
--             they expire: a replica, or a maxmemory with a policy other
--             than noeviction, is refused (needs.go says why, and words
--             the refusal after reading INFO itself)
--   schema=N  the list's keys must be kept in layout N or an earlier one
--             (see schema.ClaimVersion): a later version, or a value that
--             is not one, is refused; where none is recorded and the list
--             exists, N is
--
-- startChecks returns nil where the start may go on, or the error reply
-- that refuses it, having written nothing: "W8YNEEDS <why>" or
-- "W8YSCHEMA <what the version key holds>".
local function startChecks(keyPrefix, length, opt)
  if opt.needs == "1" then
    local repl = redis.pcall("INFO", "replication")
    if type(repl) ~= "string" then
      return redis.error_reply("W8YNEEDS INFO refused")
    end
    if string.find(repl, "role:slave", 1, true) then
      return redis.error_reply("W8YNEEDS a replica")
    end
    local mem = redis.pcall("INFO", "memory")
    if type(mem) ~= "string" then
      return redis.error_reply("W8YNEEDS INFO refused")
    end
    local maxmemory = tonumber(string.match(mem, "\nmaxmemory:(%d+)")) or 0
    local policy = string.match(mem, "\nmaxmemory_policy:([%w%-]+)") or "noeviction"
    if maxmemory > 0 and policy ~= "noeviction" then
      return redis.error_reply("W8YNEEDS may evict")
    end
  end
  if opt.schema then
    local key = keyPrefix .. "schema"
    local found = redis.pcall("GET", key)
    if type(found) == "table" then
      return redis.error_reply("W8YSCHEMA a key of another type")
    elseif found then
      local n = tonumber(found)
      if not n or n > tonumber(opt.schema) or n ~= math.floor(n) then
        return redis.error_reply("W8YSCHEMA " .. found)
      end
    elseif length > 0 then
      redis.call("SET", key, opt.schema, "NX")
    end
  end
  return nil
end
