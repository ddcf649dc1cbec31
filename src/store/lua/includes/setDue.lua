-- Keeps the shard's due index: `due` is '' (leave as is), 'remove' (terminal notice) or a score
-- in ms (when the reconciler should look at the notice if no job has moved it on by then).
local function setDue(dueKey, noticeId, due)
  if due == 'remove' then
    redis.call('ZREM', dueKey, noticeId)
  elseif due ~= '' then
    redis.call('ZADD', dueKey, due, noticeId)
  end
end
