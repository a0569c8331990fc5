-- Against the real server: attach and root detection, progress, :Codeloupe search! into quickfix
-- (paths and lines checked against the server's own answer), the picker jump, workspace/symbol,
-- :Codeloupe status / reindex and the statusline.
local H = dofile(vim.fs.joinpath(vim.fs.dirname(debug.getinfo(1, 'S').source:sub(2)), 'helpers.lua'))
H.setup({ picker = 'select' })

local auth = H.open('shop/auth.py')
local client = H.client(auth)
H.equal(client.root_dir, H.root, 'workspace root')
H.ready(client)

-- web/package.json is nested: the workspace marker (.codeloupe.toml) wins, so the same client serves it.
local session_js = H.open('web/session.js')
H.equal(H.client(session_js).id, client.id, 'a file under a nested package.json shares the workspace client')
H.equal(#vim.lsp.get_clients({ name = 'codeloupe' }), 1, 'codeloupe clients')

-- The file-watcher capability reaches the server (Neovim leaves it off on Linux).
H.equal(client.capabilities.workspace.didChangeWatchedFiles.dynamicRegistration, true, 'didChangeWatchedFiles')
-- Settings travel as initializationOptions in camelCase.
H.equal(client.config.init_options, { embedProvider = 'none' }, 'initializationOptions')

-- Progress reaches the statusline state, never vim.notify (a cold index must not fill :messages).
H.check(require('codeloupe.progress').state[client.id], 'indexing progress was recorded for the statusline')
H.wait(function()
  return require('codeloupe').status() == 'codeloupe: ready'
end, 10000, 'the statusline to say ready (it says ' .. require('codeloupe').status() .. ')')

-- :Codeloupe search! fills the quickfix list with every CORE and RELATED span.
local query = 'verify password hash'
vim.cmd('Codeloupe search! ' .. query)
H.wait(function()
  return #vim.fn.getqflist() > 0
end, 20000, 'quickfix items from :Codeloupe search!')
local qf = vim.fn.getqflist({ title = 1, items = 1 })
H.equal(qf.title, 'codeloupe: ' .. query, 'quickfix title')
H.equal(vim.bo.buftype, 'quickfix', 'the quickfix window opens')

local response = client:request_sync('codeloupe/search', { query = query }, 20000)
H.check(response and not response.err, 'codeloupe/search failed: ' .. vim.inspect(response))
local expected = {}
for _, tier in ipairs({ 'core', 'related' }) do
  for _, file in ipairs(response.result[tier]) do
    local chunks = (file.chunks and #file.chunks > 0) and file.chunks or { { location = file.location } }
    for _, chunk in ipairs(chunks) do
      local range = chunk.location.range
      expected[#expected + 1] = {
        filename = vim.uri_to_fname(chunk.location.uri),
        -- Items open at the match (the snippet's anchor line), not at the start of the chunk.
        lnum = (chunk.snippet and chunk.snippet.anchorLine or range.start.line) + 1,
        tier = tier == 'core' and 'CORE' or 'RELATED',
        symbol = chunk.snippet and chunk.snippet.anchorSymbol or '',
      }
    end
  end
end
H.equal(#qf.items, #expected, 'one quickfix item per CORE and RELATED span')
H.check(#response.result.core > 0, 'the query finds CORE results: ' .. vim.inspect(response.result))

local covers_verify = false
for index, item in ipairs(qf.items) do
  local filename = vim.api.nvim_buf_get_name(item.bufnr)
  H.equal({ filename, item.lnum }, { expected[index].filename, expected[index].lnum }, ('quickfix item %d'):format(index))
  H.check(item.text:sub(1, #expected[index].tier) == expected[index].tier, 'item text starts with its tier: ' .. item.text)
  H.check(vim.startswith(filename, H.root .. '/'), 'item inside the workspace: ' .. filename)
  local line_count = #vim.fn.readfile(filename)
  H.check(item.lnum >= 1 and item.end_lnum >= item.lnum and item.end_lnum <= line_count,
    ('item %d has lines %d-%d in a %d-line file'):format(index, item.lnum, item.end_lnum, line_count))
  H.check(vim.startswith(item.text, ('%s %s'):format(expected[index].tier, expected[index].symbol)),
    'item labelled with the symbol holding its match: ' .. item.text)
  local at = vim.fn.readfile(filename)[item.lnum]:lower()
  if filename == H.path('shop/auth.py') and at:find('password', 1, true) then
    covers_verify = true
  end
end
H.check(covers_verify, 'a quickfix item opens at a matching line of auth.py: ' .. vim.inspect(qf.items))
H.check(qf.items[1].text:find('^CORE'), 'rank order starts with CORE: ' .. qf.items[1].text)

-- :Codeloupe search opens the picker; choosing a result jumps there.
vim.cmd('cclose')
H.open('shop/cart.py')
local chosen, shown
vim.ui.select = function(items, opts, on_choice)
  for _, item in ipairs(items) do
    if item.filename == H.path('shop/auth.py') then
      chosen, shown = item, opts.format_item(item)
      break
    end
  end
  on_choice(chosen)
end
vim.cmd('Codeloupe search ' .. query)
H.wait(function()
  return chosen ~= nil
end, 20000, 'the picker to be offered shop/auth.py')
H.check(vim.startswith(shown, ('shop/auth.py:%d  CORE'):format(chosen.lnum)), 'picker line: ' .. shown)
H.check(not shown:find('\n') and vim.fn.strdisplaywidth(shown) <= math.max(40, vim.o.columns - 10), 'short picker row: ' .. shown)
H.equal({ H.where() }, { H.path('shop/auth.py'), chosen.lnum }, 'the picker jumps to the chosen span')

-- Plain workspace/symbol works through Neovim's own UI.
local symbols
vim.lsp.buf.workspace_symbol('verify_password', {
  on_list = function(list)
    symbols = list.items
  end,
})
H.wait(function()
  return symbols ~= nil
end, 20000, 'workspace/symbol results')
local found_symbol = false
for _, item in ipairs(symbols) do
  found_symbol = found_symbol or (item.filename == H.path('shop/auth.py') and item.text:find('verify_password', 1, true) ~= nil)
end
H.check(found_symbol, 'workspace/symbol finds verify_password in shop/auth.py: ' .. vim.inspect(symbols))

-- :Codeloupe status and :Codeloupe reindex report through vim.notify.
vim.cmd('Codeloupe status')
H.wait(function()
  return H.notified('^codeloupe status')
end, 10000, ':Codeloupe status')
local status = H.notified('^codeloupe status')
H.check(status:find(H.root .. ': ready', 1, true), 'status names the ready workspace:\n' .. status)
H.check(status:find('embeddings: none', 1, true), 'status names the provider:\n' .. status)

vim.cmd('Codeloupe reindex')
H.wait(function()
  return H.notified('^codeloupe: reindexed')
end, 30000, ':Codeloupe reindex')
local files = #vim.fs.find(function(name)
  return name:match('%.py$') or name:match('%.js$')
end, { path = H.root, type = 'file', limit = math.huge })
local reindexed = H.notified('^codeloupe: reindexed')
H.check(tonumber(reindexed:match('reindexed (%d+) files')) >= files, reindexed .. ' (the fixture has ' .. files .. ' code files)')

-- A file written outside Neovim reaches the server through the file watcher the plugin opted in to.
-- (At the workspace root: without inotifywait, Neovim's fallback watcher does not see subdirectories.)
vim.fn.writefile({ 'def refund_invoice(invoice_id: int) -> None:', '    """Give the money back."""', '' },
  H.path('billing.py'))
local refund
H.wait(function()
  vim.lsp.buf.workspace_symbol('refund_invoice', {
    on_list = function(list)
      for _, item in ipairs(list.items) do
        if item.filename == H.path('billing.py') then
          refund = item
        end
      end
    end,
  })
  vim.wait(500, function()
    return refund ~= nil
  end, 50)
  return refund ~= nil
end, 30000, 'the externally written billing.py to be indexed')
H.equal(refund.lnum, 1, 'refund_invoice line')

-- A second setup() pushes its settings to the running server (workspace/didChangeConfiguration); the
-- server warns about the unknown key, under the camelCase name the plugin sent.
require('codeloupe').setup({ cmd = H.cmd, picker = 'select', settings = { embed_provider = 'none', not_a_setting = 1 } })
H.wait(function()
  return vim.fn.execute('messages'):find('notASetting', 1, true) ~= nil
end, 10000, function()
  return 'the server to warn about notASetting (messages: ' .. vim.fn.execute('messages') .. ')'
end)
H.equal(#vim.lsp.get_clients({ name = 'codeloupe' }), 1, 'a second setup() reuses the running client')
for _, progress_text in ipairs({ '^codeloupe: files', '^codeloupe: vectors', '^codeloupe: scanning', '^codeloupe: indexing' }) do
  H.check(not H.notified(progress_text), 'progress went to vim.notify: ' .. progress_text)
end

-- A refusal names its method once: "codeloupe/search failed: `query` must be at most ...", not the method twice.
vim.cmd('Codeloupe search! ' .. string.rep('word ', 4001))
H.wait(function()
  return H.notified('failed: `query` must be at most') ~= nil
end, 10000, function()
  return 'the refusal of a query over the limit (notifications: ' .. vim.inspect(H.notifications) .. ')'
end)
H.check(not H.notified('failed: codeloupe/search:'), 'the method named twice')
