-- The setup exactly as the README documents it: `require('codeloupe').setup({})`, the server found on PATH, no
-- test options. Nothing may land in :messages (each line there is a hit-enter prompt in a real terminal):
-- not a settings warning from the server, not indexing progress. The one message is the search's result.
local plugin_dir = vim.fs.dirname(vim.fs.dirname(vim.fs.normalize(debug.getinfo(1, 'S').source:sub(2))))
local root = os.getenv('CODELOUPE_TEST_WORKSPACE')

local function fail(message)
  io.stderr:write('FAIL: ' .. message .. '\n:messages:\n' .. vim.fn.execute('messages') .. '\n')
  os.exit(1)
end

vim.opt.runtimepath:prepend(plugin_dir)
vim.cmd('filetype on')
vim.cmd.runtime('plugin/codeloupe.lua')

require('codeloupe').setup({})

vim.cmd.edit(vim.fn.fnameescape(vim.fs.joinpath(root, 'shop/auth.py')))
local client
if not vim.wait(30000, function()
  client = vim.lsp.get_clients({ name = 'codeloupe', bufnr = 0 })[1]
  return client and client.initialized
end, 20) then
  fail('the client never attached')
end
if vim.json.encode(client.config.init_options) ~= '{}' then
  fail('initializationOptions should be the object {}, got ' .. vim.json.encode(client.config.init_options))
end

-- Wait for the index to finish (its progress ends), then search into the quickfix list.
if not vim.wait(60000, function()
  return require('codeloupe').status() == 'codeloupe: ready'
end, 20) then
  fail('the index never finished; statusline says ' .. require('codeloupe').status())
end
vim.cmd('Codeloupe search! verify password hash')
if not vim.wait(20000, function()
  return #vim.fn.getqflist() > 0
end, 20) then
  fail('no quickfix results')
end
-- Let any late server message arrive before looking.
vim.wait(500)
local messages = vim.trim(vim.fn.execute('messages'))
if messages ~= '' then
  fail('expected :messages to be empty after the README setup, got:\n' .. messages)
end
