-- Shared by the headless test scripts: `nvim --headless --clean -l <script>` with the environment
-- tests/test_neovim_client.py sets (CODELOUPE_TEST_WORKSPACE, CODELOUPE_TEST_CMD).
local H = {}

H.plugin_dir = vim.fs.dirname(vim.fs.dirname(vim.fs.normalize(debug.getinfo(1, 'S').source:sub(2))))
H.root = os.getenv('CODELOUPE_TEST_WORKSPACE')
H.cmd = os.getenv('CODELOUPE_TEST_CMD') and vim.json.decode(os.getenv('CODELOUPE_TEST_CMD'))

--- Every vim.notify call, in order: { msg = string, level = integer }.
H.notifications = {}

--- Stop with a clear message and a non-zero exit status.
---@param message string
function H.fail(message)
  io.stderr:write('FAIL: ' .. message .. '\n')
  io.stderr:write('notifications:\n')
  for _, n in ipairs(H.notifications) do
    io.stderr:write(('  [%s] %s\n'):format(tostring(n.level), n.msg))
  end
  os.exit(1)
end

---@param condition any
---@param message string
function H.check(condition, message)
  if not condition then
    H.fail(message)
  end
end

---@param actual any
---@param expected any
---@param what string
function H.equal(actual, expected, what)
  if not vim.deep_equal(actual, expected) then
    H.fail(('%s: expected %s, got %s'):format(what, vim.inspect(expected), vim.inspect(actual)))
  end
end

--- Wait for `condition` (checked every 20 ms while the event loop runs); fail after `timeout_ms`.
---@param condition fun(): any
---@param timeout_ms integer
---@param what string|fun(): string  a function is called on timeout, to describe the state then
function H.wait(condition, timeout_ms, what)
  if not vim.wait(timeout_ms, condition, 20) then
    H.fail(('timed out after %d ms waiting for %s'):format(timeout_ms, type(what) == 'function' and what() or what))
  end
end

---@param pattern string  a Lua pattern
---@param level integer?
---@return string?
function H.notified(pattern, level)
  for _, n in ipairs(H.notifications) do
    if n.msg:find(pattern) and (level == nil or n.level == level) then
      return n.msg
    end
  end
end

