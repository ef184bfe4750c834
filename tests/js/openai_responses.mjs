// openai_responses.mjs PORT KEY — the official `openai` npm client's Responses
// API (client.responses.create), unchanged, against llmchat's /v1/responses:
// a plain answer (output_text, usage), `stream: true` (the events in order, the
// deltas making output_text), previous_response_id continuing a conversation,
// a function call forced with tool_choice "required" (the grammar makes even a
// random model write one) plain and streamed, and text.format json_schema.
// Prints "ok   NAME" / "FAIL NAME" lines for tests/cli_server_apis.sh; exits 1
// on any failure.
import OpenAI from 'openai';

const [port, key] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: key, maxRetries: 0, timeout: 30000 });
let failed = 0;
const check = (name, cond, detail) => {
  if (cond) console.log(`ok   ${name}`);
  else { failed++; console.log(`FAIL ${name}\n     ${JSON.stringify(detail).slice(0, 600)}`); }
};
const tools = [{ type: 'function', name: 'get_weather', description: 'The weather in a city',
  parameters: { type: 'object', properties: { city: { type: 'string', enum: ['Paris', 'Oslo'] },
                                              days: { type: 'integer', minimum: 1, maximum: 7 } },
                required: ['city', 'days'] } }];
const validCall = (c) => { try {
  const a = JSON.parse(c.arguments);
  return c.type === 'function_call' && c.name === 'get_weather' && /^call_/.test(c.call_id) &&
    ['Paris', 'Oslo'].includes(a.city) && Number.isInteger(a.days) && a.days >= 1 && a.days <= 7;
} catch { return false; } };

async function plain() {
  const r = await client.responses.create({ model: 'gpt-x', input: 'Tell me a story', instructions: 'Be brief.',
                                            max_output_tokens: 8 });
  check('responses.create: a Response with a message item', r.object === 'response' && /^resp_/.test(r.id) &&
        r.output[0]?.type === 'message' && r.output[0].content[0]?.type === 'output_text', r);
  check('responses.create: output_text (the client joins the text parts)', typeof r.output_text === 'string' &&
        r.output_text === r.output[0].content[0].text, r.output_text);
  check('responses.create: status and usage', ['completed', 'incomplete'].includes(r.status) &&
        r.usage.output_tokens > 0 && r.usage.output_tokens <= 8 &&
        r.usage.total_tokens === r.usage.input_tokens + r.usage.output_tokens, r);
  const next = await client.responses.create({ model: 'gpt-x', input: 'And then?', previous_response_id: r.id,
                                               max_output_tokens: 2 });
  check('previous_response_id: the earlier turns are in the prompt', next.previous_response_id === r.id &&
        next.usage.input_tokens > r.usage.input_tokens + r.usage.output_tokens - 1, { r: r.usage, next: next.usage });
}

async function streamed() {
  const types = [];
  let text = '', final = null;
  const stream = await client.responses.create({ model: 'gpt-x', input: 'Hi', max_output_tokens: 6, stream: true });
  for await (const e of stream) {
    types.push(e.type);
    if (e.type === 'response.output_text.delta') text += e.delta;
    if (e.type === 'response.completed' || e.type === 'response.incomplete') final = e.response;
  }
  check('stream: response.created, in_progress first; completed/incomplete last',
        types[0] === 'response.created' && types[1] === 'response.in_progress' &&
        /^response\.(completed|incomplete)$/.test(types.at(-1)), types);
  check('stream: a message item opened and closed around the deltas',
        types.indexOf('response.output_item.added') < types.indexOf('response.content_part.added') &&
        types.indexOf('response.output_text.done') < types.indexOf('response.output_item.done'), types);
  check('stream: the deltas make the final output text', final?.output[0]?.content[0]?.text === text && text.length > 0,
        { text, final });
}

async function toolCall() {
  const req = { model: 'gpt-x', input: 'Weather in Paris?', tools, tool_choice: 'required', max_output_tokens: 200 };
  const r = await client.responses.create(req);
  const call = r.output.find((o) => o.type === 'function_call');
  check('tool_choice required: a function_call item, arguments valid', validCall(call ?? {}), r.output);
  let args = '', done = null;
  for await (const e of await client.responses.create({ ...req, stream: true })) {
    if (e.type === 'response.function_call_arguments.delta') args += e.delta;
    if (e.type === 'response.output_item.done' && e.item.type === 'function_call') done = e.item;
  }
  check('tool_choice required, streamed: argument deltas make the call', done && validCall(done) && args === done.arguments,
        { args, done });
  const followup = await client.responses.create({ model: 'gpt-x', max_output_tokens: 3, tools, input: [
    { role: 'user', content: 'Weather in Paris?' }, { type: 'function_call', call_id: call.call_id, name: call.name, arguments: call.arguments },
    { type: 'function_call_output', call_id: call.call_id, output: '18 degrees' }] });
  check('a conversation with function_call and function_call_output items is answered', followup.usage.output_tokens > 0, followup);
}

async function structured() {
  const schema = { type: 'object', properties: { name: { type: 'string', maxLength: 12 }, age: { type: 'integer', minimum: 0, maximum: 120 } },
                   required: ['name', 'age'], additionalProperties: false };
  const r = await client.responses.create({ model: 'gpt-x', input: 'A person', max_output_tokens: 120,
    text: { format: { type: 'json_schema', name: 'person', schema, strict: true } } });
  let o = null;
  try { o = JSON.parse(r.output_text); } catch { /* checked below */ }
  check('text.format json_schema: output_text is JSON valid against it', o && typeof o.name === 'string' &&
        Number.isInteger(o.age) && Object.keys(o).length === 2, r.output_text);
}

async function errors() {
  try {
    await client.responses.create({ model: 'gpt-x', input: 'Hi', previous_response_id: 'resp_unknown' });
    check('an unknown previous_response_id: NotFoundError', false, 'no error');
  } catch (e) {
    check('an unknown previous_response_id: NotFoundError naming it', e instanceof OpenAI.NotFoundError &&
          /resp_unknown/.test(e.message), String(e));
  }
}

for (const t of [plain, streamed, toolCall, structured, errors]) {
  try { await t(); } catch (e) { check(t.name, false, String(e)); }
}
process.exit(failed ? 1 : 0);
