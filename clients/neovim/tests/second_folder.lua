-- A second workspace folder added to the running client (vim.lsp.buf.add_workspace_folder()): a command given in one
-- of its files is about that folder. graph, tour, reindex and ask sent the client's first folder (its root_dir), so
-- `:Codeloupe graph node` in the second folder's file said it was "not in the graph (outside the workspace)", the tour
-- listed the first folder's entry points and `:Codeloupe reindex` re-scanned the first folder.
local H = dofile(vim.fs.joinpath(vim.fs.dirname(debug.getinfo(1, 'S').source:sub(2)), 'helpers.lua'))
H.setup()

local other = vim.fs.joinpath(vim.fs.dirname(H.root), 'billing')
vim.fn.mkdir(other, 'p')
vim.fn.writefile({ '[project]', 'name = "billing"' }, vim.fs.joinpath(other, 'pyproject.toml'))
local invoices = vim.fs.joinpath(other, 'invoices.py')
vim.fn.writefile({ 'def invoice_total(lines):', '    return sum(lines)', '', '', "if __name__ == '__main__':",
  '    print(invoice_total([1.0]))' }, invoices)

local shop = H.client(H.open('shop/auth.py'))
H.ready(shop)
vim.lsp.buf.add_workspace_folder(other)
H.wait(function()
  return #(shop.workspace_folders or {}) == 2
end, 5000, 'the second folder')
H.ready(shop)
vim.cmd.edit(vim.fn.fnameescape(invoices))
H.equal(H.client(0).id, shop.id, 'the second folder is served by the running client')

vim.cmd('Codeloupe graph node')
local graph = H.view('codeloupe://graph', '# invoices.py', 20000)
H.check(not H.text(graph):find('not in the graph', 1, true), 'graph node of the second folder\'s file:\n'
  .. H.text(graph))

vim.cmd.edit(vim.fn.fnameescape(invoices))
vim.cmd('Codeloupe tour')
H.wait(function()
  return vim.fn.getqflist({ title = 1 }).title == 'codeloupe: tour'
end, 20000, 'the tour')
H.equal(vim.api.nvim_buf_get_name(vim.fn.getqflist()[1].bufnr), invoices, 'the tour\'s first stop')

vim.cmd.edit(vim.fn.fnameescape(invoices))
H.notifications = {}
vim.cmd('Codeloupe reindex')
H.wait(function()
  return H.notified('reindexed')
end, 20000, 'the reindex')
H.equal(H.notified('reindexed'), 'codeloupe: reindexed 2 files, 2 chunks', 'the reindex of the second folder')
