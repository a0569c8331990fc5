--- `:Codeloupe reindex` and `:Codeloupe status`: the workspace index as the server reports it.
local lsp = require('codeloupe.lsp')

local M = {}

--- `{python = 12, go = 3}` as "go 3, python 12".
---@param counts table<string, integer>?
---@return string
local function describe_counts(counts)
  local parts = {}
  for name, count in pairs(counts or {}) do
    parts[#parts + 1] = ('%s %d'):format(name, count)
  end
  table.sort(parts)
  return table.concat(parts, ', ')
end

--- One folder of a codeloupe/status result as lines of text.
---@param folder table
---@return string[]
function M.describe_folder(folder)
  local vectors = folder.vectors or {}
  local root = folder.root or folder.uri or '?'
  local trust = folder.trusted and 'trusted' or 'untrusted'
  -- Trust is about the folder's own settings files (README, Trusting a workspace): with none holding codeloupe
  -- settings, "untrusted" and what trusting would allow read as something to do where there is nothing to trust.
  -- Which files hold settings is the server's word, as it reads them: the plugin's own reading of the files
  -- differed from it (`[tool."codeloupe"]`, whose keys the server ignored while this said nothing to trust).
  local settings_files = folder.settingsFiles or {}
  if not folder.trusted and #settings_files == 0 then
    trust = 'no workspace settings'
  end
  local lines = {
    ('%s: %s, %s'):format(root, folder.state or 'unknown', trust),
    ('  %d files, %d chunks, %d symbols, vectors %d/%d'):format(
      folder.files or 0, folder.chunks or 0, folder.symbols or 0, vectors.done or 0, vectors.total or 0),
    ('  embeddings: %s%s'):format(folder.provider or '?',
      (folder.model and folder.model ~= '') and (' (' .. folder.model .. ')') or ''),
  }
  if trust == 'untrusted' then
    -- Said only ", trusted" for a trusted folder and nothing for the others, which read as nothing to know.
    table.insert(lines, 2, ('  untrusted: its own settings files (%s) may not set endpoints, keys, models or '
      .. 'resource settings; `codeloupe trust %s` lets them'):format(table.concat(settings_files, ', '),
      vim.fn.shellescape(root)))
  end
  local languages = describe_counts(folder.languages)
  if languages ~= '' then
    lines[#lines + 1] = '  languages: ' .. languages
  end
  local skipped = describe_counts(folder.skipped)
  if skipped ~= '' then
    lines[#lines + 1] = '  skipped for their content: ' .. skipped .. ' (`codeloupe stats --skipped` lists them)'
  end
  if folder.indexPath and folder.indexPath ~= '' then
    lines[#lines + 1] = '  index: ' .. folder.indexPath
  end
  if folder.message and folder.message ~= '' then
    lines[#lines + 1] = '  ' .. folder.message
  end
  return lines
end

--- One shared repository of a codeloupe/status result (read from the shared index, no checkout) as lines.
---@param repository table
---@return string[]
function M.describe_repository(repository)
  local lines = {
    ('shared repository %s at %s'):format(repository.repository or '?',
      (repository.commit and repository.commit ~= '') and repository.commit or '(not a git checkout)'),
    ('  %d files, %d chunks, %d symbols'):format(repository.files or 0, repository.chunks or 0, repository.symbols or 0),
  }
  if repository.indexPath and repository.indexPath ~= '' then
    lines[#lines + 1] = '  index: ' .. repository.indexPath
  end
  return lines
end

--- `:Codeloupe status`.
function M.status()
  lsp.with_client(function(client)
    lsp.request(client, 'codeloupe/status', vim.empty_dict(), function(err, result)
      if err then
        vim.notify(lsp.error_message('codeloupe/status', err), vim.log.levels.ERROR)
        return
      end
      local lines = { 'codeloupe status' }
      for _, folder in ipairs((result or {}).folders or {}) do
        vim.list_extend(lines, M.describe_folder(folder))
      end
      if #lines == 1 then
        lines[2] = 'no workspace folders'
      end
      for _, repository in ipairs((result or {}).repositories or {}) do
        vim.list_extend(lines, M.describe_repository(repository))
      end
      vim.notify(table.concat(lines, '\n'), vim.log.levels.INFO, { title = 'codeloupe' })
    end)
  end)
end

--- `:Codeloupe reindex`: re-scan the current buffer's workspace folder. Progress shows in the statusline;
--- the one message is the result.
function M.reindex()
  local here = lsp.file()
  lsp.with_client(function(client)
    local root = lsp.folder(client, here)
    local arguments = root and { vim.uri_from_fname(root) } or {}
    lsp.request(client, 'workspace/executeCommand', { command = 'codeloupe.reindex', arguments = arguments },
      function(err, result)
        if err then
          vim.notify(lsp.error_message('codeloupe.reindex', err), vim.log.levels.ERROR)
          return
        end
        result = result or {}
        vim.notify(('codeloupe: reindexed %d files, %d chunks'):format(result.files or 0, result.chunks or 0),
          vim.log.levels.INFO)
      end)
  end)
end

return M
