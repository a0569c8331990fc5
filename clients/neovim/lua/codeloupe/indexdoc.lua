--- Files of repositories the user has not cloned: search results from the shared index carry
--- `codeloupe-index:/<repository>/<path>?rev=<commit>` URIs (settings `store_url` and `repositories`).
--- Opening one reads its text from the server (`codeloupe/read`) into a read-only scratch buffer.
local lsp = require('codeloupe.lsp')
local text_lines = require('codeloupe.lines')

local M = {}

M.scheme = 'codeloupe-index'
M.pattern = M.scheme .. ':///*'

--- What a document's buffer (and a preview of one) shows while the server's answer is on its way.
M.loading = 'loading…'

--- Buffers whose text is on its way: bufnr -> the functions to run once it is in (see `when_read`).
---@type table<integer, (fun())[]>
local reading = {}

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

--- Ask `client` for `uri`'s text (`codeloupe/read`) without waiting for it: `on_answer` gets the result, or nil
--- and why not, when the server answers, always after this returns (also when there is no server to ask). The
--- editor never waits on a read: a large file from a busy shared index can take seconds.
---@param uri string
---@param client vim.lsp.Client?
---@param on_answer fun(result: { text: string, path: string }?, err: string?)
function M.fetch(uri, client, on_answer)
  local function refuse(why)
    vim.schedule(function()
      on_answer(nil, why)
    end)
  end
  if not client then
    refuse('codeloupe: no language server is running to read ' .. uri)
    return
  end
  local sent = lsp.request(client, 'codeloupe/read', { uri = uri }, function(err, result)
    if err then
      on_answer(nil, lsp.error_message('codeloupe/read', err))
    else
      on_answer(result)
    end
  end)
  if not sent then
    refuse('codeloupe: the language server stopped before it could read ' .. uri)
  end
end

--- The lines of a shared-index document (for previews and lens locations), to `on_lines` when the server
--- answers; {} when it cannot be read.
---@param uri string
---@param client vim.lsp.Client?
---@param on_lines fun(lines: string[])
function M.lines(uri, client, on_lines)
  M.fetch(uri, client, function(result)
    on_lines(result and (text_lines.of_file(result.text)) or {})
  end)
end

--- Run `fn` once buffer `bufnr` holds its text: now for any buffer not being read, else when the server's answer
--- has filled it (a jump to a line of a document being read waits for its lines).
---@param bufnr integer
---@param fn fun()
function M.when_read(bufnr, fn)
  local waiting = reading[bufnr]
  if waiting then
    waiting[#waiting + 1] = fn
  else
    fn()
  end
end

--- Replace the lines of read-only `bufnr`. Under :lockmarks: filling the buffer must not shift the quickfix entries
--- that point into it (they were made for the file's real lines; a plain set_lines moves them past its end).
---@param bufnr integer
---@param lines string[]
local function set_text(bufnr, lines)
  local bo = vim.bo[bufnr]
  bo.modifiable = true
  vim.g.codeloupe_read_lines = lines
  vim.cmd(('lockmarks call nvim_buf_set_lines(%d, 0, -1, v:false, g:codeloupe_read_lines)'):format(bufnr))
  vim.g.codeloupe_read_lines = nil
  bo.modified = false
  bo.modifiable = false
end

--- The line a quickfix or location list command (:cc, :cnext, <CR> in the list) opened `bufnr` at in `win`: the
--- current entry of the window's location list, else of the quickfix list, when it points into the buffer. The
--- command put the cursor on the placeholder's only line; the entry's line exists once the text is in.
---@param win integer
---@param bufnr integer
---@return integer?
local function listed_line(win, bufnr)
  for _, list in ipairs({ vim.fn.getloclist(win, { idx = 0, items = 0 }), vim.fn.getqflist({ idx = 0, items = 0 }) }) do
    local entry = (list.items or {})[list.idx or 0]
    if entry and entry.bufnr == bufnr then
      return entry.lnum
    end
  end
end

--- Fill `bufnr` with the server's answer (`result`, or nil and `err`): the text, its filetype, the client attached.
---@param bufnr integer
---@param result { text: string, path: string }?
---@param err string?
local function fill(bufnr, result, err)
  local bo = vim.bo[bufnr]
  if not result then
    set_text(bufnr, {})
    vim.notify(err, vim.log.levels.ERROR)
    return
  end
  local lines, eol = text_lines.of_file(result.text)
  set_text(bufnr, lines)
  bo.eol = eol
  bo.fixeol = false
  for _, win in ipairs(vim.fn.win_findbuf(bufnr)) do
    local line = vim.api.nvim_win_get_cursor(win)[1] == 1 and listed_line(win, bufnr)
    if line then
      vim.api.nvim_win_set_cursor(win, { math.max(1, math.min(line, #lines)), 0 })
    end
  end
  local filetype = vim.filetype.match({ filename = result.path, buf = bufnr })
  if filetype then
    bo.filetype = filetype
  end
  -- The server answers hover and code lenses on the document from the shared index (K, lenses as on a file).
  local client = lsp.client(bufnr)
  if client then
    vim.lsp.buf_attach_client(bufnr, client.id)
  end
end

--- Read `bufnr` (named by a `codeloupe-index:` URI) from the server into a read-only scratch buffer: the index's copy
--- at the commit the URI pins, never a file on disk (BufReadCmd). The buffer shows `M.loading` until the answer
--- fills it; the command that opened it returns at once.
---@param bufnr integer
function M.read(bufnr)
  local bo = vim.bo[bufnr]
  bo.buftype = 'nofile'
  bo.swapfile = false
  bo.readonly = true
  set_text(bufnr, { M.loading })
  local waiting = {}
  reading[bufnr] = waiting
  M.fetch(vim.api.nvim_buf_get_name(bufnr), lsp.client(bufnr), function(result, err)
    -- A buffer wiped meanwhile, or read again (:edit): that read fills it.
    if reading[bufnr] ~= waiting then
      return
    end
    reading[bufnr] = nil
    if not vim.api.nvim_buf_is_valid(bufnr) then
      return
    end
    fill(bufnr, result, err)
    for _, fn in ipairs(waiting) do
      fn()
    end
  end)
end

return M
