--- Files of repositories the user has not cloned: search results from the shared index carry
--- `codeloupe-index:/<repository>/<path>?rev=<commit>` URIs (settings `store_url` and `repositories`).
--- Opening one reads its text from the server (`codeloupe/read`) into a read-only scratch buffer.
local lsp = require('codeloupe.lsp')
local text_lines = require('codeloupe.lines')

local M = {}

M.scheme = 'codeloupe-index'
M.pattern = M.scheme .. ':///*'

local READ_TIMEOUT_MS = 20000

--- Whether `name` (a buffer or quickfix file name) is a shared-index document.
---@param name string
---@return boolean
function M.is_document(name)
  return vim.startswith(name, M.scheme .. ':')
end

--- The shared repository (`codeloupe-index:///<repository>`, a request's `folderUri`) of buffer `bufnr` (the
--- current one by default) when it is a shared-index document, so that ask, tour and the graph answer about
--- the repository being read; nil for any other buffer.
---@param bufnr integer?
---@return string?
function M.repository(bufnr)
  local name = vim.api.nvim_buf_get_name(bufnr or 0)
  local repository = M.is_document(name) and name:match('^' .. vim.pesc(M.scheme) .. ':/+([^/?]+)')
  return repository and (M.scheme .. ':///' .. repository) or nil
end

--- The server's `codeloupe/read` answer for `uri`, or nil and why not.
---@param uri string
---@param bufnr integer?
---@return { text: string, path: string }? result, string? error
function M.fetch(uri, bufnr)
  local client = lsp.client(bufnr)
  if not client then
    return nil, 'codeloupe: no language server is running to read ' .. uri
  end
  return lsp.request_sync(client, 'codeloupe/read', { uri = uri }, READ_TIMEOUT_MS)
end

--- The lines of a shared-index document (for previews); {} when it cannot be read.
---@param uri string
---@return string[]
function M.lines(uri)
  local result = M.fetch(uri)
  return result and (text_lines.of_file(result.text)) or {}
end

--- Fill `bufnr` (named by a `codeloupe-index:` URI) from the server and make it read-only: the index's
--- copy at the commit the URI pins, never a file on disk (BufReadCmd).
---@param bufnr integer
function M.read(bufnr)
  local result, err = M.fetch(vim.api.nvim_buf_get_name(bufnr), bufnr)
  local bo = vim.bo[bufnr]
  bo.buftype = 'nofile'
  bo.swapfile = false
  bo.modifiable = true
  if result then
    local lines, eol = text_lines.of_file(result.text)
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
    -- The server answers hover and code lenses on the document from the shared index (K, lenses as on a file).
    local client = lsp.client(bufnr)
    if client then
      vim.lsp.buf_attach_client(bufnr, client.id)
    end
  else
    vim.notify(err, vim.log.levels.ERROR)
  end
  bo.modified = false
  bo.modifiable = false
  bo.readonly = true
end

return M
