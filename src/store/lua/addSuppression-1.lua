--[[
  Adds an address to one channel's suppression list. A manual entry replaces the address's
  record; an automatic one (a provider's bounce or opt-out) never overwrites one. A new manual
  address is refused when the list holds ARGV[4] addresses already (HERALD_SUPPRESSIONS_MAX);
  automatic ones are always kept: forgetting an opt-out would text someone who said STOP.

  KEYS[1] the channel's suppression hash
  ARGV[1] address (normalized)   ARGV[2] record JSON   ARGV[3] 'manual' or 'auto'
  ARGV[4] most addresses a manual entry may bring the list to (0: no bound)

  Returns 1 when the address is new; 0 when it was there (a manual record replaced, an automatic
  one left alone); -1 when the list is full (nothing stored).
]]
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  if ARGV[3] == 'manual' then
    redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
  end
  return 0
end
local max = tonumber(ARGV[4])
if ARGV[3] == 'manual' and max > 0 and redis.call('HLEN', KEYS[1]) >= max then
  return -1
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1
