-- Against the real server: :checkhealth codeloupe reports the command and version, the index, the provider.
local H = dofile(vim.fs.joinpath(vim.fs.dirname(debug.getinfo(1, 'S').source:sub(2)), 'helpers.lua'))
H.setup()

H.ready(H.client(H.open('shop/auth.py')))
vim.cmd('checkhealth codeloupe')
local report = H.text(0)
H.check(not report:find('ERROR', 1, true), 'no errors:\n' .. report)
H.check(report:find('OK server: ' .. vim.fn.exepath(H.cmd[1]), 1, true), 'the server command is found:\n' .. report)
H.check(report:find(H.root .. ': ready', 1, true), 'the workspace index is ready:\n' .. report)
H.check(report:find('embeddings: none', 1, true), 'the provider is reported:\n' .. report)
H.check(report:match('OK server: [^\n]*%(.-%d+%.%d+'), 'the server version is shown:\n' .. report)

-- The picker line follows the `picker` option: it said "OK picker: telescope.nvim" whenever Telescope was installed,
-- even with picker = 'select', and nothing of a picker = 'telescope' that searches could not honour.
require('codeloupe').setup({ cmd = H.cmd, settings = { embed_provider = 'none' }, picker = 'telescope' })
vim.cmd('checkhealth codeloupe')
report = H.text(0)
H.check(report:find('WARNING picker "telescope" is set but telescope.nvim is not installed', 1, true),
  'checkhealth should warn of a picker it cannot use:\n' .. report)
