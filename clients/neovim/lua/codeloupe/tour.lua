--- `:Codeloupe tour`: where to start reading, as a quickfix list: entry points, then the most mentioned names.
local locations = require('codeloupe.locations')
local lsp = require('codeloupe.lsp')
local search = require('codeloupe.search')

local M = {}

--- Quickfix items for a `codeloupe/tour` result: entry points first, then the stops (mentions, not uses).
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
  for _, stop in ipairs(result.stops or {}) do
    if locations.is_location(stop.location) then
      local mentions = stop.mentions == 1 and '1 file mentions it' or ('%d files mention it'):format(stop.mentions)
      items[#items + 1] = locations.item(stop.location, ('%s %s (%s)'):format(stop.kind, stop.name, mentions))
    end
  end
  return items
end

function M.run()
  local repository = require('codeloupe.indexdoc').repository()
  lsp.with_client(function(client)
    local folder = repository or (client.root_dir and vim.uri_from_fname(client.root_dir))
    local params = folder and { folderUri = folder } or {}
    lsp.request(client, 'codeloupe/tour', params, function(err, result)
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
