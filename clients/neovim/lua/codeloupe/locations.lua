--- LSP locations as quickfix-style items, and jumping to them.
local text_lines = require('codeloupe.lines')

local M = {}

--- The 1-based inclusive line span of an LSP range.
--- The server sends a span a..b as {start = a-1:0, end = b:0}; an end at column 0 of a later line
--- therefore ends on the line before it.
---@param range lsp.Range
---@return integer first, integer last
function M.lines(range)
  local first = range.start.line + 1
  local last = range['end'].line + 1
  if range['end'].character == 0 and range['end'].line > range.start.line then
    last = range['end'].line
  end
  return first, last
end

---@class codeloupe.Item: vim.quickfix.entry
---@field filename string
---@field lnum integer
---@field end_lnum integer
---@field col integer
---@field text string

--- Whether `value` is an LSP Location (results may omit one, or send null).
---@param value any
---@return boolean
function M.is_location(value)
  return type(value) == 'table' and type(value.uri) == 'string' and type(value.range) == 'table'
end

--- A quickfix item for an LSP Location. `text` is what the item shows (in the quickfix list, vim.ui.select,
--- Telescope): the repository's names and lines in it are on one line with their control and bidi characters
--- escaped (`one_line`), as the views show them; the item opens `filename`, the real path.
---@param location lsp.Location
---@param text string?
---@return codeloupe.Item
function M.item(location, text)
  local first, last = M.lines(location.range)
  return {
    filename = vim.uri_to_fname(location.uri),
    lnum = first,
    end_lnum = last,
    col = 1,
    text = text_lines.one_line(text or ''),
  }
end

--- `path` relative to `root` when it lies inside it; otherwise `path` unchanged.
---@param root string?
---@param path string
---@return string
function M.relative(root, path)
  if root and root ~= '' then
    local prefix = root:gsub('/+$', '') .. '/'
    if path:sub(1, #prefix) == prefix then
      return path:sub(#prefix + 1)
    end
  end
  return path
end

--- Open `item` in window `win` (the current one by default) with the cursor on its first line.
---@param item { filename: string, lnum: integer }
---@param win integer?
function M.jump(item, win)
  win = win or vim.api.nvim_get_current_win()
  vim.api.nvim_set_current_win(win)
  -- Record where we came from so <C-o> returns there.
  vim.cmd("normal! m'")
  local current = vim.api.nvim_buf_get_name(vim.api.nvim_win_get_buf(win))
  if vim.fs.normalize(current) ~= vim.fs.normalize(item.filename) then
    vim.cmd.edit(vim.fn.fnameescape(item.filename))
  end
  -- A shared-index document opened just now holds its lines only once the server has answered.
  local bufnr = vim.api.nvim_win_get_buf(win)
  require('codeloupe.indexdoc').when_read(bufnr, function() -- required here: it requires this module (via lsp)
    if not (vim.api.nvim_win_is_valid(win) and vim.api.nvim_win_get_buf(win) == bufnr) then
      return
    end
    local last = vim.api.nvim_buf_line_count(bufnr)
    vim.api.nvim_win_set_cursor(win, { math.max(1, math.min(item.lnum, last)), 0 })
    vim.api.nvim_win_call(win, function()
      vim.cmd('normal! zvzz')
    end)
  end)
end

return M
