--- `:Codeloupe graph [node X | path A B]`: the import/call graph as a tree in a scratch view (a folder for X: its
--- part of the graph).
local config = require('codeloupe.config')
local indexdoc = require('codeloupe.indexdoc')
local locations = require('codeloupe.locations')
local lsp = require('codeloupe.lsp')
local text_lines = require('codeloupe.lines')
local view = require('codeloupe.view')

local M = {}

M.buffer_name = 'codeloupe://graph'

--- Lines plus, per line, what <CR> opens there.
---@class codeloupe.Tree
---@field lines string[]
---@field targets table<integer, codeloupe.Target>
---@field root string?
---@field asked string?

---@param tree codeloupe.Tree
---@param line string  one line, as it is shown
---@param target codeloupe.Item?
local function add_line(tree, line, target)
  tree.lines[#tree.lines + 1] = line
  tree.targets[#tree.lines] = target
end

--- A line made of the graph's names (paths, symbols, kinds, notes: a repository's own), on one line escaped as the
--- other views show names (`one_line`): a file named with a line break made nvim_buf_set_lines refuse the whole
--- view, and it could have forged a heading or an entry whose <CR> opens another file.
---@param tree codeloupe.Tree
---@param text string
---@param target codeloupe.Item?
local function add(tree, text, target)
  add_line(tree, text_lines.one_line(text), target)
end

--- The file a graph entry names (by URI when given, else by workspace-relative path).
---@param tree codeloupe.Tree
---@param entry { uri: string?, path: string? }
---@return codeloupe.Item?
local function file_item(tree, entry)
  local filename
  if type(entry.uri) == 'string' then
    filename = vim.uri_to_fname(entry.uri)
  elseif type(entry.path) == 'string' then
    filename = vim.fs.joinpath(tree.root or vim.fn.getcwd(), entry.path)
  else
    return nil
  end
  return { filename = filename, lnum = 1, end_lnum = 1, col = 1, text = entry.path or '' }
end

---@param location lsp.Location?
---@return codeloupe.Item?
local function location_item(location)
  if type(location) == 'table' and location.uri and location.range then
    return locations.item(location)
  end
end

---@param names string[]?
---@return string
local function list(names)
  if type(names) ~= 'table' or #names == 0 then
    return ''
  end
  return table.concat(names, ', ')
end

---@param tree codeloupe.Tree
---@param result table graph `map` result
local function render_map(tree, result)
  local nodes = {}
  for _, node in ipairs(result.nodes or {}) do
    nodes[node.path] = node
  end
  local unconnected = result.unconnected or {}
  add(tree, ('# Graph: %s, %s, %s, %s'):format(view.count(#(result.nodes or {}), 'code file'),
    view.count(#(result.edges or {}), 'edge'), view.count(#(result.communities or {}), 'community', 'communities'),
    view.count(#unconnected, 'unconnected file')))
  for _, community in ipairs(result.communities or {}) do
    add(tree, '')
    local size = community.size or #(community.members or {})
    add(tree, ('## %s (%s)'):format(tostring(community.name or community.id), view.count(size, 'file')))
    local members = vim.deepcopy(community.members or {})
    table.sort(members, function(a, b)
      local da, db = (nodes[a] or {}).degree or 0, (nodes[b] or {}).degree or 0
      if da ~= db then
        return da > db
      end
      return a < b
    end)
    for _, path in ipairs(members) do
      local node = nodes[path] or { path = path }
      local notes = ('degree %d'):format(node.degree or 0)
      if node.god then
        notes = notes .. ', god node'
      end
      add(tree, ('- %s (%s)'):format(path, notes), file_item(tree, node))
    end
  end
  if #unconnected > 0 then
    add(tree, '')
    add(tree, ('## Unconnected files (%d)'):format(#unconnected))
    for _, path in ipairs(unconnected) do
      add(tree, '- ' .. path, file_item(tree, nodes[path] or { path = path }))
    end
  end
end

---@param tree codeloupe.Tree
---@param title string
---@param neighbours table[]
---@param describe fun(neighbour: table): string
local function add_neighbours(tree, title, neighbours, describe)
  add(tree, '')
  add(tree, ('## %s (%d)'):format(title, #neighbours))
  for _, neighbour in ipairs(neighbours) do
    add(tree, '- ' .. describe(neighbour), file_item(tree, neighbour))
  end
end

---@param neighbour table
---@return string
local function describe_edge(neighbour)
  local text = neighbour.path
  if neighbour.kind and neighbour.kind ~= '' then
    text = ('%s [%s]'):format(text, neighbour.kind)
  end
  local symbols = list(neighbour.symbols)
  if symbols ~= '' then
    text = text .. ': ' .. symbols
  end
  return text
end

--- A folder's part of the graph (docs/protocol.md): its communities by name, the edges across it drawn the way
--- they point (`a -[kind]-> b` when a uses b) with <CR> on one opening the line of the use, and its files.
---@param tree codeloupe.Tree
---@param result table graph `node` result for a folder
local function render_folder(tree, result)
  local files = result.files or {}
  add(tree, ('# %s/ (folder: %s of the graph)'):format(result.folder, view.count(#files, 'file')))
  local communities = result.communities or {}
  add(tree, '')
  add(tree, ('## Communities (%d)'):format(#communities))
  for _, community in ipairs(communities) do
    add(tree, ('- %s (%d of its files): %s'):format(tostring(community.name ~= '' and community.name or community.id),
      community.size or #(community.members or {}), list(community.members)))
  end
  --- `user:line -[kind]-> used` (or drawn backwards from the inside file) with its carriers.
  local function edge(text, entry)
    local symbols = list(entry.symbols)
    return symbols ~= '' and (text .. ': ' .. symbols) or text
  end
  local function line_of(entry)
    local item = location_item(entry.use)
    return item and (':' .. item.lnum) or '', item
  end
  local uses, used_by = result.uses or {}, result.usedBy or {}
  add(tree, '')
  add(tree, ('## Uses, outside the folder (%d)'):format(#uses))
  for _, entry in ipairs(uses) do
    local at, item = line_of(entry)
    add(tree, '- ' .. edge(('%s%s -[%s]-> %s'):format(entry.from, at, entry.kind or 'edge', entry.path), entry),
      item or file_item(tree, entry))
  end
  add(tree, '')
  add(tree, ('## Used by, from outside (%d)'):format(#used_by))
  for _, entry in ipairs(used_by) do
    local at, item = line_of(entry)
    add(tree, '- ' .. edge(('%s <-[%s]- %s%s'):format(entry.to, entry.kind or 'edge', entry.path, at), entry),
      item or file_item(tree, entry))
  end
  add(tree, '')
  add(tree, ('## Files (%d)'):format(#files))
  for _, file in ipairs(files) do
    add(tree, ('- %s (%s, degree %d%s)'):format(file.path, tostring(file.communityName or file.community),
      file.degree or 0, file.god and ', god node' or ''), file_item(tree, file))
  end
end

---@param tree codeloupe.Tree
---@param result table graph `node` result
local function render_node(tree, result)
  if type(result.folder) == 'string' then
    render_folder(tree, result)
    return
  end
  if result.found == false then
    add(tree, '# ' .. tostring(result.node))
    add(tree, tostring(result.message or 'not in the graph'))
    local suggestions = result.suggestions or {}
    if #suggestions > 0 then
      add(tree, '')
      add(tree, ('## Closest files in the graph (%d)'):format(#suggestions))
      for _, suggestion in ipairs(suggestions) do
        add(tree, '- ' .. suggestion.path, file_item(tree, suggestion))
      end
    end
    return
  end
  add(tree, '# ' .. tostring(result.path), file_item(tree, result))
  -- A name that is no file (a concept, a typo) was answered with the closest file: say so, or the view reads as
  -- the graph of the file asked for.
  local by = ({ embedding = 'the closest file by meaning', lexical = 'the closest file by the words of paths and definitions',
    definition = 'the file that defines it' })[result.resolvedBy]
  if by and tree.asked then
    add(tree, ('(no file is called %q: this is %s)'):format(tree.asked, by))
  end
  add(tree, ('community: %s%s'):format(tostring(result.communityName or result.community),
    result.god and ', god node' or ''))
  add_neighbours(tree, 'Imports', result.imports or {}, describe_edge)
  add_neighbours(tree, 'Importers', result.importers or {}, describe_edge)
  add_neighbours(tree, 'Semantic neighbours', result.semantic or {}, function(neighbour)
    return ('%s (cosine %.2f)'):format(neighbour.path, tonumber(neighbour.cosine) or 0)
  end)
  local symbols = result.symbols or {}
  if #symbols > 0 then
    add(tree, '')
    add(tree, ('## Symbols (%d)'):format(#symbols))
    for _, symbol in ipairs(symbols) do
      add(tree, '- ' .. symbol)
    end
  end
  local chunks = result.chunks or {}
  if #chunks > 0 then
    add(tree, '')
    add(tree, ('## Chunks (%d)'):format(#chunks))
    for _, chunk in ipairs(chunks) do
      local item = location_item(chunk.location)
      if item then
        local first = text_lines.split(vim.trim(chunk.text or ''))[1]
        add(tree, ('- %d-%d %s'):format(item.lnum, item.end_lnum, vim.trim(first)), item)
      end
    end
  end
end

--- How a hop is drawn: `source -[kind]-> target` when source uses target, `source <-[kind]- target`
--- when target uses source, `source ~ target` for files that only read alike (docs/protocol.md).
---@param hop table
---@return string
function M.hop_text(hop)
  local kind = hop.kind or 'edge'
  if hop.direction == 'used-by' then
    return ('%s <-[%s]- %s'):format(hop.source, kind, hop.target)
  elseif hop.direction == 'similar' or kind == 'semantic' then
    local cosine = tonumber(hop.cosine)
    return ('%s ~ %s%s'):format(hop.source, hop.target, cosine and (' (reads alike, cosine %.2f)'):format(cosine) or '')
  end
  return ('%s -[%s]-> %s'):format(hop.source, kind, hop.target)
end

--- A hop's code as read from disk (`useCode` / `definitionCode`), indented under its label; each line opens
--- its own line.
---@param tree codeloupe.Tree
---@param code table?  { location, text, symbol }
local function add_code(tree, code)
  local item = type(code) == 'table' and type(code.text) == 'string' and location_item(code.location)
  if not item then
    return
  end
  -- Code as the file has it (split into its lines), as the ask view shows code: not escaped.
  for offset, line in ipairs((text_lines.of_file(code.text))) do
    add_line(tree, '     | ' .. line, vim.tbl_extend('force', item, { lnum = item.lnum + offset - 1 }))
  end
end

---@param tree codeloupe.Tree
---@param result table graph `path` result
local function render_path(tree, result)
  add(tree, ('# Path: %s -> %s'):format(tostring(result.from), tostring(result.to)))
  if not result.found then
    add(tree, 'no path found' .. ((result.note and result.note ~= '') and (': ' .. result.note) or ''))
    return
  end
  add(tree, (result.note and result.note ~= '') and result.note or 'found')
  add(tree, '')
  for index, hop in ipairs(result.hops or {}) do
    local use, definition = location_item(hop.use), location_item(hop.definition)
    add(tree, ('%d. %s'):format(index, M.hop_text(hop)), use or file_item(tree, { path = hop.source }))
    local carriers = list(hop.carriers)
    if carriers ~= '' then
      add(tree, '   carriers: ' .. carriers, definition or use)
    end
    -- Each site is labelled with its own file: the user of a `used-by` hop is its target.
    if use then
      add(tree, ('   use: %s:%d'):format(locations.relative(tree.root, use.filename), use.lnum), use)
      add_code(tree, hop.useCode)
    end
    if definition then
      add(tree, ('   definition: %s:%d'):format(locations.relative(tree.root, definition.filename), definition.lnum), definition)
      add_code(tree, hop.definitionCode)
    end
  end
end

local renderers = { map = render_map, node = render_node, path = render_path }

--- Lines and targets for a graph result.
---@param mode 'map'|'node'|'path'
---@param result table
---@param root string?
---@param asked string?  the name a node view was asked for (the view says when another file answered it)
---@return codeloupe.Tree
function M.render(mode, result, root, asked)
  local tree = { lines = {}, targets = {}, root = root, asked = asked }
  renderers[mode](tree, result)
  return tree
end

--- The current file, for `:Codeloupe graph node` without a name (made relative once the client is known); in a
--- directory's buffer (netrw, a file explorer), that folder: its part of the graph.
---@return string?
local function current_file()
  local name = vim.api.nvim_buf_get_name(0)
  if indexdoc.is_document(name) then
    return name -- a shared-index document: the server takes its URI as the node
  end
  if name ~= '' and vim.fn.isdirectory(name) == 1 then
    return vim.fs.normalize(name)
  end
  if name == '' or vim.bo.buftype ~= '' then
    return nil
  end
  return vim.fs.normalize(name)
end

local usage = 'usage: :Codeloupe graph [map | node [PATH] | path FROM TO]'

--- `:Codeloupe graph` with its arguments.
---@param args string[]
function M.run(args)
  -- `%`, `#` and `~` (with modifiers, as `:edit` takes them): the server would read `%` as a concept and answer
  -- with some other file.
  args = vim.tbl_map(function(arg)
    if arg:match('^[%%#]') or arg:match('^~') then
      local expanded = vim.fn.expand(arg)
      return expanded ~= '' and expanded or arg
    end
    return arg
  end, args)
  local mode = args[1] or 'map'
  local params = { mode = mode }
  local file
  if mode == 'node' then
    -- A concept may be several words (`graph node password hashing`): all of them, not the first.
    params.node = #args > 1 and table.concat(args, ' ', 2) or nil
    file = not params.node and current_file() or nil
    if not params.node and not file then
      vim.notify('codeloupe: graph node needs a file path (or run it from a file buffer); ' .. usage, vim.log.levels.ERROR)
      return
    end
  elseif mode == 'path' then
    if #args ~= 3 then
      vim.notify('codeloupe: graph path needs two files; ' .. usage, vim.log.levels.ERROR)
      return
    end
    params.from, params.to = args[2], args[3]
  elseif mode ~= 'map' or #args > 1 then
    vim.notify('codeloupe: ' .. usage, vim.log.levels.ERROR)
    return
  end
  local repository = indexdoc.repository()
  local here = file or lsp.file()
  lsp.with_client(function(client)
    local root = lsp.folder(client, here)
    if repository or root then
      params.folderUri = repository or vim.uri_from_fname(root)
    end
    if file then
      params.node = repository and file or locations.relative(root, file)
    end
    lsp.request(client, 'codeloupe/graph', params, function(err, result)
      if err then
        vim.notify(lsp.error_message('codeloupe/graph', err), vim.log.levels.ERROR)
        return
      end
      local tree = M.render(mode, result or {}, root, mode == 'node' and params.node or nil)
      view.show({
        name = M.buffer_name,
        filetype = 'codeloupe',
        layout = config.options.layout,
        lines = tree.lines,
        targets = tree.targets,
        focus = true,
      })
    end)
  end)
end

return M
