--[[
  Takes a lease that nobody holds, or renews it for the owner that holds it, in one step (a GET
  then a SET could take a lease another process took in between).

  KEYS[1] the lease key
  ARGV[1] the owner taking or renewing it
  ARGV[2] how long it lasts from now, in milliseconds

  Returns 1 when this owner holds the lease for ARGV[2] ms from now, 0 when another owner holds it.
  Writes no log entry.
]]
local holder = redis.call('GET', KEYS[1])
if holder == false or holder == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0
