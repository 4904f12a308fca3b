-- Sets or unsets items' own settings (w8yctl set, w8yctl unset) in one
-- atomic call, so that a command that is refused changes nothing and one
-- that is accepted is seen whole by every worker's next take.
--
-- KEYS[1] the list, KEYS[2] the events stream (optional, as control.lua's)
-- ARGV[1] the verb, set or unset, which is also the type of the event
-- ARGV[2] key prefix: an item's settings are ARGV[2] .. "settings:" .. item
-- ARGV[3] who gives the command (user@host)
-- ARGV[4] N, how many settings follow: set gives N pairs of field and
--         value (checked by the client); unset gives N pairs of field and
--         "" (N = 0: every setting of the item)
-- ARGV[5 ... 4+2N] the settings, then the items, each once
--
-- A cooldown and a schedule are alternatives: setting one removes the
-- other. Each item gets an event of type the verb with the item, who
-- (by), and each setting it set with its value, or that it removed with
-- "" (unset records only where it removed one).
--
-- Returns {"ok", item1, changed1, cooldown1, ...}: for each item, how many
-- fields the command wrote or removed, and the time left to its cooldown
-- or backoff key as PTTL reads it (-2: none), which a changed setting does
-- not shorten: it applies from the item's next run. Or, changing nothing,
-- {"no_list"}, {"wrong_type", type} or {"not_in_list", item}, as
-- control.lua's, or {"wrong_settings_type", item, type} when an item's
-- settings key holds something other than a hash.
local list, events = KEYS[1], KEYS[2]
local verb, prefix, by = ARGV[1], ARGV[2], ARGV[3]
local n = tonumber(ARGV[4])

local kind = redis.call("TYPE", list).ok
if kind == "none" then
  return {"no_list"}
end
if kind ~= "list" then
  return {"wrong_type", kind}
end
local fields, values = {}, {}
for i = 1, n do
  fields[i], values[i] = ARGV[3 + 2 * i], ARGV[4 + 2 * i]
end
local items = {}
for i = 5 + 2 * n, #ARGV do
  items[#items + 1] = ARGV[i]
end
for _, item in ipairs(items) do
  if not redis.call("LPOS", list, item) then
    return {"not_in_list", item}
  end
  -- Checked before anything is written: a script is not undone by an
  -- error, and an item's settings key of another type would end it with
  -- the items before it changed.
  local t = redis.call("TYPE", prefix .. "settings:" .. item).ok
  if t ~= "hash" and t ~= "none" then
    return {"wrong_settings_type", item, t}
  end
end

-- waiting is how long item's cooldown or backoff key keeps it yet, or -2.
local function waiting(item)
  local most = -2
  for _, key in ipairs({prefix .. "cooldown:" .. item, prefix .. "backoff:" .. item}) do
    local ttl = redis.pcall("PTTL", key)
    if type(ttl) == "number" and (ttl == -1 or (most ~= -1 and ttl > most)) then
      most = ttl
    end
  end
  return most
end

local reply = {"ok"}
for _, item in ipairs(items) do
  local key = prefix .. "settings:" .. item
  local event, changed = {}, 0
  if verb == "set" then
    local kv = {}
    for i = 1, n do
      kv[#kv + 1] = fields[i]
      kv[#kv + 1] = values[i]
      event[#event + 1] = fields[i]
      event[#event + 1] = values[i]
      if fields[i] == "cooldown" then
        redis.call("HDEL", key, "schedule")
      elseif fields[i] == "schedule" then
        redis.call("HDEL", key, "cooldown")
      end
    end
    redis.call("HSET", key, unpack(kv))
    changed = n
  elseif verb == "unset" then
    local gone = {}
    if n == 0 then
      gone = redis.call("HKEYS", key)
    else
      for i = 1, n do
        if redis.call("HEXISTS", key, fields[i]) == 1 then
          gone[#gone + 1] = fields[i]
        end
      end
    end
    if #gone > 0 then
      changed = redis.call("HDEL", key, unpack(gone))
    end
    for _, field in ipairs(gone) do
      event[#event + 1] = field
      event[#event + 1] = ""
    end
  else
    return redis.error_reply("unknown verb " .. verb)
  end
  if events and changed > 0 then
    redis.pcall("XADD", events, "NOMKSTREAM", "*", "type", verb, "item", item, "by", by, unpack(event))
  end
  reply[#reply + 1] = item
  reply[#reply + 1] = changed
  reply[#reply + 1] = waiting(item)
end
return reply
