-- Against the real server and a real shared index (PostgreSQL): a repository the user has not cloned
-- (`store_url`, `repositories`) answers searches with codeloupe-index: URIs; the quickfix list and the
-- picker open them at their line, filled from codeloupe/read, read-only; a path escaping the repository
-- leaves an empty buffer and an error.
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
  -- Not a file of the workspace: no client attaches (it would ask for code lenses of a file it cannot see).
  H.equal(#vim.lsp.get_clients({ bufnr = buf }), 0, 'clients attached to the index document')
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
vim.cmd('cc ' .. shared_index)
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
  return picked ~= nil and vim.api.nvim_buf_get_name(0) == picked.filename
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
H.equal(table.concat(vim.api.nvim_buf_get_lines(live.state.preview.buf, 0, -1, false), '\n') .. '\n',
  indexed_text(previewed.filename:sub(#prefix + 1):gsub('%?.*$', '')), 'the preview holds the indexed text')
H.press('<Esc>')

-- A path escaping the repository: an error, an empty read-only buffer.
vim.cmd.edit(vim.fn.fnameescape('codeloupe-index:///billing/../../../etc/passwd'))
H.equal(H.text(0), '', 'nothing read for an escaping path')
H.check(vim.bo.readonly and not vim.bo.modifiable, 'the refused buffer is read-only too')
H.check(H.notified('traversal', vim.log.levels.ERROR), 'the refusal is shown')
os.exit(0)
