-- A command given while the server is still starting waits for it instead of failing with "no language
-- server is running" (issue 14); the search runs once the client attaches.
local H = dofile(vim.fs.joinpath(vim.fs.dirname(debug.getinfo(1, 'S').source:sub(2)), 'helpers.lua'))
H.setup()

local auth = H.open('shop/auth.py')
H.equal(#vim.lsp.get_clients({ name = 'codeloupe', bufnr = auth }), 0, 'attached clients right after opening')
vim.cmd('Codeloupe search! verify password hash')
vim.cmd('Codeloupe graph node')
H.wait(function()
  return #vim.fn.getqflist() > 0
end, 30000, 'the search given during start-up to fill the quickfix list')
H.check(vim.fn.getqflist({ title = 1 }).title == 'codeloupe: verify password hash', 'quickfix title')
H.wait(function()
  local buf = vim.fn.bufnr('codeloupe://graph')
  return buf ~= -1 and H.text(buf):find('# shop/auth.py', 1, true) ~= nil
end, 30000, 'the graph node of the file the command was given in')
H.check(not H.notified('no language server'), 'a command during start-up was refused')
