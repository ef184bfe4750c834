" llmchat.vim — ask the running llmchat from Vim or Neovim through `llmchat ask`.
"
"   :LlmAsk [question]        ask about the current line, a range or the visual
"                             selection (:'<,'>LlmAsk explain this); the answer
"                             opens in a scratch window below
"   :LlmSession NAME [question]  the same, continuing the stored session NAME
"                             (the chat UI shows it in that session)
"   :LlmInsert [question]     insert the answer below the range instead
"
" Install: :source this file, or copy it to ~/.vim/plugin/ (Vim) or
" ~/.config/nvim/plugin/ (Neovim). Settings:
"   let g:llmchat_cmd = 'llmchat'          " the program (default: llmchat on PATH)
"   let g:llmchat_args = ['--local']       " extra arguments, e.g. --socket PATH
" Code completion (fill in the middle) is better served by llama.vim pointed at
" `llmchat serve --listen 127.0.0.1:8012` (see docs/PROTOCOL.md).

if exists('g:loaded_llmchat')
  finish
endif
let g:loaded_llmchat = 1

function! s:Ask(session, question, line1, line2, insert) abort
  let l:text = join(getline(a:line1, a:line2), "\n")
  let l:prompt = a:question ==# '' ? l:text : a:question . "\n\n" . l:text
  let l:cmd = [get(g:, 'llmchat_cmd', 'llmchat'), 'ask'] + get(g:, 'llmchat_args', [])
  if a:session !=# ''
    let l:cmd += ['--session', a:session]
  endif
  let l:cmd += ['-']
  let l:answer = systemlist(join(map(copy(l:cmd), 'shellescape(v:val)')), l:prompt)
  if v:shell_error
    echohl ErrorMsg | echomsg join(l:answer, ' ') | echohl None
    return
  endif
  if a:insert
    call append(a:line2, l:answer)
    return
  endif
  botright new
  setlocal buftype=nofile bufhidden=wipe noswapfile filetype=markdown
  call setline(1, l:answer)
endfunction

command! -range -nargs=* LlmAsk call s:Ask('', <q-args>, <line1>, <line2>, 0)
command! -range -nargs=* LlmInsert call s:Ask('', <q-args>, <line1>, <line2>, 1)
command! -range -nargs=+ LlmSession call s:Ask(matchstr(<q-args>, '^\S\+'),
      \ substitute(<q-args>, '^\S\+\s*', '', ''), <line1>, <line2>, 0)
