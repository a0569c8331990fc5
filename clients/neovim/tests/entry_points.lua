-- Against the real server, no model: a workspace with a `main` function. The tour lists the entry point before
-- the most mentioned names, and an ask whose question is location-shaped marks the entry point it appended.
local H = dofile(vim.fs.joinpath(vim.fs.dirname(debug.getinfo(1, 'S').source:sub(2)), 'helpers.lua'))
H.setup()

H.ready(H.client(H.open('shop/cli.py')))

vim.cmd('Codeloupe tour')
H.wait(function() return vim.fn.getqflist({ title = 1 }).title == 'codeloupe: tour' end, 20000, 'the tour list')
local tour = vim.fn.getqflist()
H.check(tour[1] and tour[1].text:find('^entry point %(main function%)'), 'the entry point comes first: ' .. vim.inspect(tour))
H.equal({ vim.api.nvim_buf_get_name(tour[1].bufnr), tour[1].lnum }, { H.path('shop/cli.py'), H.line_of('shop/cli.py', 'def main') },
  'the entry point opens at main')
H.check(tour[2] and tour[2].text:find('mention'), 'then the names, labelled as mentions: ' .. vim.inspect(tour))

vim.cmd('Codeloupe ask where does the program start')
local view
H.wait(function()
  view = vim.fn.bufnr('codeloupe://ask')
  return view ~= -1 and H.text(view):find('## Related', 1, true) ~= nil
end, 30000, 'the ask view')
local row = H.buffer_line(view, '- `shop/cli.py:')
H.check(vim.api.nvim_buf_get_lines(view, row - 1, row, false)[1]:find('_(via entry)_', 1, true),
  'the appended entry point says how it came:\n' .. H.text(view))
H.check(not H.notified('failed', vim.log.levels.ERROR), 'no errors')
