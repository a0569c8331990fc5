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
