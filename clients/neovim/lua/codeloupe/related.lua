--- `:Codeloupe related`: the indexed chunks nearest to the selected lines (or the cursor line), as a quickfix list.
local indexdoc = require('codeloupe.indexdoc')
local text_lines = require('codeloupe.lines')
local locations = require('codeloupe.locations')
local lsp = require('codeloupe.lsp')
local search = require('codeloupe.search')

local M = {}

--- Quickfix items for a `codeloupe/related` result, nearest first.
---@param result table
---@return codeloupe.Item[]
function M.items(result)
  local items = {}
  for _, chunk in ipairs(result.chunks or {}) do
    if locations.is_location(chunk.location) then
      local name = chunk.breadcrumb or chunk.name or chunk.kind or ''
      items[#items + 1] = locations.item(chunk.location, ('%.2f %s'):format(tonumber(chunk.score) or 0, name))
    end
  end
  return items
end

---@param opts { line1: integer, line2: integer }
function M.run(opts)
  local bufnr = vim.api.nvim_get_current_buf()
  local name = vim.api.nvim_buf_get_name(bufnr)
  local shared = indexdoc.is_document(name)
  if not shared and (name == '' or vim.bo[bufnr].buftype ~= '') then
    vim.notify('codeloupe: related needs a file buffer', vim.log.levels.ERROR)
    return
  end
  local params = {
    uri = shared and name or vim.uri_from_fname(vim.fs.normalize(name)),
    range = { start = { line = opts.line1 - 1, character = 0 }, ['end'] = { line = opts.line2, character = 0 } },
  }
  lsp.with_client(function(client)
    lsp.request(client, 'codeloupe/related', params, function(err, result)
      if err then
        vim.notify(lsp.error_message('codeloupe/related', err), vim.log.levels.ERROR)
        return
      end
      local file = vim.fs.normalize(name)
      local shown = shared and name:gsub('%?.*$', '') or locations.relative(lsp.folder(client, file), file)
      -- The file's name is a repository's: on one line, escaped, in the notification as in the quickfix title.
      local title = ('related to %s:%d-%d'):format(text_lines.one_line(shown), opts.line1, opts.line2)
      local items = M.items(result or {})
      if #items == 0 then
        -- An empty quickfix window says nothing; say so instead (as an empty search does).
        vim.notify(('codeloupe: %s: nothing found (related code is searched in the same language)'):format(title),
          vim.log.levels.WARN)
        return
      end
      search.to_quickfix(title, items)
    end)
  end)
end

return M
