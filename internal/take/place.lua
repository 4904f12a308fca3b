-- The places of --fleet-max-running: batch.lua, look.lua and each.lua
-- start with this file (the Go that loads them puts it before each), so
-- that a take under a cap of N takes one of the N places that the whole
-- fleet shares in the same call as it takes the lock.
--
-- The places in use are the set of the lock keys of the runs that took one
-- (ARGV[1] .. "running", see schema.Keys.Running). A place is in use while
-- its lock exists: the lock is the place's lease, refreshed while the child
-- runs, deleted with the member when the run ends (finish.lua), expired
-- when its worker died. So the count needs no clock of its own: SCARD,
-- and only once it reaches the cap, a look at each member's lock, which
-- drops the members whose lock is gone (a dead worker's, once its lock has
-- expired; a lock given back without a finish).

-- placeFree reports whether a take under cap may run one more child:
-- whether fewer than cap members of running hold a lock that exists. It
-- drops the members whose lock is gone. When running holds a key of
-- another type, it returns nil and Redis' error, for the script to return,
-- so that a cap that cannot be counted fails the take rather than being
-- ignored.
local function placeFree(running, cap)
  local n = redis.pcall("SCARD", running)
  if type(n) == "table" then
    return nil, n
  end
  if n < cap then
    return true
  end
  local live = 0
  for _, lock in ipairs(redis.call("SMEMBERS", running)) do
    -- The set is named too, as batch.lua names the list beside a lock: while
    -- a Cluster slot moves, a lock that has not arrived yet must not read as
    -- gone (the importing node refuses the command instead).
    if redis.call("EXISTS", running, lock) == 2 then
      live = live + 1
    else
      redis.call("SREM", running, lock)
    end
  end
  return live < cap
end

-- placesFull reads the cap from a take's options (cap=N, --fleet-max-running;
-- absent or 0: none) and reports it, and whether every place under it is
-- in use, for batch.lua and look.lua, whose places are under keyPrefix; or,
-- as placeFree, Redis' error when the places cannot be counted.
local function placesFull(keyPrefix, opt)
  local cap = tonumber(opt.cap or 0)
  if cap <= 0 then
    return cap, false
  end
  local free, err = placeFree(keyPrefix .. "running", cap)
  return cap, not free, err
end

-- takePlace records, once lock is taken, that its run holds a place under
-- cap, and the cap that w8yctl status shows (limitKey). A take without a
-- cap (cap 0) deletes limitKey: the fleet no longer enforces one.
local function takePlace(running, limitKey, lock, cap)
  if cap > 0 then
    redis.call("SADD", running, lock)
    redis.pcall("SET", limitKey, cap)
  else
    redis.pcall("DEL", limitKey)
  end
end
