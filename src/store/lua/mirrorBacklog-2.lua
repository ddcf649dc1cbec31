--[[
  How far the log mirror is behind on one shard (read-only): what Redis holds that the archive
  does not have yet.

  KEYS[1] shard log stream     KEYS[2] shard mirror-batches hash
  ARGV[1] consumer group

  Returns { stream length, unarchived entries, oldest unarchived entry ID or '' }.
  Unarchived = held by a batch record (handed out, not confirmed; nextMirrorBatch-3.lua) +
  pending in the group without one (an earlier version's) + not handed out yet (every entry when
  the group does not exist yet). Writes nothing.
]]
-- @include streamIds
-- @include mirrorGroup

local length = redis.call('XLEN', KEYS[1])
local info = mirrorGroup(KEYS[1], ARGV[1])
if not info then
  local first = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 1)
  return { length, length, first[1] and first[1][1] or '' }
end

local held, oldest = 0, nil
local records = redis.call('HGETALL', KEYS[2])
for i = 1, #records, 2 do
  local record = records[i + 1]
  local count = tonumber(string.match(record, '^%S+ (%d+)'))
  -- An earlier version's record: its entries are pending in the group, counted below.
  if string.match(record, '^%S+ %d+ %S* %S+ %d+$') then
    held = held + count
  end
  if not oldest or idLess(records[i], oldest) then
    oldest = records[i]
  end
end
local pending = tonumber(info['pending'])
if pending > 0 then
  local summary = redis.call('XPENDING', KEYS[1], ARGV[1])
  if not oldest or idLess(summary[2], oldest) then
    oldest = summary[2]
  end
end
local lag = info['lag']
if type(lag) ~= 'number' then
  -- Redis cannot tell (entries were deleted inside the range): count every entry not held, an
  -- upper bound that costs nothing.
  lag = math.max(0, length - held - pending)
end
if not oldest and lag > 0 then
  local unread = redis.call('XRANGE', KEYS[1], '(' .. info['last-delivered-id'], '+', 'COUNT', 1)
  oldest = unread[1] and unread[1][1]
end
return { length, held + pending + lag, oldest or '' }
