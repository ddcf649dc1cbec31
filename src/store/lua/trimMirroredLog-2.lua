--[[
  Trims a shard's log below what the archive has confirmed, and never below ARGV[2] (the hot
  window, which keeps recent entries readable from Redis). Confirmed means handed out by the
  mirror (up to its consumer group's last-delivered ID) and no longer held by a batch record
  (KEYS[2], written by nextMirrorBatch-3.lua, removed by ackMirrorBatch-2.lua), nor pending in
  the group (entries an earlier version read and left unacknowledged). So the trim point is the
  oldest of those, or the entry after the last delivered one when nothing is held. Every other
  group named in ARGV[4] that exists on the stream (the callers' events) holds the trim back the
  same way: an entry is trimmed only once each of them is done with it. The stream is never
  capped by length.

  Also forgets consumers that hold nothing and have been idle for ARGV[3] ms (workers that
  exited); checked and deleted in this one step, so a consumer that just read a batch is kept.

  KEYS[1] shard log stream     KEYS[2] shard mirror-batches hash
  ARGV[1] consumer group       ARGV[2] keep entries from this ID on (`<ms>-0`)
  ARGV[3] idle time (ms) after which an empty consumer is forgotten
  ARGV[4] the other consumer groups that must be done with an entry, comma-separated ('' none)

  Returns { entries removed, trim point ('' when the group does not exist yet) }.
  Writes no log entries.
]]
-- @include streamIds
-- @include mirrorGroup

local group = ARGV[1]
local info = mirrorGroup(KEYS[1], group)
if not info then
  return { 0, '' }
end

-- The first entry a group is not done with: its oldest pending one, else the one after its last delivered.
local function doneBelow(groupName, groupInfo)
  if tonumber(groupInfo['pending']) > 0 then
    return redis.call('XPENDING', KEYS[1], groupName)[2]
  end
  return idAfter(groupInfo['last-delivered-id'])
end

local trimPoint = doneBelow(group, info)
for _, firstId in ipairs(redis.call('HKEYS', KEYS[2])) do
  if idLess(firstId, trimPoint) then
    trimPoint = firstId
  end
end
for other in string.gmatch(ARGV[4] or '', '[^,]+') do
  local otherInfo = mirrorGroup(KEYS[1], other)
  if otherInfo then
    local below = doneBelow(other, otherInfo)
    if idLess(below, trimPoint) then
      trimPoint = below
    end
  end
end
if idLess(ARGV[2], trimPoint) then
  trimPoint = ARGV[2]
end
local removed = redis.call('XTRIM', KEYS[1], 'MINID', trimPoint)

local idleLimit = tonumber(ARGV[3])
for _, fields in ipairs(redis.call('XINFO', 'CONSUMERS', KEYS[1], group)) do
  local c = {}
  for i = 1, #fields, 2 do
    c[fields[i]] = fields[i + 1]
  end
  if tonumber(c['pending']) == 0 and tonumber(c['idle']) >= idleLimit then
    redis.call('XGROUP', 'DELCONSUMER', KEYS[1], group, c['name'])
  end
end
return { removed, trimPoint }
