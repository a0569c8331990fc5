--- Files of repositories the user has not cloned: search results from the shared index carry
--- `codeloupe-index:/<repository>/<path>?rev=<commit>` URIs (settings `store_url` and `repositories`).
--- Opening one reads its text from the server (`codeloupe/read`) into a read-only scratch buffer.
local lsp = require('codeloupe.lsp')

local M = {}

M.scheme = 'codeloupe-index'
M.pattern = M.scheme .. ':///*'

local READ_TIMEOUT_MS = 20000

--- `text` as buffer lines, and whether it ends with a newline (then the last empty piece is not a line).
---@param text string
---@return string[] lines, boolean eol
local function split(text)
  local lines = vim.split(text, '\r?\n')
  local eol = #lines > 1 and lines[#lines] == ''
  if eol then
    table.remove(lines)
  end
  return lines, eol
end

--- Fill `bufnr` (named by a `codeloupe-index:` URI) from the server and make it read-only: the index's
--- copy at the commit the URI pins, never a file on disk (BufReadCmd).
---@param bufnr integer
function M.read(bufnr)
  local uri = vim.api.nvim_buf_get_name(bufnr)
  local client = lsp.client(bufnr)
  local result, err
  if client then
    result, err = lsp.request_sync(client, 'codeloupe/read', { uri = uri }, READ_TIMEOUT_MS)
  else
    err = 'codeloupe: no language server is running to read ' .. uri
  end
  local bo = vim.bo[bufnr]
  bo.buftype = 'nofile'
  bo.swapfile = false
  bo.modifiable = true
  if result then
    local lines, eol = split(result.text)
    -- Under :lockmarks: filling the buffer must not shift the quickfix entries that point into it
    -- (they were made for the file's real lines; a plain set_lines moves them past its end).
    vim.g.codeloupe_read_lines = lines
    vim.cmd(('lockmarks call nvim_buf_set_lines(%d, 0, -1, v:false, g:codeloupe_read_lines)'):format(bufnr))
    vim.g.codeloupe_read_lines = nil
    bo.eol = eol
    bo.fixeol = false
    local filetype = vim.filetype.match({ filename = result.path, buf = bufnr })
    if filetype then
      bo.filetype = filetype
    end
  else
    vim.notify(err, vim.log.levels.ERROR)
  end
  bo.modified = false
  bo.modifiable = false
  bo.readonly = true
end

return M
