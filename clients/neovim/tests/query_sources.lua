-- Against the real server: a search's query from <cword>, from a visual selection (every line kept), and from
-- the issue buffer a multi-line bug report is pasted into.
local H = dofile(vim.fs.joinpath(vim.fs.dirname(debug.getinfo(1, 'S').source:sub(2)), 'helpers.lua'))
H.setup({ picker = 'select' })

local auth = H.open('shop/auth.py')
H.ready(H.client(auth))

---@param title string
local function quickfix_titled(title)
  H.wait(function()
    return vim.fn.getqflist({ title = 1 }).title == title and #vim.fn.getqflist() > 0
  end, 20000, function()
    return ('quickfix titled %q (it is %q)'):format(title, vim.fn.getqflist({ title = 1 }).title)
  end)
end

-- No query: the word under the cursor.
vim.api.nvim_win_set_cursor(0, { H.line_of('shop/auth.py', 'def verify_password'), 6 })
vim.cmd('Codeloupe search!')
quickfix_titled('codeloupe: verify_password')
vim.cmd('cclose')

-- A visual selection of several lines is the query, newlines and all.
vim.fn.setqflist({}, 'r')
local first = H.line_of('shop/auth.py', 'def hash_password')
vim.api.nvim_set_current_buf(auth)
vim.api.nvim_win_set_cursor(0, { first, 0 })
H.press('Vj<Esc>')
vim.cmd("'<,'>Codeloupe search!")
quickfix_titled('codeloupe: def hash_password(password: str, salt: str) -> str: …')
vim.cmd('cclose')

-- The issue buffer: paste a traceback, :w searches with all of it (the server's issue mode pins the frame).
vim.cmd('Codeloupe issue!')
H.equal(vim.api.nvim_buf_get_name(0), 'codeloupe://issue', 'the issue buffer opens')
vim.api.nvim_buf_set_lines(0, 0, -1, false, {
  'Login fails for every user after the upgrade',
  'Traceback (most recent call last):',
  ('  File "%s", line 14, in verify_password'):format(H.path('shop/auth.py')),
  '    return hmac.compare_digest(hash_password(password, salt), expected)',
  'TypeError: unsupported operand type(s)',
})
vim.fn.setqflist({}, 'r')
vim.cmd('write')
quickfix_titled('codeloupe: Login fails for every user after the upgrade …')
local top = vim.fn.getqflist()[1]
H.equal(vim.api.nvim_buf_get_name(top.bufnr), H.path('shop/auth.py'), 'the traceback pins shop/auth.py first')
H.check(not H.notified('failed', vim.log.levels.ERROR), 'no errors')

-- The Lua API mapped as it is (a mapping calls it with no argument): search() raised "s: expected string, got nil";
-- it takes the word under the cursor as :Codeloupe search does.
vim.keymap.set('n', '<Space>w', require('codeloupe').search)
vim.api.nvim_set_current_buf(auth)
vim.api.nvim_win_set_cursor(0, { H.line_of('shop/auth.py', 'def hash_password'), 6 })
local offered
vim.ui.select = function(items, opts)
  offered = { prompt = opts.prompt, count = #items }
end
H.press('<Space>w')
H.wait(function() return offered ~= nil end, 20000, 'the picker of require("codeloupe").search()')
H.equal(offered.prompt, 'codeloupe: hash_password', 'the query of search() without one')
-- ask() without a question offers the cached questions, as :Codeloupe ask does (here only "new question…").
offered = nil
H.check(pcall(require('codeloupe').ask), 'ask() without a question')
H.wait(function() return offered ~= nil end, 20000, 'the picker of require("codeloupe").ask()')
H.equal(offered.prompt, 'codeloupe ask', 'ask() without a question offers the cached ones')
