-- A workspace's server stopped (or died) while its files stay open: the next command brings it back and runs,
-- instead of saying "starting the language server…" for a start nothing makes, then failing after the timeout.
local H = dofile(vim.fs.joinpath(vim.fs.dirname(debug.getinfo(1, 'S').source:sub(2)), 'helpers.lua'))
H.setup()
require('codeloupe.lsp').start_timeout_ms = 15000

local auth = H.open('shop/auth.py')
local first = H.client(auth)
H.ready(first)
vim.lsp.stop_client(first.id, true)
H.wait(function()
  return #vim.lsp.get_clients({ name = 'codeloupe' }) == 0
end, 10000, 'the server to stop')

vim.fn.setqflist({}, 'r', { title = 'before', items = {} })
vim.cmd('Codeloupe search! verify password hash')
H.wait(function()
  return #vim.fn.getqflist() > 0 or H.notified('did not start')
end, 25000, 'the search after the server stopped')
H.check(not H.notified('did not start'), 'the command waited for a server nothing started')
H.equal(vim.fn.getqflist({ title = 1 }).title, 'codeloupe: verify password hash', 'quickfix title')
local again = vim.lsp.get_clients({ name = 'codeloupe', bufnr = auth })[1]
H.check(again and again.id ~= first.id, 'a new server attached to the buffer')
