-- Against the real server and a real shared index (PostgreSQL): a repository the user has not cloned
-- (`store_url`, `repositories`) answers searches with codeloupe-index: URIs; the quickfix list and the
-- picker open them at their line, filled from codeloupe/read, read-only; a path escaping the repository
-- leaves an empty buffer and an error. No read holds up the editor: with the server stopped (SIGSTOP) while a
-- document opens, a preview shows or a lens lists its locations, the command returns at once and the editor
-- goes on; the text comes once the server runs again (SIGCONT).
local H = dofile(vim.fs.joinpath(vim.fs.dirname(debug.getinfo(1, 'S').source:sub(2)), 'helpers.lua'))
H.setup({
  picker = 'select',
  settings = { embed_provider = 'none', store_url = os.getenv('CODELOUPE_TEST_STORE_URL'), repositories = { 'billing' } },
})
local expected_dir = os.getenv('CODELOUPE_TEST_EXPECTED')
local query = 'charge the card total price'
local prefix = 'codeloupe-index:///billing/'

local client = H.client(H.open('shop/cart.py'))
H.ready(client)
H.wait(function() -- the server opens the shared repositories after `initialized`
  local response = client:request_sync('codeloupe/search', { query = query, folderUri = 'codeloupe-index:///billing' }, 5000)
  return response and not response.err
end, 30000, 'the shared repository to be searchable')

local indexdoc = require('codeloupe.indexdoc')

--- The text of a billing file as it was indexed (its checkout is deleted; the test saved a copy).
---@param path string
---@return string
local function indexed_text(path)
  local file = assert(io.open(vim.fs.joinpath(expected_dir, path), 'r'))
  local text = file:read('*a')
  file:close()
  return text
end

