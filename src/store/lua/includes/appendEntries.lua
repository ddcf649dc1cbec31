-- Appends decision-log entries for one notice: each gets the next `seq` of the notice, goes to
-- the shard's stream, and its stream ID is remembered in the notice's events list.
-- entries: array of arrays { type, field1, value1, field2, value2, ... }; values arrive
-- JSON-encoded from the caller, which is the only writer of entry fields.
local function appendEntries(noticeKey, eventsKey, logKey, noticeId, at, entries)
  local ids = {}
  for _, entry in ipairs(entries) do
    local seq = redis.call('HINCRBY', noticeKey, 'seq', 1)
    local args = { logKey, '*', 'type', entry[1], 'noticeId', noticeId, 'at', at, 'seq', tostring(seq) }
    for i = 2, #entry do
      args[#args + 1] = entry[i]
    end
    local id = redis.call('XADD', unpack(args))
    redis.call('RPUSH', eventsKey, id)
    ids[#ids + 1] = id
  end
  return ids
end
