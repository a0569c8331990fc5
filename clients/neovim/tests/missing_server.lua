-- A server command that does not exist: setup() reports it, commands repeat why, checkhealth errors.
local H = dofile(vim.fs.joinpath(vim.fs.dirname(debug.getinfo(1, 'S').source:sub(2)), 'helpers.lua'))

local missing = vim.fs.joinpath(H.root or vim.fn.tempname(), 'no-such-codeloupe-lsp')
H.setup({ cmd = { missing } })

local message = H.notified('not executable', vim.log.levels.ERROR)
H.check(message, 'setup() with a missing server should notify an error')
H.check(message:find(missing, 1, true), 'the error should name the command: ' .. message)
-- No package named codeloupe is published: the advice is the checkout's install, never `pip install codeloupe`.
H.check(message:find('pip install -c constraints.txt -e .', 1, true) and not message:find('pip install codeloupe', 1, true),
  'the error should say how to install from a checkout: ' .. message)

H.open('shop/auth.py')
H.equal(#vim.lsp.get_clients({ name = 'codeloupe' }), 0, 'clients started for a missing command')

H.notifications = {}
vim.cmd('Codeloupe search password hashing')
H.check(H.notified('not executable', vim.log.levels.ERROR), ':Codeloupe search should explain the missing server')

vim.cmd('checkhealth codeloupe')
local report = H.text(0)
H.check(report:find('ERROR', 1, true) and report:find(missing, 1, true),
  'checkhealth should report an error naming the command:\n' .. report)
H.check(report:find('pip install -c constraints.txt -e .', 1, true) and not report:find('pip install codeloupe', 1, true),
  'checkhealth should say how to install from a checkout:\n' .. report)
