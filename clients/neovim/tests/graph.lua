-- Against the real server: :Codeloupe graph node / path / map trees and <CR> on them.
local H = dofile(vim.fs.joinpath(vim.fs.dirname(debug.getinfo(1, 'S').source:sub(2)), 'helpers.lua'))
H.setup()

local auth = H.open('shop/auth.py')
H.ready(H.client(auth))

---@param needle string
---@return integer
local function graph_view(needle)
  return H.view('codeloupe://graph', needle, 20000)
end

-- node without a name: the current file.
vim.cmd('Codeloupe graph node')
local view = graph_view('# shop/auth.py')
local text = H.text(view)
H.check(text:find('## Importers (', 1, true), 'node view sections:\n' .. text)
local importer = H.buffer_line(view, '- shop/sessions.py')
vim.api.nvim_set_current_win(vim.fn.bufwinid(view))
vim.api.nvim_win_set_cursor(0, { importer, 0 })
H.press('<CR>')
H.equal(vim.api.nvim_buf_get_name(0), H.path('shop/sessions.py'), '<CR> on an importer opens it')

-- The function takes the command's words as one string too (it raised a Lua error), and says what it takes when
-- given neither a list of words nor a string.
require('codeloupe').graph('node  shop/cart.py')
graph_view('# shop/cart.py')
require('codeloupe').graph(42)
H.check(H.notified("graph%(%) takes the command's words", vim.log.levels.ERROR), 'a wrong argument is named')

vim.cmd('Codeloupe graph path shop/cart.py shop/auth.py')
view = graph_view('# Path: shop/cart.py -> shop/auth.py')
text = H.text(view)
H.check(text:find('shop/cart.py -[', 1, true) and text:find(']-> shop/sessions.py', 1, true),
  'cart.py uses sessions.py, drawn forwards:\n' .. text)
H.check(text:find('shop/cart.py reaches shop/auth.py through what it uses', 1, true), 'the note:\n' .. text)

-- The same route walked the other way: every hop is against the dependency, drawn <-[kind]-, and each use is
-- labelled with the file that holds it, at a line that is the use.
vim.cmd('Codeloupe graph path shop/auth.py shop/cart.py')
view = graph_view('# Path: shop/auth.py -> shop/cart.py')
text = H.text(view)
H.check(text:find('1. shop/auth.py <-[', 1, true) and text:find(']- shop/sessions.py', 1, true),
  'auth.py is used by sessions.py, drawn backwards:\n' .. text)
local use_line = H.line_of('shop/sessions.py', 'verify_password')
H.check(text:find(('   use: shop/sessions.py:%d'):format(use_line), 1, true) or
  text:find(('   use: shop/sessions.py:%d'):format(H.line_of('shop/sessions.py', 'if not verify_password')), 1, true),
  'the use is labelled with sessions.py and its line:\n' .. text)
H.check(not text:find('use: shop/auth.py', 1, true), 'no use is labelled with the defining file:\n' .. text)
H.check(text:find('shop/cart.py reaches shop/auth.py through what it uses', 1, true), 'the note:\n' .. text)
vim.api.nvim_set_current_win(vim.fn.bufwinid(view))
vim.api.nvim_win_set_cursor(0, { H.buffer_line(view, '   use: shop/sessions.py'), 0 })
H.press('<CR>')
local name, line = H.where()
H.equal(name, H.path('shop/sessions.py'), '<CR> on the use opens the using file')
H.check(vim.api.nvim_buf_get_lines(0, line - 1, line, false)[1]:find('verify_password', 1, true),
  '<CR> on the use lands on the use')

-- A file that is not in the graph is said to be so, with the closest graph files by name.
H.open('README.md')
vim.cmd('Codeloupe graph node')
view = graph_view('# README.md')
text = H.text(view)
H.check(text:find('not in the graph', 1, true), 'README.md is not a graph node:\n' .. text)
H.check(not text:find('## Importers', 1, true), 'no other file is described instead:\n' .. text)
vim.cmd('Codeloupe graph node shop/sesions.py')
view = graph_view('# shop/sesions.py')
text = H.text(view)
H.check(text:find('no such file', 1, true) and text:find('- shop/sessions.py', 1, true),
  'a misspelt path is offered the real one:\n' .. text)

