--- Cached questions (`codeloupe/flows`) offered to `:Codeloupe ask`: in a picker and in command-line completion.
local text_lines = require('codeloupe.lines')
local lsp = require('codeloupe.lsp')

local M = {}

--- The label of the picker entry that asks for a question not in the cache.
M.new_question = 'new question…'

--- How long command-line completion waits for the server's list when it has none to offer yet.
local complete_timeout_ms = 500

--- The cached questions last heard of, by client and folder (`key`): completion offers them at once.
---@type table<string, string[]>
local known = {}

--- Bumped by `forget`: a list asked for before it is not kept.
local generation = 0

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

---@param client vim.lsp.Client
---@param request table  the `codeloupe/flows` params
---@return string
local function key(client, request)
  return client.id .. ' ' .. (request.folderUri or '')
end

--- Ask for the cached questions of `request`'s folder; `on_list` (if any) gets them, and completion keeps them.
---@param client vim.lsp.Client
---@param request table
---@param on_list (fun(questions: string[]?))?  nil questions: the server has no flow cache
local function ask_list(client, request, on_list)
  local asked = generation
  lsp.request(client, 'codeloupe/flows', request, function(err, result)
    local questions = not err and M.questions(result) or nil
    if questions and asked == generation then
      known[key(client, request)] = questions
    end
    if on_list then
      on_list(questions)
    end
  end)
end

--- Forget the questions heard of (an ask was answered: the server has cached it), so that the next completion asks.
function M.forget()
  known = {}
  generation = generation + 1
end

--- Offer the cached questions, then "new question…" (which prompts for one); `on_question` gets the choice.
---@param client vim.lsp.Client
---@param on_question fun(question: string)
function M.pick(client, on_question)
  ask_list(client, params(client), function(questions)
    -- A server without the flow cache still lets the user type a question.
    local choices = questions or {}
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
--- what replaces `arg_lead` (the last word typed), since a question holds spaces. The list last heard of is
--- offered at once and asked for again (a busy server would hold up every <Tab>); only with none heard of yet in
--- the folder (or since an ask was answered) does completion wait for it, at most `complete_timeout_ms`.
---@param typed string  the whole question typed so far
---@param arg_lead string
---@return string[]
function M.complete(typed, arg_lead)
  local client = lsp.client()
  if not (client and client.initialized) then
    return {}
  end
  local request = params(client)
  local questions = known[key(client, request)]
  if questions then
    ask_list(client, request)
  else
    local result = lsp.request_sync(client, 'codeloupe/flows', request, complete_timeout_ms)
    questions = M.questions(result)
    if result then
      known[key(client, request)] = questions
    end
  end
  local kept = #typed - #arg_lead
  local candidates = {}
  for _, question in ipairs(questions) do
    if question:sub(1, #typed) == typed then
      candidates[#candidates + 1] = question:sub(kept + 1)
    end
  end
  return candidates
end

return M
