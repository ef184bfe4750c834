// anthropic.mjs PORT KEY — the official `@anthropic-ai/sdk` client, unchanged,
// against llmchat's /v1/messages on a server started with --api-key KEY (the SDK
// sends it as x-api-key): messages.create, messages.stream (events in order,
// finalMessage), messages.countTokens, a tool call forced with tool_choice
// {type: "any"} (the grammar makes even a random model write one) plain and
// streamed, a conversation with tool_use / tool_result blocks, and errors
// raised as the SDK's own. Prints "ok   NAME" / "FAIL NAME" lines for
// tests/cli_server_apis.sh; exits 1 on any failure.
import Anthropic from '@anthropic-ai/sdk';

const [port, key] = process.argv.slice(2);
const client = new Anthropic({ baseURL: `http://127.0.0.1:${port}`, apiKey: key, maxRetries: 0, timeout: 30000 });
let failed = 0;
const check = (name, cond, detail) => {
  if (cond) console.log(`ok   ${name}`);
  else { failed++; console.log(`FAIL ${name}\n     ${JSON.stringify(detail).slice(0, 600)}`); }
};
const messages = [{ role: 'user', content: 'Tell me a story' }];
const tools = [{ name: 'get_weather', description: 'The weather in a city',
  input_schema: { type: 'object', properties: { city: { type: 'string', enum: ['Paris', 'Oslo'] },
                                                days: { type: 'integer', minimum: 1, maximum: 7 } },
                  required: ['city', 'days'] } }];
const validCall = (b) => b?.type === 'tool_use' && b.name === 'get_weather' && /^toolu_/.test(b.id) &&
  ['Paris', 'Oslo'].includes(b.input?.city) && Number.isInteger(b.input.days) && b.input.days >= 1 && b.input.days <= 7;

async function plain() {
  const m = await client.messages.create({ model: 'claude-x', max_tokens: 8, system: 'Be brief.', messages });
  check('messages.create: a Message with a text block', m.type === 'message' && m.role === 'assistant' &&
        /^msg_/.test(m.id) && m.content[0]?.type === 'text' && typeof m.content[0].text === 'string', m);
  check('messages.create: stop_reason and usage', ['end_turn', 'max_tokens'].includes(m.stop_reason) &&
        m.usage.output_tokens > 0 && m.usage.output_tokens <= 8 && m.usage.input_tokens > 0, m);
  const n = await client.messages.countTokens({ model: 'claude-x', system: 'Be brief.', messages });
  check('messages.countTokens: the prompt the answer read', n.input_tokens === m.usage.input_tokens, { n, usage: m.usage });
}

async function streamed() {
  const types = [];
  let text = '';
  const stream = client.messages.stream({ model: 'claude-x', max_tokens: 6, messages });
  stream.on('streamEvent', (e) => types.push(e.type));
  stream.on('text', (t) => { text += t; });
  const m = await stream.finalMessage();
  const body = types.filter((t) => t !== 'ping');
  check('messages.stream: message_start first, message_delta and message_stop last',
        body[0] === 'message_start' && body.at(-2) === 'message_delta' && body.at(-1) === 'message_stop', types);
  check('messages.stream: finalMessage holds the streamed text', m.content[0]?.type === 'text' &&
        m.content[0].text === text && m.usage.output_tokens > 0, { m, text });
}

async function toolCall() {
  const req = { model: 'claude-x', max_tokens: 200, messages: [{ role: 'user', content: 'Weather in Paris?' }], tools,
                tool_choice: { type: 'any' } };
  const m = await client.messages.create(req);
  const call = m.content.find((b) => b.type === 'tool_use');
  check('tool_choice any: a tool_use block, input valid against input_schema', m.stop_reason === 'tool_use' && validCall(call), m);
  const s = await client.messages.stream(req).finalMessage();
  const scall = s.content.find((b) => b.type === 'tool_use');
  check('tool_choice any, streamed: finalMessage parses the input_json_delta pieces', s.stop_reason === 'tool_use' && validCall(scall), s);
  const followup = await client.messages.create({ model: 'claude-x', max_tokens: 4, tools, messages: [
    ...req.messages, { role: 'assistant', content: [call] },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: call.id, content: '18 degrees' }] }] });
  check('a conversation with tool_use and tool_result blocks is answered', followup.usage.output_tokens > 0, followup);
}

async function errors() {
  try {
    await client.messages.create({ model: 'claude-x', messages });
    check('no max_tokens: BadRequestError', false, 'no error');
  } catch (e) {
    check('no max_tokens: BadRequestError naming it', e instanceof Anthropic.BadRequestError &&
          e.error?.error?.type === 'invalid_request_error' && /max_tokens/.test(e.message), String(e));
  }
  try {
    const other = new Anthropic({ baseURL: `http://127.0.0.1:${port}`, apiKey: 'wrong', maxRetries: 0 });
    await other.messages.create({ model: 'claude-x', max_tokens: 1, messages });
    check('a wrong key: AuthenticationError', false, 'no error');
  } catch (e) {
    check('a wrong key: AuthenticationError', e instanceof Anthropic.AuthenticationError, String(e));
  }
}

for (const t of [plain, streamed, toolCall, errors]) {
  try { await t(); } catch (e) { check(t.name, false, String(e)); }
}
process.exit(failed ? 1 : 0);
