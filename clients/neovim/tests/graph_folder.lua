-- Against the real server: `:Codeloupe graph node DIR` (a typed folder, `%:h`, a directory's buffer) shows the
-- folder's part of the graph: its communities by name, the edges across it, its files; <CR> opens each.
local H = dofile(vim.fs.joinpath(vim.fs.dirname(debug.getinfo(1, 'S').source:sub(2)), 'helpers.lua'))

-- A folder outside shop/ that uses it, so shop/ has an edge in from outside and tools/ one out.
vim.fn.mkdir(H.path('tools'), 'p')
vim.fn.writefile({ '"""Check out from the command line."""', '', 'from shop.cart import checkout', '', '',
  'def main(store, token):', '    return checkout(store, token, [1.0, 2.0])' }, H.path('tools/checkout_cli.py'))
H.setup()
local cart = H.open('shop/cart.py')
H.ready(H.client(cart))
local use_line = H.line_of('tools/checkout_cli.py', 'from shop.cart import checkout')

---@param needle string
---@return integer
local function graph_view(needle)
  return H.view('codeloupe://graph', needle, 20000)
end

--- <CR> on the first line of view `buf` holding `needle`; returns the file and line it opened.
local function follow(buf, needle)
  vim.api.nvim_set_current_win(vim.fn.bufwinid(buf))
  vim.api.nvim_win_set_cursor(0, { H.buffer_line(buf, needle), 0 })
  H.press('<CR>')
  return H.where()
end

vim.cmd('Codeloupe graph node shop')
local view = graph_view('# shop/ (folder: ')
local text = H.text(view)
H.check(not text:find('nil', 1, true) and not text:find('table: 0x', 1, true), 'no nil or table in the view:\n' .. text)
H.check(text:find('## Communities (', 1, true), 'its communities:\n' .. text)
H.check(text:find(('## Used by, from outside (1)\n- shop/cart.py <-[import]- tools/checkout_cli.py:%d: checkout')
  :format(use_line), 1, true), 'the edge in from outside, with the line of the use:\n' .. text)
H.check(text:find('## Uses, outside the folder (0)', 1, true), 'nothing outside used:\n' .. text)
for _, path in ipairs({ 'shop/auth.py', 'shop/sessions.py', 'shop/cart.py' }) do
  H.check(text:find('\n- ' .. path .. ' (', 1, true), 'the files list ' .. path .. ':\n' .. text)
end
local name, line = follow(view, '- shop/cart.py <-[')
H.equal(name, H.path('tools/checkout_cli.py'), '<CR> on an edge in opens the file that uses the folder')
H.equal(line, use_line, '<CR> on an edge in lands on the use')
name = follow(view, '- shop/sessions.py (')
H.equal(name, H.path('shop/sessions.py'), '<CR> on a file of the folder opens it')

-- The other side of the same edge, asked as `%:h` from a file of the folder: drawn from the user, at its line.
vim.cmd('silent! only')
vim.cmd.edit(vim.fn.fnameescape(H.path('tools/checkout_cli.py')))
vim.cmd('Codeloupe graph node %:h')
view = graph_view('# tools/ (folder: 1 file of the graph)')
text = H.text(view)
H.check(text:find(('- tools/checkout_cli.py:%d -[import]-> shop/cart.py: checkout'):format(use_line), 1, true),
  'the edge out, the line on the file that holds it:\n' .. text)
name, line = follow(view, '- tools/checkout_cli.py:')
H.equal(name, H.path('tools/checkout_cli.py'), '<CR> on an edge out opens the file inside, which uses the other')
H.equal(line, use_line, 'at the use')

-- A directory's buffer (what a file explorer shows): `:Codeloupe graph node` there asks for that folder.
vim.cmd('silent! only')
vim.cmd.enew()
vim.api.nvim_buf_set_name(0, H.path('web'))
vim.bo.buftype = 'nofile'
vim.cmd('Codeloupe graph node')
view = graph_view('# web/ (folder: ')
H.check(H.text(view):find('\n- web/routes.js (', 1, true), 'the directory buffer asks for its folder:\n' .. H.text(view))

-- A folder with no code file of the graph says so.
vim.fn.mkdir(H.path('notes'), 'p')
vim.fn.writefile({ '# Notes' }, H.path('notes/todo.md'))
vim.cmd('Codeloupe graph node notes')
view = graph_view('# notes')
H.check(H.text(view):find('a folder holding no code file of the graph', 1, true), 'an empty folder:\n' .. H.text(view))
