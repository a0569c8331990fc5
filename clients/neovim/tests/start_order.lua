-- Start-up order on the README's setup (`setup({})`, the server found on PATH), opening a Python file:
-- 1. the server is already starting when the file's filetype plugins run (a FileType autocommand made before
--    setup(), as `filetype plugin on` makes theirs, sees its client): Neovim's python ftplugin alone can spend a
--    second probing for the python3 provider, and the server used to start only after it;
-- 2. the index's progress reaches Neovim before the server registers its file watcher, which Neovim answers by
--    walking the whole workspace with its event loop blocked (half a second at 40K files, loaded), holding back
--    any progress queued behind it.
local H = dofile(vim.fs.joinpath(vim.fs.dirname(debug.getinfo(1, 'S').source:sub(2)), 'helpers.lua'))

vim.opt.runtimepath:prepend(H.plugin_dir)
vim.cmd('filetype on')
vim.cmd.runtime('plugin/codeloupe.lua')

local clients_at_filetype
vim.api.nvim_create_autocmd('FileType', {
  pattern = 'python',
  once = true,
  callback = function()
    -- `_uninitialized`: a client still starting (get_clients lists initialized ones only).
    clients_at_filetype = #vim.lsp.get_clients({ name = 'codeloupe', _uninitialized = true })
  end,
})

require('codeloupe').setup({})

local order = {}
local function saw(what)
  if not vim.tbl_contains(order, what) then
    order[#order + 1] = what
  end
end
vim.api.nvim_create_autocmd('LspProgress', {
  callback = function()
    saw('progress')
  end,
})
local watchfiles = require('vim.lsp._watchfiles')
local register = watchfiles.register
watchfiles.register = function(...)
  saw('file watcher registration')
  return register(...)
end

local buf = H.open('shop/auth.py')
H.equal(clients_at_filetype, 1, 'codeloupe clients started when the filetype plugins ran')
H.client(buf)
H.wait(function()
  return #order == 2
end, 30000, 'indexing progress and the file watcher registration')
H.equal(order, { 'progress', 'file watcher registration' }, 'what reached Neovim first')
