-- The mirror's consumer group on a shard's log stream, as a table of XINFO GROUPS fields
-- (`last-delivered-id`, `pending`, `lag`, ...), or nil when the stream or the group is missing.
local function mirrorGroup(logKey, group)
  if redis.call('EXISTS', logKey) == 0 then
    return nil
  end
  for _, fields in ipairs(redis.call('XINFO', 'GROUPS', logKey)) do
    local info = {}
    for i = 1, #fields, 2 do
      info[fields[i]] = fields[i + 1]
    end
    if info['name'] == group then
      return info
    end
  end
  return nil
end
