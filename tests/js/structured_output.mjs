// structured_output.mjs — the official OpenAI client against `llmchat serve` with
// response_format json_schema / json_object: every answer must be JSON valid
// against the schema (checked by the small validator below).
//   node tests/js/structured_output.mjs BASE_URL SCHEMA_JSON SEEDS
//   node tests/js/structured_output.mjs --validate SCHEMA_JSON < DOCUMENT
// Prints one line per check: "ok NAME" or "FAIL NAME: why"; exits 1 on a failure.
import { readFileSync } from 'node:fs';
import OpenAI from 'openai';

const [base, schemaText, seedsArg] = process.argv.slice(2);
const schema = JSON.parse(schemaText);
const seeds = Number(seedsArg || 5);

// The error in v against schema s (the subset the tests use), or '' when valid.
function invalid(v, s, path = '$') {
  if (s.enum && !s.enum.some((e) => JSON.stringify(e) === JSON.stringify(v))) return `${path}: not in enum`;
  const t = s.type;
  if (t === 'object') {
    if (typeof v !== 'object' || v === null || Array.isArray(v)) return `${path}: not an object`;
    for (const k of s.required || []) if (!(k in v)) return `${path}.${k}: missing`;
    for (const [k, x] of Object.entries(v)) {
      if (!s.properties || !(k in s.properties)) {
        if (s.additionalProperties === false) return `${path}.${k}: not allowed`;
        continue;
      }
      const e = invalid(x, s.properties[k], `${path}.${k}`);
      if (e) return e;
    }
  } else if (t === 'array') {
    if (!Array.isArray(v)) return `${path}: not an array`;
    if (s.maxItems !== undefined && v.length > s.maxItems) return `${path}: too long`;
    if (s.minItems !== undefined && v.length < s.minItems) return `${path}: too short`;
    for (let i = 0; i < v.length; i++) {
      const e = s.items ? invalid(v[i], s.items, `${path}[${i}]`) : '';
      if (e) return e;
    }
  } else if (t === 'string') {
    if (typeof v !== 'string') return `${path}: not a string`;
    const n = [...v].length;
    if (s.maxLength !== undefined && n > s.maxLength) return `${path}: too long`;
    if (s.minLength !== undefined && n < s.minLength) return `${path}: too short`;
  } else if (t === 'integer' || t === 'number') {
    if (typeof v !== 'number' || (t === 'integer' && !Number.isInteger(v))) return `${path}: not an ${t}`;
    if (s.minimum !== undefined && v < s.minimum) return `${path}: below the minimum`;
    if (s.maximum !== undefined && v > s.maximum) return `${path}: above the maximum`;
  } else if (t === 'boolean') {
    if (typeof v !== 'boolean') return `${path}: not a boolean`;
  }
  return '';
}

let failed = 0;
function report(name, why) {
  if (why) {
    failed++;
    console.log(`FAIL ${name}: ${why}`);
  } else console.log(`ok   ${name}`);
}

function checkDoc(name, text, s) {
  let v;
  try {
    v = JSON.parse(text);
  } catch (e) {
    return report(name, `not JSON: ${text}`);
  }
  report(name, invalid(v, s) ? `${invalid(v, s)}: ${text}` : '');
}

if (base === '--validate') {
  checkDoc('the document is valid', readFileSync(0, 'utf8'), schema);
  process.exit(failed ? 1 : 0);
}

const client = new OpenAI({ baseURL: base, apiKey: 'none', maxRetries: 0, timeout: 60000 });
for (let seed = 1; seed <= seeds; seed++) {
  const r = await client.chat.completions.create({
    model: 'stories260K',
    messages: [{ role: 'user', content: 'Describe a child as JSON.' }],
    max_tokens: 300,
    temperature: 1,
    seed,
    response_format: { type: 'json_schema', json_schema: { name: 'child', schema, strict: true } },
  });
  const c = r.choices[0];
  report(`openai chat json_schema seed ${seed}: finish_reason stop`, c.finish_reason === 'stop' ? '' : c.finish_reason);
  checkDoc(`openai chat json_schema seed ${seed}: valid`, c.message.content, schema);
}
// streamed, n = 2
const stream = await client.chat.completions.create({
  model: 'stories260K',
  messages: [{ role: 'user', content: 'Two children, please.' }],
  max_tokens: 300,
  temperature: 1,
  seed: 11,
  n: 2,
  stream: true,
  response_format: { type: 'json_schema', json_schema: { name: 'child', schema } },
});
const parts = ['', ''];
for await (const chunk of stream) for (const ch of chunk.choices) parts[ch.index] += ch.delta?.content ?? '';
checkDoc('openai chat stream n=2: sample 0 valid', parts[0], schema);
checkDoc('openai chat stream n=2: sample 1 valid', parts[1], schema);
// a legacy completion with json_object: some JSON object
const comp = await client.completions.create({
  model: 'stories260K',
  prompt: 'Once upon a time',
  max_tokens: 400,
  temperature: 0,
  response_format: { type: 'json_object' },
});
const text = comp.choices[0].text;
report('openai completions json_object: starts as an object', text.startsWith('{') ? '' : text);
if (comp.choices[0].finish_reason === 'stop') checkDoc('openai completions json_object: JSON', text, { type: 'object' });
// a bad schema is the request's fault
try {
  await client.chat.completions.create({
    model: 'stories260K',
    messages: [{ role: 'user', content: 'x' }],
    response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'string', pattern: '^(?=a)' } } },
  });
  report('openai bad schema: 400', 'no error');
} catch (e) {
  report('openai bad schema: 400', e.status === 400 && /pattern.*lookahead/.test(e.message) ? '' : `${e.status} ${e.message}`);
}
process.exit(failed ? 1 : 0);
