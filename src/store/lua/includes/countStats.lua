-- Keeps the counters /v1/stats reads (src/notice/stats.ts) in the same step as the change they
-- count. One hash per shard; each field is `<hour>|<counter>`, <hour> being the notice's creation
-- hour in hours since the Unix epoch (the notice's `statsHour` field), so that a period is read
-- as (hours × counters) fields, never notice by notice:
--   <hour>|state|<state>       notices of that hour now in <state> (-1 / +1 on each move)
--   <hour>|reason|<reason>     notices whose fallback was decided, by reason
--   <hour>|checks|email, <hour>|checks|sms   status checks done
--   <hour>|sent|email          notices whose email the provider accepted
--   <hour>|segments|sms        SMS segments handed to the provider
-- before, after: the counted fields of the notice before and after the step; a field missing from
-- `after` is unchanged, '' is absent.
local STATS_NUMBERS = { emailChecksDone = 'checks|email', smsChecksDone = 'checks|sms', smsSegments = 'segments|sms' }
local STATS_FIELDS = { 'fallbackReason', 'emailChecksDone', 'smsChecksDone', 'emailProviderMessageId', 'smsSegments' }

local function countStats(statsKey, hour, before, after)
  local at = hour .. '|'
  if after.state and after.state ~= before.state then
    if before.state then
      redis.call('HINCRBY', statsKey, at .. 'state|' .. before.state, -1)
    end
    redis.call('HINCRBY', statsKey, at .. 'state|' .. after.state, 1)
  end
  local reason = after.fallbackReason
  if reason ~= nil and reason ~= (before.fallbackReason or '') then
    if (before.fallbackReason or '') ~= '' then
      redis.call('HINCRBY', statsKey, at .. 'reason|' .. before.fallbackReason, -1)
    end
    if reason ~= '' then
      redis.call('HINCRBY', statsKey, at .. 'reason|' .. reason, 1)
    end
  end
  for field, counter in pairs(STATS_NUMBERS) do
    if after[field] ~= nil then
      local delta = (tonumber(after[field]) or 0) - (tonumber(before[field]) or 0)
      if delta ~= 0 then
        redis.call('HINCRBY', statsKey, at .. counter, delta)
      end
    end
  end
  local message = after.emailProviderMessageId
  if message ~= nil then
    local was = (before.emailProviderMessageId or '') ~= ''
    local is = message ~= ''
    if was ~= is then
      redis.call('HINCRBY', statsKey, at .. 'sent|email', is and 1 or -1)
    end
  end
end
