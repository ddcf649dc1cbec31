--[[
  Releases a reconciler's lease on a notice, only if this owner still holds it: a lease that
  expired and was taken by another process meanwhile is left to that process. Compare and
  delete in one step (a GET then a DEL could delete the other's lease in between).

  KEYS[1] the notice's lease key
  ARGV[1] the owner releasing it

  Returns 1 when the lease was this owner's and is gone, 0 when it is someone else's or none.
  Writes no log entry.
]]
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
