-- :Codeloupe tour and :Codeloupe related with nothing to list (a project holding one README) say so once,
-- instead of opening an empty quickfix window with no word of why.
local H = dofile(vim.fs.joinpath(vim.fs.dirname(debug.getinfo(1, 'S').source:sub(2)), 'helpers.lua'))
H.setup()

local notes = vim.fs.joinpath(vim.fs.dirname(H.root), 'notes')
vim.fn.mkdir(vim.fs.joinpath(notes, '.git'), 'p')
vim.fn.writefile({ '# Notes', '', 'Just some notes about nothing in particular.' }, vim.fs.joinpath(notes, 'README.md'))
vim.cmd.edit(vim.fn.fnameescape(vim.fs.joinpath(notes, 'README.md')))
H.ready(H.client(vim.api.nvim_get_current_buf()))

for _, case in ipairs({ { 'tour', 'codeloupe: tour: nothing to show' }, { 'related', 'nothing found' } }) do
  vim.fn.setqflist({}, 'r', { title = 'before', items = {} })
  H.notifications = {}
  vim.cmd('Codeloupe ' .. case[1])
  H.wait(function()
    return #H.notifications > 0 or vim.fn.getqflist({ title = 1 }).title ~= 'before'
  end, 10000, ':Codeloupe ' .. case[1] .. ' to answer')
  vim.wait(200)
  H.check(H.notified(vim.pesc(case[2]), vim.log.levels.WARN), case[1] .. ': no message for an empty answer')
  H.equal(#H.notifications, 1, case[1] .. ': messages')
  H.equal(vim.fn.getqflist({ title = 1 }).title, 'before', case[1] .. ': the quickfix list was replaced by an empty one')
  H.equal(#vim.api.nvim_list_wins(), 1, case[1] .. ': windows')
end
