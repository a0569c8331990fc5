--- The codeloupe client: how it is started, which buffers it attaches to, and requests to it.
local config = require('codeloupe.config')
local locations = require('codeloupe.locations')
local text_lines = require('codeloupe.lines')

local M = {}

M.name = 'codeloupe'

local has_011 = vim.fn.has('nvim-0.11') == 1

--- Why the server cannot start (set by setup when the command is missing); commands repeat it.
---@type string?
M.start_error = nil

--- The workspace root of `bufnr`: the first marker entry (in priority order) found above the file.
---@param bufnr integer
---@param markers (string|string[])[]
---@return string?
function M.root_dir(bufnr, markers)
  if vim.api.nvim_buf_get_name(bufnr) == '' then
    return nil
  end
  for _, marker in ipairs(markers) do
    local root = vim.fs.root(bufnr, marker)
    if root then
      return root
    end
  end
end

--- Client capabilities: Neovim's, plus file-watcher registration so that files changed outside the
--- editor (git checkout, formatters) reach the server. Neovim does not advertise it on Linux.
---@param extra table?
---@return lsp.ClientCapabilities
function M.capabilities(extra)
  local capabilities = vim.lsp.protocol.make_client_capabilities()
  capabilities.workspace = capabilities.workspace or {}
  capabilities.workspace.didChangeWatchedFiles = vim.tbl_extend(
    'force',
    capabilities.workspace.didChangeWatchedFiles or {},
    { dynamicRegistration = true, relativePatternSupport = true }
  )
  return vim.tbl_deep_extend('force', capabilities, extra or {})
end

--- List `items` (quickfix items of the code-lens command `command`) with their lines as text: a file's from disk, a
--- shared-index document's from `documents` (its lines by URI).
---@param command lsp.Command
---@param client vim.lsp.Client?
---@param items codeloupe.Item[]
---@param documents table<string, string[]>
local function list_locations(command, client, items, documents)
  for _, item in ipairs(items) do
    local line
    if documents[item.filename] then
      line = documents[item.filename][item.lnum]
    else
      line = vim.fn.readfile(item.filename, '', item.lnum)[item.lnum]
    end
    item.text = text_lines.one_line(vim.trim(line or '')) -- shown as `locations.item` shows a text
  end
  local title = command.title or locations.relative(client and client.root_dir, items[1].filename)
  local what = { title = 'codeloupe: ' .. text_lines.one_line(title), items = items }
  if config.options.locations == 'loclist' then
    vim.fn.setloclist(0, {}, ' ', what)
    vim.cmd('lopen')
  else
    vim.fn.setqflist({}, ' ', what)
    vim.cmd('botright copen')
  end
end

