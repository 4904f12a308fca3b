-- Finishes a run and looks for the next item in one call: finish.lua's
-- whole work, then look.lua's, each as a function of its own keys and
-- arguments (the Go that loads this script puts them before it, as
-- finishRun and lookDue). A busy worker's item then costs Redis one round
-- trip instead of two: its finish, and the take of the next one.
--
-- KEYS    finish.lua's keys, then look.lua's (the list)
-- ARGV[1] how many of KEYS are finish.lua's
-- ARGV[2] how many of the arguments after these two are finish.lua's; the
--         rest are look.lua's
--
-- Returns {finish.lua's reply, look.lua's reply or false}. The finish is
-- written whatever the look meets: a look that fails (a key of another
-- type, a Redis without LPOS) replies false, having taken nothing, and the
-- worker's next take, a look of its own, meets the same failure and says
-- it.
local finishKeys, finishArgs, lookKeys, lookArgs = {}, {}, {}, {}
local nk, na = tonumber(ARGV[1]), tonumber(ARGV[2])
for i = 1, #KEYS do
  if i <= nk then
    finishKeys[#finishKeys + 1] = KEYS[i]
  else
    lookKeys[#lookKeys + 1] = KEYS[i]
  end
end
for i = 3, #ARGV do
  if i - 2 <= na then
    finishArgs[#finishArgs + 1] = ARGV[i]
  else
    lookArgs[#lookArgs + 1] = ARGV[i]
  end
end
-- A worker whose takes have no cap (no cap=N among the look's options, the
-- same as its take of the run that ends) took no place for that run.
if finishArgs[3] and not string.match(" " .. (lookArgs[5] or ""), " cap=0*[1-9]") then
  finishArgs[3] = finishArgs[3] .. " placed=0"
end
local finished = finishRun(finishKeys, finishArgs)
-- A finish that added an end event has just set the stream's expiry, which
-- the take's start event need not set again.
if finishKeys[8] and type(finished) == "table" and lookArgs[5] then
  lookArgs[5] = lookArgs[5] .. " stream_ttl_set=1"
end
local ok, looked = pcall(lookDue, lookKeys, lookArgs)
if not ok or type(looked) ~= "table" or looked.err then
  looked = false
end
return {finished, looked}
