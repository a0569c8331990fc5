--- `:Codeloupe ask`: the answer in a markdown view whose cited code opens with <CR> / gd.
local config = require('codeloupe.config')
local flows = require('codeloupe.flows')
local locations = require('codeloupe.locations')
local text_lines = require('codeloupe.lines')
local lsp = require('codeloupe.lsp')
local progress = require('codeloupe.progress')
local search = require('codeloupe.search')
local view = require('codeloupe.view')

local M = {}

M.buffer_name = 'codeloupe://ask'

local method_not_found = -32601
-- The server's fallback reason when no chat model is set (`codeloupe.ask.chat.NOT_CONFIGURED`).
local NOT_CONFIGURED = 'no chat model configured'

--- Lines plus, per line, what <CR> opens there.
---@class codeloupe.Doc
---@field lines string[]
---@field targets table<integer, codeloupe.Target>
local Doc = {}
Doc.__index = Doc

---@return codeloupe.Doc
function Doc.new()
  return setmetatable({ lines = {}, targets = {} }, Doc)
end

---@param text string  may hold newlines; each becomes a line with the same target
---@param target codeloupe.Target?
function Doc:add(text, target)
  for _, line in ipairs(text_lines.split(text)) do
    self.lines[#self.lines + 1] = line
    self.targets[#self.lines] = target
  end
end

local has_location = locations.is_location

--- The longest run of backticks in `text`.
---@param text string
---@return integer
local function longest_backticks(text)
  local longest = 0
  for run in text:gmatch('`+') do
    longest = math.max(longest, #run)
  end
  return longest
end

--- A fence that cannot close early on backticks inside the code.
---@param text string
---@return string
local function fence_for(text)
  return string.rep('`', math.max(2, longest_backticks(text)) + 1)
end

--- `text` as a markdown code span, so names such as `__init__` and `_private` are not read as emphasis, on one
--- line with its control and bidi characters escaped (`one_line`), as the server's captions show a path.
---@param text string
---@return string
function M.code_span(text)
  text = text_lines.one_line(text)
  if text == '' then
    return ''
  end
  local ticks = string.rep('`', longest_backticks(text) + 1)
  local pad = (text:sub(1, 1) == '`' or text:sub(-1) == '`') and ' ' or ''
  return ticks .. pad .. text .. pad .. ticks
end

--- Code shown verbatim, each line opening the same line on disk (when its location is known).
---@param doc codeloupe.Doc
---@param item codeloupe.Item?
---@param text string
---@param language string?
local function add_code(doc, item, text, language)
  local fence = fence_for(text)
  doc:add(fence .. (language or ''), item)
  for offset, line in ipairs((text_lines.of_file(text))) do
    doc:add(line, item and vim.tbl_extend('force', item, { lnum = item.lnum + offset - 1 }))
  end
  doc:add(fence, item)
end

--- One list line per span of a FileResult (RELATED entries and uncited candidates).
---@param doc codeloupe.Doc
---@param file table FileResult
local function add_span_lines(doc, file)
  local items = search.items({ core = { file } })
  -- Files that retrieval's ranking did not find say how they came: by a graph edge, as an entry point of a
  -- location-shaped question, or cited by a cached answer (docs/protocol.md).
  local via = (file.via and file.via ~= 'search') and (' _(via %s)_'):format(file.via) or ''
  for _, item in ipairs(items) do
    local text = item.text:gsub('^CORE ?', '')
    local where = ('%s:%d-%d'):format(file.path or item.filename, item.lnum, item.end_lnum)
    doc:add(('- %s %s%s'):format(M.code_span(where), M.code_span(text), via), item)
  end
end

--- A heading with the file count, then each file's spans as followable lines.
---@param doc codeloupe.Doc
---@param title string
---@param files table[]
local function add_file_section(doc, title, files)
  doc:add('')
  doc:add(('## %s (%s)'):format(title, view.count(#files, 'file')))
  for _, file in ipairs(files) do
    add_span_lines(doc, file)
  end
end

--- The bundle as markdown: CORE files with their code, then every RELATED span.
---@param doc codeloupe.Doc
---@param bundle table SearchResult
local function add_bundle(doc, bundle)
  local core, related = bundle.core or {}, bundle.related or {}
  if #core == 0 and #related == 0 then
    doc:add('_Nothing was retrieved for this question._')
    return
  end
  doc:add(('## Core (%s)'):format(view.count(#core, 'file')))
  for _, file in ipairs(core) do
    doc:add('')
    local heading = ('### %s. %s'):format(tostring(file.rank or '-'), M.code_span(file.path or ''))
    if file.why and file.why ~= '' then
      heading = heading .. ' ' .. M.code_span(file.why)
    end
    doc:add(heading, has_location(file.location) and locations.item(file.location) or nil)
    for _, chunk in ipairs(file.chunks or {}) do
      if has_location(chunk.location) then
        local item = locations.item(chunk.location)
        doc:add('')
        local where = ('%s:%d-%d'):format(file.path or '', item.lnum, item.end_lnum)
        doc:add(('%s %s'):format(M.code_span(where), M.code_span(chunk.breadcrumb or chunk.name or '')), item)
        if type(chunk.text) == 'string' and chunk.text ~= '' then
          add_code(doc, item, chunk.text, file.language)
        end
      end
    end
  end
  add_file_section(doc, 'Related', related)
end

---@param citation table
---@param root string?
---@return codeloupe.Item
local function citation_item(citation, root)
  local filename
  if has_location(citation.location) then
    filename = vim.uri_to_fname(citation.location.uri)
  else
    filename = vim.fs.joinpath(root or vim.fn.getcwd(), citation.path)
  end
  return { filename = filename, lnum = citation.startLine, end_lnum = citation.endLine, col = 1, text = citation.path }
end

--- The line under a `code` part whose file changed on disk since it was indexed (`changed`): its lines were found
--- again by their content (the words of the answer's markdown caption).
local CHANGED_ON_DISK = '> (changed on disk since indexing: lines re-located)'

--- The engine's heading over the files an answer did not cite (codeloupe.ask.render.footer_parts): a `heading`
--- part, which only the engine writes, and which ends a narrated answer only. An abstained answer's parts end with
--- the bundle instead (codeloupe.ask.render.bundle_parts), a heading per CORE file naming it: a file named
--- 'Also retrieved, not cited' cut the view short there.
local UNCITED_HEADING = 'Also retrieved, not cited'

--- A line's target: the one reference on it, or (several) the one under or nearest the cursor.
---@param refs { start: integer, finish: integer, item: codeloupe.Item }[]  0-based [start, finish) columns
---@return codeloupe.Target?
local function refs_target(refs)
  if #refs <= 1 then
    return refs[1] and refs[1].item
  end
  return function(col)
    local best, distance = refs[1], math.huge
    for _, ref in ipairs(refs) do
      local d = col < ref.start and ref.start - col or (col >= ref.finish and col - ref.finish + 1 or 0)
      if d < distance then
        best, distance = ref, d
      end
    end
    return best.item
  end
end

--- The narrated answer from its parts (docs/protocol.md), shown as the protocol says: prose and the engine's notes
--- as the plain text they are, each `ref` as the span it names, and only `code` parts, read from disk, as code
--- (with a line saying so under the caption when the file changed on disk since indexing). (The answer's markdown escapes the model's backslashes and brackets for a markdown renderer; shown as they
--- stand, its lines read `\\*` where the model wrote `\*`.) What <CR> opens comes from the refs and the code parts,
--- never from a line's text: a heading, a `[1]` or a file's name the model writes opens nothing, and it cannot
--- write a fence (the engine removes the code it writes). The engine's list of uncited files is left out: the view
--- lists them itself, each line opening its file.
---@param doc codeloupe.Doc
---@param parts table[]
---@param abstained boolean  the parts end with the bundle, not the footer
local function add_parts(doc, parts, abstained)
  local first = #doc.lines
  local line, refs = '', {}
  local function end_line()
    doc:add(line, refs_target(refs))
    line, refs = '', {}
  end
  for _, part in ipairs(parts) do
    local text = type(part.text) == 'string' and part.text or ''
    if part.kind == 'heading' and text == UNCITED_HEADING and not abstained then
      break
    elseif part.kind == 'code' then
      if line ~= '' then
        end_line()
      end
      local item = has_location(part.location) and locations.item(part.location) or nil
      doc:add('')
      doc:add(M.code_span(('%s:%d-%d'):format(part.path or '', part.startLine or 0, part.endLine or 0)), item)
      if part.changed == true then
        doc:add(CHANGED_ON_DISK, item)
      end
      add_code(doc, item, text, part.language)
    elseif part.kind == 'heading' then
      if line ~= '' then
        end_line()
      end
      doc:add('')
      doc:add('### ' .. text_lines.one_line(text))
    elseif part.kind == 'ref' then
      local shown = M.code_span(text)
      if has_location(part.location) then
        refs[#refs + 1] = { start = #line, finish = #line + #shown, item = locations.item(part.location) }
      end
      line = line .. shown
    else -- prose and notes: plain text, its control and bidi characters escaped as the server escapes them
      local pieces = vim.split((text:gsub('\r\n', '\n')), '\n', { plain = true })
      for index, piece in ipairs(pieces) do
        if index > 1 then
          end_line()
        end
        line = line .. text_lines.visible(piece)
      end
    end
  end
  if line ~= '' then
    end_line()
  end
  while #doc.lines > first and vim.trim(doc.lines[#doc.lines]) == '' do
    doc.targets[#doc.lines] = nil
    doc.lines[#doc.lines] = nil
  end
end

--- The narrated answer (its parts), the cited spans, then every candidate the answer did not cite.
---@param doc codeloupe.Doc
---@param result table AskResult
---@param root string?
local function add_answer(doc, result, root)
  add_parts(doc, result.parts, result.abstained == true)
  local citations = result.citations or {}
  if #citations > 0 then
    doc:add('')
    doc:add('## Cited')
    for _, citation in ipairs(citations) do
      local where = ('%s:%d-%d'):format(citation.path, citation.startLine, citation.endLine)
      doc:add(('- [%d] %s'):format(citation.k, M.code_span(where)), citation_item(citation, root))
    end
  end
  add_file_section(doc, 'Not cited', result.uncited or {})
end

--- What the flow cache did for this answer, or nil when it did nothing.
---@param flow table?
---@return string?
function M.flow_note(flow)
  if type(flow) ~= 'table' then
    return nil
  end
  if flow.action == 'served' then
    return ('> Served from the flow cache (no model call): the cached answer to %s, its cited files unchanged.'):format(
      M.code_span(flow.question or ''))
  elseif flow.action == 'attached' then
    return ('> The model saw the cached answer to %s as background (never cited).'):format(M.code_span(flow.question or ''))
  end
end

--- Lines and targets for an ask result (or a plain bundle when the answer fell back).
---@param question string
---@param result table AskResult
---@param root string?
---@return codeloupe.Doc
function M.render(question, result, root)
  local doc = Doc.new()
  doc:add('# ' .. question)
  doc:add('')
  local note = M.flow_note(result.flow)
  if note then
    doc:add(note)
    doc:add('')
  end
  local fallback = result.fallback ~= nil and result.fallback ~= vim.NIL and tostring(result.fallback) or nil
  if not fallback and type(result.parts) ~= 'table' then
    -- A server older than the answer's parts sent it as markdown only, which this view does not read.
    fallback = 'the server sent no answer parts'
  end
  if fallback then
    doc:add(('> No narrated answer (%s): showing everything retrieval found.'):format(fallback))
    if fallback == NOT_CONFIGURED then
      -- The reason every first ask gives: the words alone left the user to find where a model is set.
      doc:add('> To have it narrated, set `chat_base_url` and `chat_model` in the `settings` of')
      doc:add("> `require('codeloupe').setup()` (`:h codeloupe-settings`), or `CODELOUPE_CHAT_BASE_URL` and")
      doc:add('> `CODELOUPE_CHAT_MODEL` for the server.')
    end
    doc:add('')
    add_bundle(doc, result.bundle or {})
    return doc
  end
  if result.abstained then
    doc:add('> The narrator abstained: the retrieved code does not answer this question. Candidates below.')
    doc:add('')
  end
  add_answer(doc, result, root)
  return doc
end

---@param doc codeloupe.Doc
local function show(doc)
  view.show({
    name = M.buffer_name,
    filetype = 'markdown',
    layout = config.options.layout,
    lines = doc.lines,
    targets = doc.targets,
  })
end

--- A streamed `delta` event as the part of the answer it is (docs/protocol.md): its plain text (`plain`), and a
--- ref's or code's span. Its markdown (`text`) is for a renderer: shown as text, a `\*` the model wrote read `\\*`.
--- A server older than `plain` sends the markdown only, shown as it stands.
---@param event table
---@return table part
local function delta_part(event)
  if type(event.plain) ~= 'string' then
    return { kind = 'prose', text = type(event.text) == 'string' and event.text or '' }
  end
  return { kind = event.kind, text = event.plain, path = event.path, startLine = event.start_line,
           endLine = event.end_line, language = event.language, changed = event.changed }
end

--- The view while the answer is produced: the events so far, and the answer's parts as streamed, shown as the
--- answer's parts are (`add_parts`).
---@param question string
---@param events string[]
---@param streamed table[]  parts
local function show_working(question, events, streamed)
  local doc = Doc.new()
  doc:add('# ' .. question)
  doc:add('')
  doc:add('_Working: ' .. table.concat(events, ' > ') .. ' ..._')
  if #streamed > 0 then
    doc:add('')
    add_parts(doc, streamed)
  end
  show(doc)
end

local next_token = 0

--- The ask in flight: a new question cancels it, and its late events and answer are dropped.
---@type { client: vim.lsp.Client, request_id: integer?, token: string }?
local in_flight

--- Send `question` to `client`, streaming its progress into the ask view.
---@param client vim.lsp.Client
---@param question string
---@param folder_uri string?  the shared repository or workspace folder of the buffer the question was asked from
---@param root string?  the folder the answer's paths are relative to
local function start(client, question, folder_uri, root)
  if in_flight then
    progress.unlisten(in_flight.token)
    if in_flight.request_id then
      lsp.cancel(in_flight.client, in_flight.request_id)
    end
  end
  next_token = next_token + 1
  local token = ('codeloupe-ask-%d'):format(next_token)
  local events, streamed = { 'asking' }, {}
  show_working(question, events, streamed)

  progress.listen(token, function(value)
    if value.kind ~= 'report' or type(value.message) ~= 'string' then
      return
    end
    local ok, event = pcall(vim.json.decode, value.message)
    if not ok or type(event) ~= 'table' then
      return
    end
    if event.type == 'delta' then
      streamed[#streamed + 1] = delta_part(event)
    elseif type(event.type) == 'string' and events[#events] ~= event.type then
      events[#events + 1] = event.type
    end
    show_working(question, events, streamed)
  end)

  local params = {
    query = question,
    docs = config.options.ask.docs,
    agents = config.options.ask.agents,
    workDoneToken = token,
    folderUri = folder_uri,
  }
  in_flight = { client = client, token = token }
  local _, request_id = lsp.request(client, 'codeloupe/ask', params, function(err, result)
    if not in_flight or in_flight.token ~= token then
      return
    end
    in_flight = nil
    progress.unlisten(token)
    flows.forget() -- the question answered is cached now: completion offers it next
    if err and err.code == method_not_found then
      -- An older server without ask: the bundle is still the answer.
      search.request(client, question, function(bundle)
        show(M.render(question, { fallback = 'the server has no codeloupe/ask', bundle = bundle }, root))
      end)
      return
    end
    if err then
      local message = lsp.error_message('codeloupe/ask', err)
      vim.notify(message, vim.log.levels.ERROR)
      local doc = Doc.new()
      doc:add('# ' .. question)
      doc:add('')
      doc:add('> ' .. message)
      show(doc)
      return
    end
    show(M.render(question, result or {}, root))
  end)
  if in_flight and in_flight.token == token then
    in_flight.request_id = request_id
  end
end

--- `:Codeloupe ask {question}`.
---@param question string
function M.run(question)
  if vim.trim(question) == '' then
    vim.notify('codeloupe: ask needs a question, e.g. :Codeloupe ask how are sessions stored', vim.log.levels.ERROR)
    return
  end
  -- Read before the answer view opens: asked from a shared-index document, the question is about its repository.
  local repository = require('codeloupe.indexdoc').repository()
  local here = lsp.file()
  lsp.with_client(function(client)
    local root = lsp.folder(client, here)
    start(client, question, repository or (root and vim.uri_from_fname(root)), root)
  end)
end

--- `:Codeloupe ask` without a question: offer the cached ones (or a new one) instead of guessing from the cursor.
function M.pick()
  lsp.with_client(function(client)
    flows.pick(client, M.run)
  end)
end

return M
