--[[
  Writes a new version of a recipient's policy; earlier versions stay readable.

  KEYS[1] recipient policy hash
  ARGV[1] policy JSON   ARGV[2] at (ISO)
  Returns the new version number. Fields: `version`, `current` (JSON), `v<n>` (JSON of each version).
]]
local version = redis.call('HINCRBY', KEYS[1], 'version', 1)
local stored = cjson.decode(ARGV[1])
stored.version = version
stored.updatedAt = ARGV[2]
local json = cjson.encode(stored)
redis.call('HSET', KEYS[1], 'current', json, 'v' .. version, json)
return version
