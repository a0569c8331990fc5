-- The :Codeloupe command exists from startup; the language server starts once
-- require('codeloupe').setup() has run.
if vim.g.loaded_codeloupe then
  return
end
vim.g.loaded_codeloupe = true

vim.api.nvim_create_user_command('Codeloupe', function(opts)
  require('codeloupe.commands').run(opts)
end, {
  nargs = '+',
  bang = true,
  -- :'<,'>Codeloupe search / ask: the selected text is the query.
  range = true,
  desc = 'codeloupe: search, ask, tour, related, issue, graph, reindex, status',
  complete = function(arg_lead, cmdline)
    return require('codeloupe.commands').complete(arg_lead, cmdline)
  end,
})
