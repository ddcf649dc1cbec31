-- Stream entry IDs `<ms>-<seq>`: compared numerically, as Redis orders them. The ms part is
-- kept as text when an ID is rebuilt, so that no number formatting can change it.
local function idParts(id)
  local ms, seq = string.match(id, '^(%d+)-(%d+)$')
  return ms, tonumber(seq)
end

local function idLess(a, b)
  local am, as = idParts(a)
  local bm, bs = idParts(b)
  local an, bn = tonumber(am), tonumber(bm)
  return an < bn or (an == bn and as < bs)
end

-- The smallest ID after `id`: XTRIM MINID keeps its argument, so trimming "up to and including
-- id" passes this.
local function idAfter(id)
  local ms, seq = idParts(id)
  return ms .. '-' .. tostring(seq + 1)
end
