// ollama_tools.mjs URL — the official `ollama` npm client's tool calling
// against llmchat's /api/chat: tools in the request, message.tool_calls in
// the answer with arguments as an object, streamed and not. A random model
// calls the tool because the request also says tool_choice "required" (an
// llmchat extension the client passes through; Ollama has no such field), so
// the grammar writes the call. Prints "ok   NAME" / "FAIL NAME" lines for
// tests/cli_server_tools.sh; exits 1 on any failure.
import { Ollama } from 'ollama';

const ollama = new Ollama({ host: process.argv[2] });
let failed = 0;
const check = (name, cond, detail) => {
  if (cond) console.log(`ok   ${name}`);
  else { failed++; console.log(`FAIL ${name}\n     ${JSON.stringify(detail).slice(0, 600)}`); }
};
const tools = [{ type: 'function', function: { name: 'get_weather', description: 'The weather in a city',
  parameters: { type: 'object', properties: { city: { type: 'string', enum: ['Paris', 'Oslo'] },
                                               days: { type: 'integer', minimum: 1, maximum: 7 } },
                required: ['city', 'days'] } } }];
const request = { model: 'llama3.2', messages: [{ role: 'user', content: 'Weather in Paris?' }], tools,
                  tool_choice: 'required', options: { num_predict: 120, seed: 2 } };
const validCall = (c) => c?.function?.name === 'get_weather' && ['Paris', 'Oslo'].includes(c.function.arguments?.city) &&
  Number.isInteger(c.function.arguments.days) && c.function.arguments.days >= 1 && c.function.arguments.days <= 7;

try {
  const r = await ollama.chat({ ...request, stream: false });
  check('ollama: chat with tools answers message.tool_calls, arguments an object',
        r.done && r.message.tool_calls?.length === 1 && validCall(r.message.tool_calls[0]), r.message);

  const calls = [];
  let done = null;
  for await (const part of await ollama.chat({ ...request, stream: true })) {
    calls.push(...(part.message.tool_calls ?? []));
    if (part.done) done = part;
  }
  check('ollama: streamed, the same call in a piece of its own',
        calls.length === 1 && JSON.stringify(calls[0]) === JSON.stringify(r.message.tool_calls[0]) && done?.done_reason === 'stop',
        { calls, done });

  const followup = await ollama.chat({ model: 'llama3.2', tools, stream: false, options: { num_predict: 4 },
    messages: [...request.messages, { role: 'assistant', content: '', tool_calls: r.message.tool_calls },
               { role: 'tool', content: '18 degrees', tool_name: 'get_weather' }] });
  check('ollama: a conversation with the call and its result is answered', followup.done && followup.eval_count > 0, followup);
} catch (e) {
  check('ollama: tools', false, String(e));
}
process.exit(failed ? 1 : 0);
