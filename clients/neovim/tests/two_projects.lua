-- Two projects in one session: a command given from a file of the second project while its server is still
-- starting waits for that server; it must not be answered by the first project's server (which holds the
-- current directory here), with results from the wrong project.
local H = dofile(vim.fs.joinpath(vim.fs.dirname(debug.getinfo(1, 'S').source:sub(2)), 'helpers.lua'))
H.setup()

local other = vim.fs.joinpath(vim.fs.dirname(H.root), 'billing')
vim.fn.mkdir(vim.fs.joinpath(other, 'billing'), 'p')
vim.fn.writefile({ '[project]', 'name = "billing"' }, vim.fs.joinpath(other, 'pyproject.toml'))
vim.fn.writefile({
  '"""Invoices for the billing service."""',
  '',
  '',
  'def invoice_ledger_total(lines: list[float]) -> float:',
  '    """Sum an invoice ledger."""',
  '    return sum(lines)',
}, vim.fs.joinpath(other, 'billing', 'invoices.py'))

local shop = H.client(H.open('shop/auth.py'))
H.ready(shop)

vim.cmd.edit(vim.fn.fnameescape(vim.fs.joinpath(other, 'billing', 'invoices.py')))
vim.cmd('Codeloupe search! invoice ledger total')
H.wait(function()
  return #vim.fn.getqflist() > 0 or #H.notifications > 0
end, 60000, 'the search given while the second server starts')
local files = {}
for _, item in ipairs(vim.fn.getqflist()) do
  if item.bufnr > 0 then
    files[#files + 1] = vim.api.nvim_buf_get_name(item.bufnr)
  end
end
H.check(#files > 0, 'no results for the second project: ' .. vim.inspect(H.notifications))
for _, name in ipairs(files) do
  H.check(vim.startswith(vim.fs.normalize(name), other .. '/'),
    'a result from another project than the one the command was given in: ' .. name)
end
H.equal(#vim.lsp.get_clients({ name = 'codeloupe' }), 2, 'codeloupe clients (one per project)')