vim.cmd('Codeloupe graph')
view = graph_view('# Graph:')
text = H.text(view)
for _, path in ipairs({ 'shop/auth.py', 'shop/sessions.py', 'shop/cart.py', 'web/session.js', 'web/routes.js' }) do
  H.check(text:find('- ' .. path, 1, true), 'the map lists ' .. path .. ':\n' .. text)
end
-- One list of unconnected files instead of one-file communities.
H.check(text:find('## Unconnected files (', 1, true), 'the map has an unconnected list:\n' .. text)
H.check(not text:find('(1 file)', 1, true), 'no one-file community:\n' .. text)

-- The view is not markdown: `__init__` in a path is not an intraword-underscore error.
vim.cmd('syntax on')
H.equal(vim.bo[view].filetype, 'codeloupe', 'graph view filetype')
local init_line = H.buffer_line(view, 'shop/__init__.py')
local col = vim.api.nvim_buf_get_lines(view, init_line - 1, init_line, false)[1]:find('__init__', 1, true)
vim.api.nvim_set_current_win(vim.fn.bufwinid(view))
for offset = 0, 7 do
  local group = vim.fn.synIDattr(vim.fn.synID(init_line, col + offset, 1), 'name')
  H.check(group ~= 'markdownError', 'markdownError under shop/__init__.py in the graph view')
end

-- `%` is the current file, as in `:edit %`; the server would take it for a concept and answer with another file.
vim.cmd('silent! only')
vim.cmd.edit(vim.fn.fnameescape(H.path('shop/cart.py')))
local cart_buf = vim.api.nvim_get_current_buf()
vim.cmd('Codeloupe graph node %')
view = graph_view('# ')
H.wait(function()
  return H.text(view):match('^# (%S+)') == 'shop/cart.py'
end, 20000, function()
  return ':Codeloupe graph node % to show shop/cart.py, not:\n' .. H.text(view)
end)
vim.cmd('silent! only')
vim.api.nvim_set_current_buf(cart_buf)
vim.cmd('Codeloupe graph path % shop/auth.py')
graph_view('# Path: shop/cart.py -> shop/auth.py')

-- A concept answered with the closest file says so (resolvedBy), instead of reading as that file's own view; a
-- concept of several words is asked whole, not by its first word.
for _, concept in ipairs({ 'password', 'password hashing' }) do
  vim.cmd('silent! only')
  vim.cmd('Codeloupe graph node ' .. concept)
  view = graph_view('# ')
  H.wait(function()
    return H.text(view):find(('no file is called "%s"'):format(concept), 1, true) ~= nil
  end, 20000, function()
    return ('a note that %q was resolved to the closest file:\n'):format(concept) .. H.text(view)
  end)
end

-- <Tab> completes paths relative to the workspace folder, as the server takes them: it completed them relative to
-- the current directory, so from a subdirectory `shop/` completed to nothing and names came without their folder.
vim.cmd('silent! only')
vim.api.nvim_set_current_buf(cart_buf)
vim.cmd.cd(vim.fn.fnameescape(H.path('shop')))
H.equal(vim.fn.getcompletion('Codeloupe graph node shop/ca', 'cmdline'), { 'shop/cart.py' }, 'graph node completion')
H.equal(vim.fn.getcompletion('Codeloupe graph path shop/cart.py w', 'cmdline'), { 'web/' }, 'graph path completion')
H.equal(vim.fn.getcompletion('Codeloupe graph node .codel', 'cmdline'), { '.codeloupe.toml' }, 'a hidden name')
vim.cmd.cd(vim.fn.fnameescape(H.root))
