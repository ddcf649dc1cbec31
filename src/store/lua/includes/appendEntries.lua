-- Appends decision-log entries for one notice: each gets the next `seq` of the notice, goes to
-- the shard's stream, and its stream ID is remembered in the notice's events list. The seqs are
-- taken with one HINCRBY and the IDs remembered with one RPUSH, whatever the number of entries.
-- entries: array of arrays { type, field1, value1, field2, value2, ... }; values arrive
-- JSON-encoded from the caller, which is the only writer of entry fields.
local function appendEntries(noticeKey, eventsKey, logKey, noticeId, at, entries)
  local ids = {}
  if #entries == 0 then
    return ids
  end
  local seq = redis.call('HINCRBY', noticeKey, 'seq', #entries) - #entries
  for _, entry in ipairs(entries) do
    seq = seq + 1
    local args = { logKey, '*', 'type', entry[1], 'noticeId', noticeId, 'at', at, 'seq', tostring(seq) }
    for i = 2, #entry do
      args[#args + 1] = entry[i]
    end
    ids[#ids + 1] = redis.call('XADD', unpack(args))
  end
  redis.call('RPUSH', eventsKey, unpack(ids))
  return ids
end