--- The current buffer holds `name`'s indexed text, read-only, with the cursor on `lnum`.
---@param name string
---@param lnum integer
local function shows(name, lnum)
  local buf = vim.api.nvim_get_current_buf()
  H.equal(vim.api.nvim_buf_get_name(buf), name, 'the buffer opened')
  local path = name:sub(#prefix + 1):gsub('%?.*$', '')
  local text = H.text(buf) .. (vim.bo[buf].eol and '\n' or '')
  H.equal(text, indexed_text(path), 'the buffer holds the indexed text of ' .. path)
  H.equal({ vim.bo[buf].readonly, vim.bo[buf].modifiable, vim.bo[buf].buftype, vim.bo[buf].modified },
    { true, false, 'nofile', false }, 'read-only scratch buffer')
  H.equal(vim.bo[buf].filetype, 'python', 'filetype from the path')
  -- The server answers hover and lenses on it from the shared index: the client attaches.
  H.equal(#vim.lsp.get_clients({ bufnr = buf }), 1, 'clients attached to the index document')
  H.equal(vim.api.nvim_win_get_cursor(0)[1], lnum, 'cursor on the result line')
  H.check(not pcall(vim.cmd, 'normal! x'), 'editing is refused')
  H.equal(H.text(buf) .. (vim.bo[buf].eol and '\n' or ''), indexed_text(path), 'text unchanged after an edit attempt')
end

-- :Codeloupe search! lists the shared repository's results beside the workspace's; :cc opens one.
vim.cmd('Codeloupe search! ' .. query)
H.wait(function()
  return #vim.fn.getqflist() > 0
end, 20000, 'quickfix items')
local shared_index, shared_item
for index, item in ipairs(vim.fn.getqflist()) do
  if vim.startswith(vim.api.nvim_buf_get_name(item.bufnr), prefix) then
    shared_index, shared_item = index, item
    break
  end
end
H.check(shared_item, 'a quickfix item from the shared repository: ' .. vim.inspect(vim.fn.getqflist()))
local name = vim.api.nvim_buf_get_name(shared_item.bufnr)
H.check(name:find('?rev=', 1, true), 'the URI pins the commit: ' .. name)
H.with_server_stopped(function()
  vim.cmd('cc ' .. shared_index)
  H.equal(vim.api.nvim_buf_get_name(0), name, 'the buffer opened at once')
  H.equal({ H.text(0), vim.bo.readonly, vim.bo.modifiable }, { indexdoc.loading, true, false },
    'read-only, saying it is loading while the server has not answered')
end)
H.wait(function()
  return H.text(0) ~= indexdoc.loading
end, 20000, 'the answer to fill the buffer')
shows(name, shared_item.lnum)

-- The picker opens it too (a fresh buffer: wipe the one :cc read).
vim.cmd('cclose')
H.open('shop/cart.py')
vim.cmd('bwipeout! ' .. vim.fn.bufnr(name))
local picked
vim.ui.select = function(items, _, on_choice)
  for _, item in ipairs(items) do
    if vim.startswith(item.filename, prefix) then
      picked = item
      return on_choice(item)
    end
  end
  H.fail('no shared result offered: ' .. vim.inspect(items))
end
vim.cmd('Codeloupe search ' .. query)
H.wait(function()
  return picked ~= nil and vim.api.nvim_buf_get_name(0) == picked.filename and H.text(0) ~= indexdoc.loading
end, 20000, 'the picker to open the shared result')
shows(picked.filename, picked.lnum)

-- :Codeloupe live previews a shared result from the server too.
local live = require('codeloupe.live')
vim.cmd('Codeloupe live ' .. query)
H.wait(function()
  return live.state and live.state.query == query and #live.state.items > 0
end, 20000, 'the live picker to show the answer')
local row
for index, item in ipairs(live.state.items) do
  if vim.startswith(item.filename, prefix) then
    row = index
    break
  end
end
H.check(row, 'a shared result in the live picker')
H.press('A' .. string.rep('<C-n>', row - 1))
H.equal(live.state.selected, row, 'the shared row is selected')
local previewed = live.state.items[row]
H.wait(function()
  return H.text(live.state.preview.buf) ~= indexdoc.loading
end, 20000, 'the live preview to be read')
H.equal(H.text(live.state.preview.buf) .. '\n', indexed_text(previewed.filename:sub(#prefix + 1):gsub('%?.*$', '')),
  'the preview holds the indexed text')
H.press('<Esc>')

-- The Telescope previewer function previews a shared result from the server too (Telescope's own loader reads
-- the disk, where the repository is not): the indexed text, the match line highlighted.
local preview_buf = vim.api.nvim_create_buf(false, true)
local preview_win = vim.api.nvim_open_win(preview_buf, false, { relative = 'editor', row = 1, col = 1, width = 60,
  height = 5 })
H.with_server_stopped(function()
  require('codeloupe.search').preview(previewed, preview_buf, preview_win, function(filename)
    H.fail('the disk loader was asked for ' .. filename)
  end)
  H.equal(H.text(preview_buf), indexdoc.loading, 'the Telescope preview says it is loading')
end)
H.wait(function()
  return H.text(preview_buf) ~= indexdoc.loading
end, 20000, 'the Telescope preview to be read')
H.equal(table.concat(vim.api.nvim_buf_get_lines(preview_buf, 0, -1, false), '\n') .. '\n',
  indexed_text(previewed.filename:sub(#prefix + 1):gsub('%?.*$', '')), 'the Telescope preview holds the indexed text')
H.equal(vim.api.nvim_win_get_cursor(preview_win)[1], previewed.lnum, 'the Telescope preview sits on the match line')
H.equal(vim.bo[preview_buf].syntax, 'python', 'syntax from the path')
vim.api.nvim_win_close(preview_win, true)

-- A shared document answers like a file of the workspace: lenses, K, related, graph node, ask and status, each
-- from its repository, every location a codeloupe-index: document.
local card = prefix .. 'src/shop/payments/card.py' .. name:match('%?rev=.*$')
vim.cmd.edit(vim.fn.fnameescape(card))
local card_buf = vim.api.nvim_get_current_buf()
local charge_line = 7
local function used_lens()
  for _, lens in ipairs(vim.lsp.codelens.get(card_buf)) do
    if lens.range.start.line == charge_line - 1 and lens.command and lens.command.title == 'used in 2 files' then
      return lens
    end
  end
end
H.wait(function()
  if not used_lens() then
    vim.cmd('doautocmd BufEnter')
    return false
  end
  return true
end, 20000, function()
  return 'the "used in 2 files" lens on def charge: ' .. vim.inspect(vim.lsp.codelens.get(card_buf))
end)
vim.api.nvim_win_set_cursor(0, { charge_line, 0 })
local lens_title = 'codeloupe: used in 2 files'
H.with_server_stopped(function()
  vim.lsp.codelens.run()
  H.check(vim.fn.getqflist({ title = 0 }).title ~= lens_title, 'the list waits for the lines of its documents')
end)
H.wait(function()
  return vim.fn.getqflist({ title = 0 }).title == lens_title
end, 10000, 'the lens locations in quickfix')
H.equal(#vim.fn.getqflist(), 2, 'both lens locations')
for _, item in ipairs(vim.fn.getqflist()) do
  H.check(vim.startswith(vim.api.nvim_buf_get_name(item.bufnr), prefix), 'a lens location in the repository')
  H.check(item.text:find('charge', 1, true), 'the use line, read from the server: ' .. item.text)
end
vim.cmd('cclose')

vim.api.nvim_set_current_buf(card_buf)
vim.api.nvim_win_set_cursor(0, { 1, 0 })
local hover = H.hover()
H.check(hover:find('src/shop/cart.py', 1, true), 'hover lists the import src/shop/cart.py:\n' .. hover)
H.press('<Esc>')
for _, win in ipairs(vim.api.nvim_list_wins()) do
  if vim.api.nvim_win_get_config(win).relative ~= '' then
    vim.api.nvim_win_close(win, true)
  end
end

vim.api.nvim_set_current_buf(card_buf)
vim.cmd(('%d,%dCodeloupe related'):format(charge_line, charge_line + 2))
H.wait(function()
  return vim.fn.getqflist({ title = 0 }).title:find('related to', 1, true) ~= nil
end, 20000, 'the related quickfix list')
local related = vim.fn.getqflist()
H.check(#related > 0, 'related chunks')
for _, item in ipairs(related) do
  H.check(vim.startswith(vim.api.nvim_buf_get_name(item.bufnr), prefix), 'a related chunk in the repository')
end
vim.cmd('cclose')

vim.api.nvim_set_current_buf(card_buf)
vim.cmd('Codeloupe graph node')
local graph_buf
H.wait(function()
  graph_buf = vim.fn.bufnr('codeloupe://graph')
  return graph_buf ~= -1 and H.text(graph_buf):find('# src/shop/payments/card.py', 1, true) ~= nil
end, 20000, 'the graph view of card.py')
H.check(H.text(graph_buf):find('src/shop/cart.py', 1, true), 'its imports:\n' .. H.text(graph_buf))

-- ask and status: what the server was asked and answered (the plugin's requests, passed through unchanged).
local lsp = require('codeloupe.lsp')
local asked = {}
local request = lsp.request
lsp.request = function(c, method, params, handler, bufnr)
  return request(c, method, params, function(err, result, ctx)
    asked[method] = { params = params, result = result, err = err }
    return handler(err, result, ctx)
  end, bufnr)
end
vim.api.nvim_set_current_buf(card_buf)
vim.cmd('Codeloupe ask ' .. query)
vim.api.nvim_set_current_buf(card_buf)
vim.cmd('Codeloupe status')
H.wait(function()
  return asked['codeloupe/ask'] ~= nil and asked['codeloupe/status'] ~= nil
end, 30000, 'the ask and status answers')
lsp.request = request
H.equal(asked['codeloupe/ask'].params.folderUri, 'codeloupe-index:///billing', 'ask asks the repository')
local bundle = asked['codeloupe/ask'].result.bundle
H.check(#bundle.core > 0, 'an answer bundle')
for _, file in ipairs(bundle.core) do
  H.check(vim.startswith(file.uri, prefix), 'an answer file in the repository: ' .. file.uri)
end
local commit = name:match('%?rev=(.*)$')
H.check(H.notified('shared repository billing at ' .. commit, vim.log.levels.INFO), 'status lists the repository')

-- A path escaping the repository: an error, an empty read-only buffer.
vim.cmd.edit(vim.fn.fnameescape('codeloupe-index:///billing/../../../etc/passwd'))
H.wait(function()
  return H.notified('traversal', vim.log.levels.ERROR)
end, 20000, 'the refusal to be shown')
H.equal(H.text(0), '', 'nothing read for an escaping path')
H.check(vim.bo.readonly and not vim.bo.modifiable, 'the refused buffer is read-only too')
os.exit(0)
