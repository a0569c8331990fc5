-- Against the real server, no model: a workspace with 35 scripts behind a `__main__` guard each. `:Codeloupe tour`
-- lists the strongest 30 and says how many more there are and how to list them; `:Codeloupe tour N` lists N.
local H = dofile(vim.fs.joinpath(vim.fs.dirname(debug.getinfo(1, 'S').source:sub(2)), 'helpers.lua'))
H.setup()

H.ready(H.client(H.open('shop/cart.py')))

--- `:Codeloupe {command}`'s quickfix list, once it replaced the one there before.
---@param command string
---@return table[]
local function tour_list(command)
  vim.fn.setqflist({}, 'r', { title = 'before', items = {} })
  vim.cmd('Codeloupe ' .. command)
  H.wait(function() return vim.fn.getqflist({ title = 1 }).title == 'codeloupe: tour' end, 20000, command)
  return vim.fn.getqflist()
end

---@param list table[]
---@return table[]
local function entry_points(list)
  return vim.tbl_filter(function(item) return item.text:find('^entry point ') ~= nil end, list)
end

local cut = tour_list('tour')
H.equal(#entry_points(cut), 30, 'the strongest 30 entry points')
local more = cut[31]
H.equal({ more.text, more.valid }, { '── 5 more entry points (:Codeloupe tour 35 lists them all) ──', 0 },
  'after them, a line (no file: :cnext steps over it) saying how many more and how to list them')
H.check(cut[32] and cut[32].text:find('mention'), 'then the names: ' .. vim.inspect(cut[32]))

local every = tour_list('tour 35')
H.equal(#entry_points(every), 35, ':Codeloupe tour 35 lists every one')
H.check(not vim.iter(every):any(function(item) return item.valid == 0 end), 'nothing more to list: ' .. vim.inspect(every))
H.equal(vim.tbl_map(function(item) return { item.bufnr, item.lnum } end, vim.list_slice(every, 1, 30)),
  vim.tbl_map(function(item) return { item.bufnr, item.lnum } end, vim.list_slice(cut, 1, 30)), 'the strongest first, as cut')

for _, bad in ipairs({ '0', '501', 'all', '3.5' }) do
  vim.fn.setqflist({}, 'r', { title = 'before', items = {} })
  H.notifications = {}
  vim.cmd('Codeloupe tour ' .. bad)
  H.check(H.notified('usage: :Codeloupe tour %[N%] %(N: how many entry points to list, 1%-500%)', vim.log.levels.ERROR),
    bad .. ': refused with the usage')
  H.equal(vim.fn.getqflist({ title = 1 }).title, 'before', bad .. ': the quickfix list is left alone')
end
H.check(not H.notified('failed', vim.log.levels.ERROR), 'no request failed')
