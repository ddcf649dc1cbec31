--[[
  Writes a new version of a recipient's policy; the last ARGV[3] versions stay readable, older
  ones are dropped (HERALD_POLICY_VERSIONS_KEPT). Each version is dropped once: `oldest` holds
  the oldest version still kept, so lowering the setting drops the surplus at the next write.

  KEYS[1] recipient policy hash
  ARGV[1] policy JSON   ARGV[2] at (ISO)   ARGV[3] versions kept (>= 1)
  Returns the new version number. Fields: `version`, `current` (JSON), `oldest`, `v<n>` (JSON of
  each version kept).
]]
local version = redis.call('HINCRBY', KEYS[1], 'version', 1)
local stored = cjson.decode(ARGV[1])
stored.version = version
stored.updatedAt = ARGV[2]
local json = cjson.encode(stored)
redis.call('HSET', KEYS[1], 'current', json, 'v' .. version, json)
local keepFrom = version - tonumber(ARGV[3]) + 1
local oldest = tonumber(redis.call('HGET', KEYS[1], 'oldest') or '1')
if oldest < keepFrom then
  local dropped = {}
  for v = oldest, keepFrom - 1 do
    dropped[#dropped + 1] = 'v' .. v
    if #dropped == 1000 then
      redis.call('HDEL', KEYS[1], unpack(dropped))
      dropped = {}
    end
  end
  if #dropped > 0 then
    redis.call('HDEL', KEYS[1], unpack(dropped))
  end
  redis.call('HSET', KEYS[1], 'oldest', keepFrom)
end
return version
