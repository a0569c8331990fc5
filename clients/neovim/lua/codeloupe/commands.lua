--- The `:Codeloupe` command: subcommand dispatch and completion.
local M = {}

---@type table<string, fun(args: string, fargs: string[], bang: boolean)>
local subcommands = {
  search = function(args, _, bang)
    require('codeloupe.search').run(args, bang)
  end,
  ask = function(args)
    require('codeloupe.ask').run(args)
  end,
  graph = function(_, fargs)
    require('codeloupe.graph').run(fargs)
  end,
  reindex = function()
    require('codeloupe.index').reindex()
  end,
  status = function()
    require('codeloupe.index').status()
  end,
}

--- Handler of the user command.
---@param opts { args: string, fargs: string[], bang: boolean }
function M.run(opts)
  -- `:Codeloupe search! q` and `:Codeloupe! search q` mean the same.
  local name, bang = (opts.fargs[1] or ''):match('^(.-)(!?)$')
  local subcommand = subcommands[name]
  if not subcommand then
    local known = vim.tbl_keys(subcommands)
    table.sort(known)
    vim.notify(('codeloupe: unknown subcommand %q; use one of: %s'):format(opts.fargs[1] or '', table.concat(known, ', ')),
      vim.log.levels.ERROR)
    return
  end
  -- The query keeps its own spacing; only the subcommand word is removed.
  local rest = opts.args:match('^%s*%S+%s*(.-)%s*$') or ''
  subcommand(rest, vim.list_slice(opts.fargs, 2), opts.bang or bang == '!')
end

--- Completion for `:Codeloupe`.
---@param arg_lead string
---@param cmdline string
---@return string[]
function M.complete(arg_lead, cmdline)
  local words = vim.split(cmdline, '%s+', { trimempty = true })
  local completing_new_word = cmdline:match('%s$') ~= nil
  local position = #words + (completing_new_word and 1 or 0)
  local candidates = {}
  if position == 2 then
    candidates = vim.tbl_keys(subcommands)
    table.sort(candidates)
  elseif words[2] == 'graph' and position == 3 then
    candidates = { 'map', 'node', 'path' }
  elseif words[2] == 'graph' and (words[3] == 'node' or words[3] == 'path') then
    return vim.fn.getcompletion(arg_lead, 'file')
  end
  return vim.tbl_filter(function(candidate)
    return candidate:sub(1, #arg_lead) == arg_lead
  end, candidates)
end

return M
