--- `:Codeloupe tour [N]`: where to start reading, as a quickfix list: entry points (the strongest 30, or N), then the
--- most mentioned names.
local locations = require('codeloupe.locations')
local lsp = require('codeloupe.lsp')
local search = require('codeloupe.search')

local M = {}

--- The most entry points `codeloupe/tour` lists on request (its `entryPoints` param takes 1-500).
M.MAX_ENTRY_POINTS = 500

local usage = 'usage: :Codeloupe tour [N] (N: how many entry points to list, 1-' .. M.MAX_ENTRY_POINTS .. ')'

--- The line after the listed entry points saying how many more there are and how to list them: a quickfix entry
--- with no file (`valid = 0`: `:cnext` steps over it), as search's long-tail separator.
---@param shown integer
---@param not_shown integer
---@return codeloupe.Item
local function more_entry_points(shown, not_shown)
  local count = ('%d more entry point%s'):format(not_shown, not_shown == 1 and '' or 's')
  local total = shown + not_shown
  local how
  if shown >= M.MAX_ENTRY_POINTS then
    how = ('the tour lists at most %d'):format(M.MAX_ENTRY_POINTS)
  elseif total <= M.MAX_ENTRY_POINTS then
    how = (':Codeloupe tour %d lists them all'):format(total)
  else
    how = (':Codeloupe tour %d lists the strongest %d'):format(M.MAX_ENTRY_POINTS, M.MAX_ENTRY_POINTS)
  end
  return { text = ('── %s (%s) ──'):format(count, how), valid = 0, user_data = { separator = true } }
end

--- Quickfix items for a `codeloupe/tour` result: entry points first (then a line counting the ones left out), then
--- the stops (mentions, not uses).
---@param result table
---@return codeloupe.Item[]
function M.items(result)
  local items = {}
  for _, entry in ipairs(result.entryPoints or {}) do
    if locations.is_location(entry.location) then
      local detail = (entry.detail and entry.detail ~= '') and (': ' .. entry.detail) or ''
      items[#items + 1] = locations.item(entry.location, ('entry point (%s)%s'):format(entry.kind, detail))
    end
  end
  local not_shown = tonumber(result.entryPointsNotShown) or 0
  if not_shown > 0 then
    items[#items + 1] = more_entry_points(#(result.entryPoints or {}), not_shown)
  end
  for _, stop in ipairs(result.stops or {}) do
    if locations.is_location(stop.location) then
      local mentions = stop.mentions == 1 and '1 file mentions it' or ('%d files mention it'):format(stop.mentions)
      items[#items + 1] = locations.item(stop.location, ('%s %s (%s)'):format(stop.kind, stop.name, mentions))
    end
  end
  return items
end

--- `:Codeloupe tour [N]`: `args` is empty (the server's 30 strongest entry points) or N, how many to list.
---@param args string
function M.run(args)
  local entry_points
  if args ~= '' then
    entry_points = tonumber(args:match('^%d+$'))
    if not entry_points or entry_points < 1 or entry_points > M.MAX_ENTRY_POINTS then
      vim.notify('codeloupe: ' .. usage, vim.log.levels.ERROR)
      return
    end
  end
  local repository = require('codeloupe.indexdoc').repository()
  local here = lsp.file()
  lsp.with_client(function(client)
    local root = lsp.folder(client, here)
    local folder = repository or (root and vim.uri_from_fname(root))
    lsp.request(client, 'codeloupe/tour', { folderUri = folder, entryPoints = entry_points }, function(err, result)
      if err then
        vim.notify(lsp.error_message('codeloupe/tour', err), vim.log.levels.ERROR)
        return
      end
      local items = M.items(result or {})
      if #items == 0 then
        -- An empty quickfix window says nothing; say why instead (as an empty search does).
        vim.notify('codeloupe: tour: nothing to show (no entry points or definitions indexed)', vim.log.levels.WARN)
        return
      end
      search.to_quickfix('tour', items)
    end)
  end)
end

return M
