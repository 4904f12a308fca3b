-- Reads the next count items of the circular list KEYS[1] for w8y --status,
-- going on from the last item that the previous call returned.
--
-- Workers rotate the list while --status reads it, a batch at a time, so an
-- item's index changes between two calls; but rotation never changes the
-- items' circular order. So each call finds the item it should go on from
-- (where the client expects it, else with LPOS) and reads the count items
-- that follow it round the circle, wrapping past the tail to the head.
--
-- ARGV[1] "1" if ARGV[2] and ARGV[3] name the last item read, "0" to start
--         at the head
-- ARGV[2] the last item read
-- ARGV[3] the index where the client expects it
-- ARGV[4] count: how many items to read
--
-- Returns {length, from, item1, item2, ...}: the list's length now, the
-- index of the first item returned, and the items.
-- An anchor that was removed meanwhile is passed over from where it was
-- expected, so a list that others edit may show an item twice or miss one;
-- the client drops repeats.
local list = KEYS[1]
local n = redis.pcall("LLEN", list)
if type(n) == "table" then
  -- WRONGTYPE reaches the client as Redis' own error.
  return n
end
if n == 0 then
  return {0}
end
local count = math.min(tonumber(ARGV[4]), n)
local from = 0
if ARGV[1] == "1" then
  local at = tonumber(ARGV[3]) % n
  if redis.call("LINDEX", list, at) ~= ARGV[2] then
    -- Rotated or edited since the last call: LPOS costs a pass over the
    -- list, which Redis runs at memory speed.
    at = redis.call("LPOS", list, ARGV[2]) or at
  end
  from = (at + 1) % n
end
local items = redis.call("LRANGE", list, from, from + count - 1)
if #items < count then
  local more = redis.call("LRANGE", list, 0, count - #items - 1)
  for i = 1, #more do
    items[#items + 1] = more[i]
  end
end
table.insert(items, 1, from)
table.insert(items, 1, n)
return items
