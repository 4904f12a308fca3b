-- Removes the extra occurrences of one item from the list KEYS[1], keeping
-- the first (the one nearest the head), in one step, so that a worker's
-- rotation or an operator's LREM between a count and a removal can never
-- take the last one away. Needs LPOS (Redis 6.0.6), as control.lua does.
-- Touches the list alone, so it runs on a Cluster without a hash tag too.
-- ARGV[1] is the item. Returns how many occurrences the list held.
local at = redis.call("LPOS", KEYS[1], ARGV[1], "COUNT", 0)
if #at > 1 then
  redis.call("LREM", KEYS[1], -(#at - 1), ARGV[1])
end
return #at
