-- A server command that runs but exits at once (a broken install): a command given then waited 30 s and said the
-- server "did not start within 30 s", where it had exited; it says so as soon as the server exits.
local H = dofile(vim.fs.joinpath(vim.fs.dirname(debug.getinfo(1, 'S').source:sub(2)), 'helpers.lua'))
H.setup({ cmd = { 'sh', '-c', 'exit 3' } })

H.open('shop/auth.py')
vim.cmd('Codeloupe search! password hashing')
H.wait(function()
  return H.notified('codeloupe: the language server exited while starting %(exit code 3%)', vim.log.levels.ERROR)
end, 10000, 'the command to say the server exited')
H.check(not H.notified('did not start within'), 'no "did not start in time" as well')
