// openai_tools.mjs — the official `openai` npm client (v4) sends a function-calling
// conversation (tools, an assistant turn with tool_calls and null content, a tool
// answer) to `llmchat serve`, streaming and not, and checks that the request is
// accepted and the answers have the shape the client and OpenAI's API give.
// Prints "ok NAME" / "FAIL NAME: why" lines; exits 1 on any failure.
// usage: node tests/js/openai_tools.mjs PORT
import OpenAI from 'openai';

const port = process.argv[2];
const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'none', maxRetries: 0, timeout: 20000 });
let failed = 0;
const check = (name, cond, why) => {
  if (cond) console.log(`ok ${name}`);
  else { failed++; console.log(`FAIL ${name}: ${why}`); }
};

const tools = [{
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Get the current weather in a given city.',
    parameters: { type: 'object', properties: { location: { type: 'string' } }, required: ['location'] },
  },
}];
const messages = [
  { role: 'user', content: 'Weather in Paris?' },
  { role: 'assistant', content: null,
    tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"location":"Paris"}' } }] },
  { role: 'tool', tool_call_id: 'call_1', content: '{"temperature": 18}' },
];
const FINISH = ['stop', 'length', 'tool_calls'];

const validCall = (c) => typeof c.id === 'string' && c.type === 'function' &&
  typeof c.function?.name === 'string' && typeof c.function?.arguments === 'string';

try {
  const r = await client.chat.completions.create({ model: 'x', messages, tools, tool_choice: 'auto', max_tokens: 8, seed: 5 });
  const ch = r.choices?.[0];
  check('completion object', r.object === 'chat.completion' && typeof r.id === 'string' && r.choices.length === 1,
        JSON.stringify(r).slice(0, 300));
  check('message shape', ch.message.role === 'assistant' &&
        (typeof ch.message.content === 'string' || ch.message.content === null) &&
        (ch.message.tool_calls === undefined || ch.message.tool_calls.every(validCall)),
        JSON.stringify(ch.message));
  check('finish reason', FINISH.includes(ch.finish_reason) &&
        (ch.finish_reason === 'tool_calls') === (ch.message.tool_calls?.length > 0), ch.finish_reason);
  check('usage', r.usage.prompt_tokens > 20 && r.usage.completion_tokens > 0 &&
        r.usage.total_tokens === r.usage.prompt_tokens + r.usage.completion_tokens, JSON.stringify(r.usage));

  const stream = await client.chat.completions.create({ model: 'x', messages, tools, max_tokens: 8, seed: 5, stream: true });
  let text = '', finish = null, chunks = 0, shapeOk = true, calls = [];
  for await (const c of stream) {
    chunks++;
    shapeOk &&= c.object === 'chat.completion.chunk' && typeof c.id === 'string';
    for (const d of c.choices) {
      text += d.delta?.content ?? '';
      for (const t of d.delta?.tool_calls ?? []) {
        if (t.id) calls[t.index] = { id: t.id, name: t.function.name, arguments: '' };
        calls[t.index].arguments += t.function?.arguments ?? '';
      }
      if (d.finish_reason) finish = d.finish_reason;
    }
  }
  check('stream chunks', chunks >= 2 && shapeOk, `${chunks} chunks`);
  check('stream finish', FINISH.includes(finish), String(finish));
  check('stream equals the answer', text === (ch.message.content ?? '') && calls.length === (ch.message.tool_calls?.length ?? 0),
        `${JSON.stringify(text)} vs ${JSON.stringify(ch.message.content)}`);

  try {
    await client.chat.completions.create({ model: 'x', messages, tools, tool_choice: { type: 'function', function: { name: 'nope' } } });
    check('unknown tool_choice refused', false, 'accepted');
  } catch (e) {
    check('unknown tool_choice refused', e instanceof OpenAI.BadRequestError && /tool_choice/.test(e.message), String(e));
  }
} catch (e) {
  check('requests', false, String(e));
}
process.exit(failed ? 1 : 0);