--- Load the plugin from this checkout and call setup() with the test server and `opts` over it.
---@param opts table?
function H.setup(opts)
  vim.notify = function(msg, level)
    H.notifications[#H.notifications + 1] = { msg = tostring(msg), level = level or vim.log.levels.INFO }
  end
  vim.opt.runtimepath:prepend(H.plugin_dir)
  vim.cmd('filetype on')
  vim.cmd.runtime('plugin/codeloupe.lua')
  local defaults = {
    cmd = H.cmd,
    -- BM25 and symbol lanes only: no model load, so each script's index is ready in a second or two.
    settings = { embed_provider = 'none' },
  }
  require('codeloupe').setup(vim.tbl_deep_extend('force', defaults, opts or {}))
end

--- setup() against the scripted chat model (tests/chat_server.py; the runner sets its address) with one-shot asks
--- and `settings` over the defaults, then shop/cart.py opened and its folder indexed: where every ask script starts.
---@param settings table?
function H.scripted_ask(settings)
  local chat_url = os.getenv('CODELOUPE_TEST_CHAT_URL')
  H.check(chat_url, 'CODELOUPE_TEST_CHAT_URL is not set')
  H.setup({
    settings = vim.tbl_extend('force', { chat_base_url = chat_url, chat_model = 'scripted' }, settings or {}),
    ask = { agents = false },
  })
  H.ready(H.client(H.open('shop/cart.py')))
end

---@param relative string
---@return string
function H.path(relative)
  return vim.fs.joinpath(H.root, relative)
end

--- Edit a workspace file; returns its buffer.
---@param relative string
---@return integer
function H.open(relative)
  vim.cmd.edit(vim.fn.fnameescape(H.path(relative)))
  return vim.api.nvim_get_current_buf()
end

--- The codeloupe client attached to `bufnr`, once it has initialized.
---@param bufnr integer
---@return vim.lsp.Client
function H.client(bufnr)
  local client
  H.wait(function()
    client = vim.lsp.get_clients({ name = 'codeloupe', bufnr = bufnr })[1]
    return client and client.initialized
  end, 30000, 'the codeloupe client to attach to ' .. vim.api.nvim_buf_get_name(bufnr))
  return client
end

--- Wait until every folder of `client` reports state "ready".
---@param client vim.lsp.Client
function H.ready(client)
  local last
  H.wait(function()
    local response = client:request_sync('codeloupe/status', vim.empty_dict(), 5000)
    if not response or response.err then
      last = response and response.err
      return false
    end
    last = response.result
    local folders = response.result.folders or {}
    for _, folder in ipairs(folders) do
      if folder.state == 'error' then
        H.fail('indexing failed: ' .. vim.inspect(folder))
      end
      if folder.state ~= 'ready' then
        return false
      end
    end
    return #folders > 0
  end, 60000, function()
    return 'the index to be ready (last status: ' .. vim.inspect(last) .. ')'
  end)
end

--- The 1-based number of the first line of a workspace file containing `needle` (plain text).
---@param relative string
---@param needle string
---@return integer
function H.line_of(relative, needle)
  for number, line in ipairs(vim.fn.readfile(H.path(relative))) do
    if line:find(needle, 1, true) then
      return number
    end
  end
  H.fail(('%q not found in %s'):format(needle, relative))
  return 0
end

--- Lines of a buffer as one string.
---@param bufnr integer
---@return string
function H.text(bufnr)
  return table.concat(vim.api.nvim_buf_get_lines(bufnr, 0, -1, false), '\n')
end

--- The buffer named `name` (a view such as `codeloupe://graph`) once its text holds `needle`; fails after
--- `timeout_ms` with what the view shows.
---@param name string
---@param needle string
---@param timeout_ms integer
---@return integer
function H.view(name, needle, timeout_ms)
  local buf
  H.wait(function()
    buf = vim.fn.bufnr(name)
    return buf ~= -1 and H.text(buf):find(needle, 1, true) ~= nil
  end, timeout_ms, function()
    return ('%s to show %s: %s'):format(name, needle, buf and buf ~= -1 and H.text(buf) or 'no such buffer')
  end)
  return buf
end

--- The first line number of `bufnr` containing `needle` (plain text).
---@param bufnr integer
---@param needle string
---@return integer
function H.buffer_line(bufnr, needle)
  for number, line in ipairs(vim.api.nvim_buf_get_lines(bufnr, 0, -1, false)) do
    if line:find(needle, 1, true) then
      return number
    end
  end
  H.fail(('%q not found in buffer %s:\n%s'):format(needle, vim.api.nvim_buf_get_name(bufnr), H.text(bufnr)))
  return 0
end

--- Press keys as a user would (mappings apply) and let them run.
---@param keys string
function H.press(keys)
  vim.api.nvim_feedkeys(vim.keycode(keys), 'x', false)
end

--- Press K on the cursor and return the text of the hover float it opens.
---@return string
function H.hover()
  H.press('K')
  local text
  H.wait(function()
    for _, win in ipairs(vim.api.nvim_list_wins()) do
      if vim.api.nvim_win_get_config(win).relative ~= '' then
        text = H.text(vim.api.nvim_win_get_buf(win))
        return true
      end
    end
  end, 10000, 'the hover float')
  return text
end

--- The buffer shown in the current window and the cursor line.
---@return string name, integer line
function H.where()
  return vim.api.nvim_buf_get_name(0), vim.api.nvim_win_get_cursor(0)[1]
end

--- The language server's process (the editor's only child).
---@return integer
function H.server_pid()
  local children = vim.api.nvim_get_proc_children(vim.fn.getpid())
  H.equal(#children, 1, 'one child process, the server: ' .. vim.inspect(children))
  return children[1]
end

--- Run `fn` with the server stopped (SIGSTOP): no request is answered meanwhile, so whatever `fn` asks for is still
--- outstanding when `fn` returns (a command that waited for the answer would wait until its timeout). A timer then
--- runs, as it does while the editor is free, before the server goes on. A failure in between is reported once
--- the server runs again (exiting with it stopped would leave it stopped).
---@param fn fun()
function H.with_server_stopped(fn)
  local pid = H.server_pid()
  local fail = H.fail
  H.fail = function(message)
    error(message, 0)
  end
  H.equal(vim.uv.kill(pid, 'sigstop'), 0, 'the server stopped')
  local ok, err = pcall(function()
    fn()
    local ticked = false
    vim.defer_fn(function()
      ticked = true
    end, 0)
    H.wait(function()
      return ticked
    end, 5000, 'a timer to run while the request is outstanding')
  end)
  vim.uv.kill(pid, 'sigcont')
  H.fail = fail
  H.check(ok, tostring(err))
end

return H
