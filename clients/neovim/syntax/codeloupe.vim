" Syntax for codeloupe's graph view: headings, hop arrows and site labels. Not markdown, so paths such
" as pkg/__init__.py and names such as _private are shown as written.
if exists('b:current_syntax')
  finish
endif
syntax match codeloupeHeading /^#.*$/
syntax match codeloupeArrow /<-\[[^\]]*\]-\|-\[[^\]]*\]->\| \~ /
syntax match codeloupeLabel /^\s*\%(use\|definition\|carriers\|community\):/
syntax match codeloupeNumber /^\d\+\./
hi def link codeloupeHeading Title
hi def link codeloupeArrow Operator
hi def link codeloupeLabel Label
hi def link codeloupeNumber Number
let b:current_syntax = 'codeloupe'
