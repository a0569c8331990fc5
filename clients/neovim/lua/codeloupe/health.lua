--- `:checkhealth codeloupe`: the server command and version, the index state, the provider.
local config = require('codeloupe.config')
local index = require('codeloupe.index')
local lsp = require('codeloupe.lsp')

local M = {}

local health = vim.health

---@param cmd string[]
local function check_command(cmd)
  local missing = lsp.missing_command(cmd)
  if missing then
    health.error(missing, { 'in a checkout of the codeloupe repository: pip install -c constraints.txt -e . (it provides codeloupe-lsp)', 'or pass cmd = { ... } to setup()' })
    return
  end
  local command = vim.list_extend(vim.deepcopy(cmd), { '--version' })
  local ok, result = pcall(function()
    return vim.system(command, { text = true }):wait(15000)
  end)
  local path = vim.fn.exepath(cmd[1])
  if ok and result.code == 0 then
    health.ok(('server: %s (%s)'):format(path, vim.trim(result.stdout ~= '' and result.stdout or result.stderr)))
  else
    local why = ok and vim.trim((result.stderr or '') .. (result.stdout or '')) or tostring(result)
    health.warn(('server: %s found, but `%s` failed: %s'):format(path, table.concat(command, ' '), why))
  end
end

---@param client vim.lsp.Client
local function check_client(client)
  local result, err = lsp.request_sync(client, 'codeloupe/status', vim.empty_dict(), 5000)
  if err then
    health.error(('client %d (%s): %s'):format(client.id, client.root_dir or '?', err))
    return
  end
  local folders = (result or {}).folders or {}
  if #folders == 0 then
    health.warn(('client %d: no workspace folders'):format(client.id))
  end
  for _, folder in ipairs(folders) do
    local text = table.concat(index.describe_folder(folder), '\n')
    if folder.state == 'ready' then
      health.ok(text)
    elseif folder.state == 'error' then
      health.error(text)
    else
      health.info(text)
    end
  end
end

function M.check()
  health.start('codeloupe')
  if vim.fn.has('nvim-0.10') == 0 then
    health.error('Neovim 0.10 or newer is required')
    return
  end
  local version = vim.version()
  health.ok(('Neovim %d.%d.%d (%s)'):format(version.major, version.minor, version.patch,
    vim.fn.has('nvim-0.11') == 1 and 'vim.lsp.config/vim.lsp.enable' or 'vim.lsp.start fallback'))
  if not config.configured then
    health.warn('setup() has not been called; the server does not start', { "require('codeloupe').setup({})" })
  end

  local cmd = config.options.cmd
  if type(cmd) == 'table' then
    check_command(cmd)
  else
    health.info('server: cmd is a function (not checked)')
  end

  local settings = config.server_settings(config.options.settings)
  health.info(('embeddings provider (settings): %s'):format(settings.embedProvider or 'server default'))

  local clients = lsp.clients()
  if #clients == 0 then
    health.info('no codeloupe server is running (open a file inside a workspace folder)')
  end
  for _, client in ipairs(clients) do
    check_client(client)
  end

  -- The picker searches use: the option decides, not only whether Telescope is installed.
  local picker, problem = require('codeloupe.search').picker()
  if problem then
    health.warn(problem, { "install telescope.nvim, or set picker = 'auto' or 'select' in setup()" })
  elseif picker == 'telescope' then
    health.ok('picker: telescope.nvim')
  elseif config.options.picker == 'select' then
    health.info("picker: vim.ui.select (picker = 'select')")
  else
    health.info('picker: vim.ui.select (install telescope.nvim for a previewing picker)')
  end
end

return M
