-- Against the real server and the scripted chat model (narrator and embeddings over loopback): a first ask
-- caches its answer; `:Codeloupe ask` then offers the cached question (picker and <Tab> completion), the repeat
-- is served from the flow cache and says so; `:Codeloupe tour` and `:'<,'>Codeloupe related` fill the quickfix
-- list with followable entries; a graph route shows each hop's code as on disk.
local H = dofile(vim.fs.joinpath(vim.fs.dirname(debug.getinfo(1, 'S').source:sub(2)), 'helpers.lua'))
local chat_url = os.getenv('CODELOUPE_TEST_CHAT_URL')
H.check(chat_url, 'CODELOUPE_TEST_CHAT_URL is not set')
H.setup({
  settings = {
    chat_base_url = chat_url, chat_model = 'scripted', embed_provider = 'openai', embed_base_url = chat_url,
    embed_model = 'scripted-embed', embed_dimensions = 8,
  },
  ask = { agents = false },
})

local client = H.client(H.open('shop/cart.py'))
H.ready(client)
H.wait(function() -- a flow is matched on the query vector: wait for the dense lane
  local vectors = client:request_sync('codeloupe/status', vim.empty_dict(), 5000).result.folders[1].vectors
  return vectors and vectors.total > 0 and vectors.done == vectors.total
end, 60000, 'the vectors')

local question = 'how are passwords verified at login'

---@param needle string
---@return integer
local function ask_view(needle)
  return H.view('codeloupe://ask', needle, 30000)
end

-- Nothing cached yet: the picker offers only a new question, which goes through vim.ui.input.
local offered
vim.ui.select = function(items, _, on_choice)
  offered = items
  on_choice(items[#items])
end
vim.ui.input = function(_, on_confirm)
  on_confirm(question)
end
vim.cmd('Codeloupe ask')
H.wait(function() return offered ~= nil end, 10000, 'the ask picker')
H.equal(offered, { 'new question…' }, 'an empty cache offers only a new question')
local view = ask_view('## Not cited')
H.check(H.text(view):find('Passwords are checked when a session logs in.', 1, true), 'the first answer is narrated')
H.check(not H.text(view):find('flow cache', 1, true), 'a fresh answer does not claim the cache:\n' .. H.text(view))
vim.cmd('bwipeout! ' .. view)

-- The cached question is offered first, in the picker and in completion of `:Codeloupe ask <Tab>`.
H.open('shop/cart.py')
H.equal(vim.fn.getcompletion('Codeloupe ask ', 'cmdline'), { question }, 'completion lists the cached question')
H.equal(vim.fn.getcompletion('Codeloupe ask how are pass', 'cmdline'), { 'passwords verified at login' },
  'completion replaces the word being typed with the rest of the question')
H.equal(vim.fn.getcompletion('Codeloupe ask why', 'cmdline'), {}, 'a question not cached completes to nothing')
-- <Tab> does not wait for a busy server: the list last heard of is offered at once (and asked for again).
H.with_server_stopped(function()
  H.equal(vim.fn.getcompletion('Codeloupe ask ', 'cmdline'), { question }, 'completion with the server stopped')
end)
offered = nil
vim.ui.select = function(items, _, on_choice)
  offered = items
  on_choice(items[1])
end
vim.cmd('Codeloupe ask')
H.wait(function() return offered ~= nil end, 10000, 'the ask picker')
H.equal(offered, { question, 'new question…' }, 'the cached question, then a new one')
view = ask_view('Served from the flow cache')
H.check(H.text(view):find('Passwords are checked when a session logs in.', 1, true), 'the cached answer is shown')

-- The tour: entry points, then names by how many files mention them, each opening at its definition.
H.open('shop/cart.py')
vim.fn.setqflist({}, 'r')
vim.cmd('Codeloupe tour')
H.wait(function() return vim.fn.getqflist({ title = 1 }).title == 'codeloupe: tour' end, 20000, 'the tour list')
local stop
for _, item in ipairs(vim.fn.getqflist()) do
  if item.text:find('verify_password (', 1, true) then
    stop = item
  end
end
H.check(stop and stop.text:find('1 file mentions it', 1, true), 'verify_password is a stop labelled with mentions: '
  .. vim.inspect(vim.fn.getqflist()))
H.equal({ vim.api.nvim_buf_get_name(stop.bufnr), stop.lnum }, { H.path('shop/auth.py'), H.line_of('shop/auth.py',
  'def verify_password') }, 'the stop opens at the definition')
vim.cmd('cclose')

-- Related code for the selected lines: the nearest chunks of other files, none of the selection itself.
local auth = H.open('shop/auth.py')
local first = H.line_of('shop/auth.py', 'def verify_password')
vim.api.nvim_win_set_cursor(0, { first, 0 })
H.press('Vj<Esc>')
vim.cmd("'<,'>Codeloupe related")
local title = ('codeloupe: related to shop/auth.py:%d-%d'):format(first, first + 1)
H.wait(function() return vim.fn.getqflist({ title = 1 }).title == title end, 20000, 'the related list')
local related = vim.fn.getqflist()
H.check(#related > 0, 'related chunks are listed')
for _, item in ipairs(related) do
  H.check(not (item.bufnr == auth and item.lnum <= first + 1 and item.end_lnum >= first),
    'the selection itself is never related: ' .. vim.inspect(item))
end
vim.cmd('cclose')

-- A graph route shows the use site's code under its label, verbatim from disk.
vim.cmd('Codeloupe graph path shop/sessions.py shop/auth.py')
local graph
H.wait(function()
  graph = vim.fn.bufnr('codeloupe://graph')
  return graph ~= -1 and H.text(graph):find('   use: ', 1, true) ~= nil
end, 20000, 'the route')
local use_line = H.line_of('shop/sessions.py', 'if not verify_password')
local shown = H.buffer_line(graph, '     | ' .. vim.fn.readfile(H.path('shop/sessions.py'))[use_line])
vim.api.nvim_set_current_win(vim.fn.bufwinid(graph))
vim.api.nvim_win_set_cursor(0, { shown, 0 })
H.press('<CR>')
H.equal({ H.where() }, { H.path('shop/sessions.py'), use_line }, '<CR> on a hop code line opens that line')
H.check(not H.notified('failed', vim.log.levels.ERROR), 'no errors')
vim.cmd('qall!')
