--[[
  How far the log mirror is behind on one shard (read-only): what Redis holds that the archive
  does not have yet.

  KEYS[1] shard log stream
  ARGV[1] consumer group

  Returns { stream length, unarchived entries, oldest unarchived entry ID or '' }.
  Unarchived = pending in the group + not yet read by it (every entry when the group does not
  exist yet). Writes nothing.
]]
-- @include mirrorGroup

local length = redis.call('XLEN', KEYS[1])
local info = mirrorGroup(KEYS[1], ARGV[1])
if not info then
  local first = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 1)
  return { length, length, first[1] and first[1][1] or '' }
end

local summary = redis.call('XPENDING', KEYS[1], ARGV[1])
local pending = tonumber(summary[1])
local unread = redis.call('XRANGE', KEYS[1], '(' .. info['last-delivered-id'], '+', 'COUNT', 1)
local lag = info['lag']
if type(lag) ~= 'number' then
  -- Redis cannot tell (entries were deleted inside the range): count every entry not pending,
  -- an upper bound that costs nothing.
  lag = math.max(0, length - pending)
end
local oldest = ''
if pending > 0 then
  oldest = summary[2]
elseif unread[1] then
  oldest = unread[1][1]
end
return { length, pending + lag, oldest }
