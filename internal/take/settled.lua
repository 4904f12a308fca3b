-- Every take starts with this file (the Go that loads the take scripts puts
-- it first, before place.lua): a take whose keys are in a Cluster slot
-- that is moving between nodes returns TRYAGAIN before it reads or writes
-- anything, so that no take ever writes half its keys on one node and
-- finds the other half gone to the other.
--
-- While a slot migrates, its keys are on the node it leaves until MIGRATE
-- moves them, then on the node it goes to; a take names one key, the list,
-- and reaches its other keys (each item's lock, the due index, the places)
-- from the script, where a key already moved away would read as absent:
-- an item whose lock had moved would look free. A two-key command asks the
-- server itself: Redis and Valkey refuse one whose keys are not all there,
-- on either node (TRYAGAIN), while the slot moves, and run it otherwise.
-- The probe names a key that never exists in the list's slot (its hash
-- tag), beside the key the call names. A take that follows an ASK to the
-- importing node is refused alike: the importing node runs nothing of a
-- take until the slot is its own.
--
-- Without a hash tag, a take names each key it touches, one slot each:
-- there is nothing to guard.
local function settledSlot(key)
  local open = string.find(key, "{", 1, true)
  if not open then
    return true
  end
  local close = string.find(key, "}", open + 1, true)
  if not close or close == open + 1 then
    return true
  end
  local probe = string.sub(key, open, close) .. "\0w8y:settled"
  local reply = redis.pcall("EXISTS", key, probe)
  return not (type(reply) == "table" and reply.err)
end
if KEYS[1] and not settledSlot(KEYS[1]) then
  return redis.error_reply("TRYAGAIN the slot of " .. KEYS[1] .. " is moving between Cluster nodes")
end