--- `codeloupe.showLocations` [uri, position, Location[]] (the code-lens command): list the locations. A shared-index
--- document has no file on disk: its lines come from the server, every document asked at once, without waiting;
--- the list opens when the last has answered.
---@param command lsp.Command
---@param ctx table
local function show_locations(command, ctx)
  local items = {}
  for _, location in ipairs((command.arguments or {})[3] or {}) do
    items[#items + 1] = locations.item(location)
  end
  if #items == 0 then
    vim.notify('codeloupe: no locations', vim.log.levels.INFO)
    return
  end
  local client = vim.lsp.get_client_by_id(ctx.client_id)
  local indexdoc = require('codeloupe.indexdoc') -- required here: it requires this module
  local documents, asked = {}, {}
  for _, item in ipairs(items) do
    if indexdoc.is_document(item.filename) then
      asked[item.filename] = true
    end
  end
  local left = vim.tbl_count(asked)
  if left == 0 then
    list_locations(command, client, items, documents)
    return
  end
  for uri in pairs(asked) do
    indexdoc.lines(uri, client, function(lines)
      documents[uri] = lines
      left = left - 1
      if left == 0 then
        list_locations(command, client, items, documents)
      end
    end)
  end
end

--- A workspace's own settings files. The server applies the endpoint, key, model and resource settings in
--- them only when the user trusts them (docs/security.md); the harmless ones apply regardless.
local SETTINGS_FILES = { '.codeloupe.toml', 'pyproject.toml' }

---@param name string
---@param text string
---@return boolean
local function holds_settings(name, text)
  if name == 'pyproject.toml' then
    -- `[tool.codeloupe]`, `[tool."codeloupe"]`, `[tool.'codeloupe']`, `tool.codeloupe.key = ...`: the same table
    -- to TOML, and to the server, which applies it once trusted.
    return text:find('tool%s*%.%s*(["\']?)codeloupe%1%s*[%]%.=]') ~= nil
  end
  return text:find('^%s*[^#%s]') ~= nil or text:find('\n%s*[^#%s]') ~= nil
end

--- The settings files of `root` that may hold codeloupe settings: the ones the user is asked to trust (files
--- without any are not asked about). Read here because the answer goes with `initialize`, before the server can
--- say; everything after asks the server (`codeloupe/status` `settingsFiles`).
---@param root string
---@return string[]
local function settings_files(root)
  local found = {}
  for _, name in ipairs(SETTINGS_FILES) do
    local path = vim.fs.joinpath(root, name)
    local file = io.open(path, 'r')
    local text = file and file:read('*a')
    if file then
      file:close()
    end
    if text and holds_settings(name, text) then
      found[#found + 1] = path
    end
  end
  return found
end

--- Whether the user trusts the codeloupe settings files of `root`, asking through |vim.secure.read()| (which
--- remembers the answer per file and content, like 'exrc'). With none at all there is nothing to trust.
---@param root string
---@return boolean
function M.trusts_settings(root)
  local files = settings_files(root)
  for _, path in ipairs(files) do
    if not vim.secure.read(path) then
      return false
    end
  end
  return #files > 0
end

--- The client configuration shared by the 0.11 and the 0.10 start paths.
---@param opts codeloupe.Options
---@return table
function M.client_config(opts)
  local settings = config.server_settings(opts.settings)
  return {
    name = M.name,
    cmd = opts.cmd,
    filetypes = opts.filetypes,
    root_dir = function(bufnr, on_dir)
      local root = M.root_dir(bufnr, opts.root_markers)
      if root then
        on_dir(root)
      end
    end,
    -- Without a marker there is no workspace to index; never index $HOME by accident.
    workspace_required = true,
    init_options = settings,
    -- The user's trust decision travels with the settings (a copy: `settings` is shared by every client).
    before_init = function(params, client_config)
      local root = client_config.root_dir or params.rootPath
      if type(root) == 'string' and M.trusts_settings(root) then
        params.initializationOptions = vim.tbl_extend('force', params.initializationOptions or {}, { trusted = true })
      end
    end,
    settings = { codeloupe = settings },
    capabilities = M.capabilities(opts.capabilities),
    commands = { ['codeloupe.showLocations'] = show_locations },
    on_attach = opts.on_attach,
    on_exit = function(code, signal, client_id)
      M.exited(code, signal, client_id)
    end,
  }
end

--- Why `cmd` cannot start, or nil when it can (a function cmd is trusted).
---@param cmd string[]|function
---@return string?
function M.missing_command(cmd)
  if type(cmd) == 'table' and vim.fn.executable(cmd[1] or '') == 0 then
    -- Installed from a checkout: no package named codeloupe is published, so `pip install codeloupe` would install
    -- whatever someone published under the name.
    return ("codeloupe: the language server command %q is not executable; install codeloupe from a checkout of its "
      .. "repository (pip install -c constraints.txt -e . in it) or set `cmd` in require('codeloupe').setup()")
      :format(tostring(cmd[1]))
  end
end

--- Start the client for the workspace `bufnr` is in (or reuse the running one), unless the buffer is not a file
--- or not of a filetype the options restrict the client to.
---@param bufnr integer
---@param opts codeloupe.Options
---@param filetype string?
---@param base_config fun(): table  the client configuration to start with (its root_dir is set here)
---@param start_opts table  |vim.lsp.start()|'s options
local function start_in_workspace(bufnr, opts, filetype, base_config, start_opts)
  if vim.bo[bufnr].buftype ~= '' then
    return
  end
  if opts.filetypes and not vim.tbl_contains(opts.filetypes, filetype or '') then
    return
  end
  local root = M.root_dir(bufnr, opts.root_markers)
  if not root then
    return
  end
  local client_config = base_config()
  client_config.root_dir = root
  vim.lsp.start(client_config, start_opts)
end

---@param bufnr integer
---@param opts codeloupe.Options
local function start_010(bufnr, opts)
  start_in_workspace(bufnr, opts, vim.bo[bufnr].filetype, function()
    return M.client_config(opts)
  end, { bufnr = bufnr })
end

local group = vim.api.nvim_create_augroup('codeloupe.start', { clear = true })

--- Start the server of the workspace `bufnr` is in as its file is about to be read, not attached yet: the
--- FileType event that attaches it comes after the file's filetype plugins, which can take a second (Neovim's
--- python ftplugin probes for the python3 provider), and the server starts up meanwhile. The attach on
--- FileType reuses this client (same name, same root). Before the read, the filetype is known by name only.
---@param bufnr integer
---@param opts codeloupe.Options
local function start_early(bufnr, opts)
  start_in_workspace(bufnr, opts, vim.filetype.match({ buf = bufnr }), function()
    return vim.deepcopy(vim.lsp.config[M.name])
  end, { attach = false, silent = true })
end

--- Register the client so it starts for every file buffer inside a workspace root.
---@param opts codeloupe.Options
---@return boolean started whether the server command was usable
function M.enable(opts)
  M.start_error = M.missing_command(opts.cmd)
  if M.start_error then
    vim.notify(M.start_error, vim.log.levels.ERROR)
    return false
  end
  if has_011 then
    -- Assigning (not vim.lsp.config(name, cfg), which merges) so a second setup() drops options it
    -- no longer sets; lsp/codeloupe.lua files and later vim.lsp.config() calls still merge over this.
    vim.lsp.config[M.name] = M.client_config(opts)
    vim.lsp.enable(M.name)
    vim.api.nvim_clear_autocmds({ group = group })
    vim.api.nvim_create_autocmd({ 'BufReadPre', 'BufNewFile' }, {
      group = group,
      callback = function(ev)
        start_early(ev.buf, opts)
      end,
    })
  else
    vim.api.nvim_clear_autocmds({ group = group })
    vim.api.nvim_create_autocmd('FileType', {
      group = group,
      callback = function(ev)
        start_010(ev.buf, opts)
      end,
    })
    for _, bufnr in ipairs(vim.api.nvim_list_bufs()) do
      if vim.api.nvim_buf_is_loaded(bufnr) and vim.bo[bufnr].filetype ~= '' then
        start_010(bufnr, opts)
      end
    end
  end
  return true
end

--- Start (or reuse: same name and root) the server of the workspace `bufnr` is in and attach it, as opening the
--- file does: a command given after that workspace's server stopped or died brings it back instead of waiting
--- for a start that nothing would make.
---@param bufnr integer
function M.start(bufnr)
  local opts = config.options
  if has_011 then
    start_in_workspace(bufnr, opts, vim.bo[bufnr].filetype, function()
      return vim.deepcopy(vim.lsp.config[M.name])
    end, { bufnr = bufnr, silent = true })
  else
    start_010(bufnr, opts)
  end
end

--- Every running codeloupe client.
---@return vim.lsp.Client[]
function M.clients()
  return vim.lsp.get_clients({ name = M.name })
end

--- The client for `bufnr`: the one attached to it, else the one of the workspace its file is in (possibly
--- still starting, or none yet: the caller waits for it), else the one whose workspace holds the current
--- directory, else any. Views such as the quickfix list are not attached but belong to a workspace.
---@param bufnr integer?
---@return vim.lsp.Client?
function M.client(bufnr)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  local attached = vim.lsp.get_clients({ name = M.name, bufnr = bufnr })
  if attached[1] then
    return attached[1]
  end
  local all = M.clients()
  -- A file of a workspace whose server is still starting is not attached yet; another workspace's server
  -- (the one holding the current directory, or any) would answer about the wrong project.
  -- A buffer named by a URI (a shared index's document, `codeloupe-index:///...`) is no file of a workspace: its
  -- name read as a path would find the current directory's markers.
  local file = vim.bo[bufnr].buftype == '' and not vim.api.nvim_buf_get_name(bufnr):match('^%a[%w+.-]+:')
  local own = file and M.root_dir(bufnr, config.options.root_markers)
  if own then
    own = vim.fs.normalize(own)
    for _, client in ipairs(all) do
      if client.root_dir and vim.fs.normalize(client.root_dir) == own then
        return client
      end
    end
    return nil
  end
  local cwd = vim.fs.normalize(vim.fn.getcwd())
  for _, client in ipairs(all) do
    local root = client.root_dir and vim.fs.normalize(client.root_dir)
    if root and (cwd == root or cwd:sub(1, #root + 1) == root .. '/') then
      return client
    end
  end
  return all[1]
end

--- The file of buffer `bufnr` (the current one by default), or nil for a buffer that is no file on disk (a view,
--- the quickfix list, a `codeloupe-index:` document).
---@param bufnr integer?
---@return string?
function M.file(bufnr)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  local name = vim.api.nvim_buf_get_name(bufnr)
  if name == '' or vim.bo[bufnr].buftype ~= '' or name:match('^%a[%w+.-]+:') then
    return nil
  end
  return vim.fs.normalize(name)
end

--- The workspace folder of `client` that holds `file` (the deepest, when folders nest), else the client's root. A
--- client may serve several folders (|vim.lsp.buf.add_workspace_folder()|); a command given in a file is about
--- that file's folder, which the server otherwise takes to be its first.
---@param client vim.lsp.Client
---@param file string?  an absolute path
---@return string?
function M.folder(client, file)
  local best
  for _, folder in ipairs(file and client.workspace_folders or {}) do
    local path = vim.fs.normalize(vim.uri_to_fname(folder.uri))
    if (file == path or vim.startswith(file, path .. '/')) and (best == nil or #path > #best) then
      best = path
    end
  end
  return best or client.root_dir
end

--- How long a command waits for the server to attach before it gives up.
M.start_timeout_ms = 30000

--- Commands issued while the server is still starting: { run = fun(client), root = string?, buf = integer }.
---@type { run: fun(client: vim.lsp.Client), root: string?, buf: integer }[]
local waiting = {}

---@param client vim.lsp.Client
---@param root string?
---@return boolean
local function serves(client, root)
  return root == nil or client.root_dir == nil or vim.fs.normalize(client.root_dir) == vim.fs.normalize(root)
end

--- Run the commands that were waiting for `client` (called on LspAttach of a codeloupe client).
---@param client vim.lsp.Client
function M.flush_waiting(client)
  local still = {}
  local ready = {}
  for _, entry in ipairs(waiting) do
    if serves(client, entry.root) then
      ready[#ready + 1] = entry
    else
      still[#still + 1] = entry
    end
  end
  waiting = still
  for _, entry in ipairs(ready) do
    entry.run(client)
  end
end

--- A client exited (|vim.lsp.ClientConfig| on_exit, in a fast event). When it exited while starting (a server that
--- fails at once: a broken install, a bad `cmd` argument), the commands waiting for it would wait for nothing and say
--- after 30 s that it "did not start within 30 s"; they are dropped now, saying it exited.
---@param code integer
---@param signal integer
---@param client_id integer
function M.exited(code, signal, client_id)
  local client = vim.lsp.get_client_by_id(client_id)
  if not client or client.initialized then
    return -- a running server that stopped: commands given since wait for the one they start
  end
  vim.schedule(function()
    local still = {}
    for _, entry in ipairs(waiting) do
      if not serves(client, entry.root) then
        still[#still + 1] = entry
      end
    end
    if #still == #waiting then
      return
    end
    waiting = still
    vim.notify(('codeloupe: the language server exited while starting (exit code %d%s), so the command did not run; '
      .. 'see :checkhealth codeloupe and :LspLog'):format(code, signal ~= 0 and (', signal ' .. signal) or ''),
      vim.log.levels.ERROR)
  end)
end

--- Why no client can serve `bufnr` (nil when one is starting for it).
---@param bufnr integer
---@return string?
local function why_no_client(bufnr)
  if M.start_error then
    return M.start_error
  end
  if not config.configured then
    return "codeloupe: setup() has not been called; add require('codeloupe').setup() to your config"
  end
  if vim.bo[bufnr].buftype == '' and M.root_dir(bufnr, config.options.root_markers) then
    return nil
  end
  return 'codeloupe: no language server is running; open a file inside a workspace (a folder with .git, '
    .. 'pyproject.toml, package.json, ...)'
end

--- Run `fn` with the client for the current buffer. While the server for this buffer's workspace is
--- still starting, the command waits for it to attach (saying so in the command line, not in
--- |:messages|) instead of failing; when there is no server to wait for, says why.
---@param fn fun(client: vim.lsp.Client)
function M.with_client(fn)
  local bufnr = vim.api.nvim_get_current_buf()
  local client = M.client(bufnr)
  if client and client.initialized then
    fn(client)
    return
  end
  local reason = not client and why_no_client(bufnr)
  if reason then
    vim.notify(reason, vim.log.levels.ERROR)
    return
  end
  local entry = { run = fn, root = client and client.root_dir or M.root_dir(bufnr, config.options.root_markers) }
  waiting[#waiting + 1] = entry
  if not client then
    M.start(bufnr)
  end
  vim.api.nvim_echo({ { 'codeloupe: starting the language server…' } }, false, {})
  vim.defer_fn(function()
    for index, queued in ipairs(waiting) do
      if queued == entry then
        table.remove(waiting, index)
        vim.notify(('codeloupe: the language server did not start within %d s; see :checkhealth codeloupe'):format(
          M.start_timeout_ms / 1000), vim.log.levels.ERROR)
        return
      end
    end
  end, M.start_timeout_ms)
end

--- Send a request; 0.10 clients take no self argument.
---@param client vim.lsp.Client
---@param method string
---@param params table
---@param handler fun(err: lsp.ResponseError?, result: any, ctx: table)
---@param bufnr integer?
---@return boolean ok, integer? request_id
function M.request(client, method, params, handler, bufnr)
  if has_011 then
    return client:request(method, params, handler, bufnr)
  end
  return client.request(method, params, handler, bufnr)
end

---@param client vim.lsp.Client
---@param request_id integer
function M.cancel(client, request_id)
  if has_011 then
    client:cancel_request(request_id)
  else
    client.cancel_request(request_id)
  end
end

--- A synchronous request (for :checkhealth's report, and the first ask completion in a folder); nil result and an
--- error message on failure or timeout.
---@param client vim.lsp.Client
---@param method string
---@param params table
---@param timeout_ms integer
---@return any result, string? error
function M.request_sync(client, method, params, timeout_ms)
  local response, err
  if has_011 then
    response, err = client:request_sync(method, params, timeout_ms)
  else
    response, err = client.request_sync(method, params, timeout_ms)
  end
  if not response then
    return nil, ('%s: %s'):format(method, err or 'no response')
  end
  if response.err then
    return nil, M.error_message(method, response.err)
  end
  return response.result
end

---@param client vim.lsp.Client
---@param method string
---@param params table
function M.notify(client, method, params)
  if has_011 then
    client:notify(method, params)
  else
    client.notify(method, params)
  end
end

--- Push new settings to running clients (a second setup() call).
---@param opts codeloupe.Options
function M.push_settings(opts)
  local settings = { codeloupe = config.server_settings(opts.settings) }
  for _, client in ipairs(M.clients()) do
    client.settings = settings
    M.notify(client, 'workspace/didChangeConfiguration', { settings = settings })
  end
end

--- A short message for a failed request.
---@param method string
---@param err lsp.ResponseError
---@return string
function M.error_message(method, err)
  local message = err.message or vim.inspect(err)
  -- The server names the method its refusals come from (`codeloupe/search: ...`): not twice.
  if message:sub(1, #method + 2) == method .. ': ' then
    message = message:sub(#method + 3)
  end
  return ('codeloupe: %s failed: %s'):format(method, message)
end

return M
