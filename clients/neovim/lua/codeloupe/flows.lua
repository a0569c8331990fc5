--- Cached questions (`codeloupe/flows`) offered to `:Codeloupe ask`: in a picker and in command-line completion.
local text_lines = require('codeloupe.lines')
local lsp = require('codeloupe.lsp')

local M = {}

--- The label of the picker entry that asks for a question not in the cache.
M.new_question = 'new question…'

--- How long command-line completion waits for the server's list.
local complete_timeout_ms = 500

--- The cached questions of `result`, fresh ones first (the server's newest-first order kept within each).
---@param result table? codeloupe/flows result
---@return string[]
function M.questions(result)
  local fresh, stale = {}, {}
  for _, flow in ipairs(type(result) == 'table' and result.flows or {}) do
    if type(flow.question) == 'string' then
      table.insert(flow.stale and stale or fresh, flow.question)
    end
  end
  return vim.list_extend(fresh, stale)
end

---@param client vim.lsp.Client
---@return table
local function params(client)
  local root = lsp.folder(client, lsp.file())
  return root and { folderUri = vim.uri_from_fname(root) } or {}
end

--- Offer the cached questions, then "new question…" (which prompts for one); `on_question` gets the choice.
---@param client vim.lsp.Client
---@param on_question fun(question: string)
function M.pick(client, on_question)
  lsp.request(client, 'codeloupe/flows', params(client), function(err, result)
    -- A server without the flow cache still lets the user type a question.
    local choices = err and {} or M.questions(result)
    choices[#choices + 1] = M.new_question
    -- A question is shown on one line, escaped (a pasted one may hold line breaks); the choice is the question.
    local shown = { prompt = 'codeloupe ask', kind = 'codeloupe.flows', format_item = text_lines.one_line }
    vim.ui.select(choices, shown, function(choice)
      if choice == M.new_question then
        vim.ui.input({ prompt = 'codeloupe ask: ' }, function(typed)
          if typed and vim.trim(typed) ~= '' then
            on_question(typed)
          end
        end)
      elseif choice then
        on_question(choice)
      end
    end)
  end)
end

--- Completion of `:Codeloupe ask {typed}`: the cached questions that start with what is typed, each cut to
--- what replaces `arg_lead` (the last word typed), since a question holds spaces.
---@param typed string  the whole question typed so far
---@param arg_lead string
---@return string[]
function M.complete(typed, arg_lead)
  local client = lsp.client()
  if not (client and client.initialized) then
    return {}
  end
  local result = lsp.request_sync(client, 'codeloupe/flows', params(client), complete_timeout_ms)
  local kept = #typed - #arg_lead
  local candidates = {}
  for _, question in ipairs(M.questions(result)) do
    if question:sub(1, #typed) == typed then
      candidates[#candidates + 1] = question:sub(kept + 1)
    end
  end
  return candidates
end

return M
