// embeddings.mjs — the official `openai` and `ollama` npm clients against the
// server's embeddings endpoints (run by tests/cli_embed.sh). Usage:
//   node tests/js/embeddings.mjs PORT DIM
// Prints one "ok NAME" or "FAIL NAME: why" line per check; exits 1 on a failure.
import OpenAI from 'openai';
import { Ollama } from 'ollama';

const [port, dimArg] = process.argv.slice(2);
const dim = Number(dimArg);
const base = `http://127.0.0.1:${port}`;
let failed = 0;
const check = (name, cond, why = '') => {
  if (cond) console.log(`ok ${name}`);
  else {
    failed++;
    console.log(`FAIL ${name}: ${why}`);
  }
};
const norm = (v) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));
const dot = (a, b) => a.reduce((s, x, i) => s + x * b[i], 0);
const maxDiff = (a, b) => a.reduce((m, x, i) => Math.max(m, Math.abs(x - b[i])), 0);

const client = new OpenAI({ apiKey: 'none', baseURL: `${base}/v1`, maxRetries: 0 });
const texts = ['Once upon a time, there was a little girl.', 'The dog ran to the park.'];

try {
  // the client's default: it asks for base64 and decodes the float32 bytes itself
  const b = await client.embeddings.create({ model: 'any', input: [texts[0], texts[1], texts[0]] });
  const vb = b.data.map((d) => Array.from(d.embedding));
  check('openai default (base64): three vectors, in order', b.data.length === 3 &&
        b.data.every((d, i) => d.index === i && d.object === 'embedding'), JSON.stringify(b.data.map((d) => d.index)));
  check('openai default (base64): model dimensions', vb.every((v) => v.length === dim), vb.map((v) => v.length).join());
  check('openai default (base64): norm 1', vb.every((v) => Math.abs(norm(v) - 1) < 1e-5), vb.map(norm).join());
  check('openai: cosine(same text) = 1', Math.abs(dot(vb[0], vb[2]) - 1) < 1e-5, dot(vb[0], vb[2]));
  check('openai: different texts differ', dot(vb[0], vb[1]) < 0.999, dot(vb[0], vb[1]));
  check('openai: usage counts the prompt tokens', b.usage.prompt_tokens > 10 &&
        b.usage.total_tokens === b.usage.prompt_tokens, JSON.stringify(b.usage));

  const f = await client.embeddings.create({ model: 'any', input: texts, encoding_format: 'float' });
  const vf = f.data.map((d) => d.embedding);
  check('openai float: plain arrays of numbers', vf.every((v) => Array.isArray(v) && v.length === dim &&
        typeof v[0] === 'number'), typeof vf[0]);
  check('openai float = base64', maxDiff(vf[0], vb[0]) < 1e-6 && maxDiff(vf[1], vb[1]) < 1e-6,
        `${maxDiff(vf[0], vb[0])} ${maxDiff(vf[1], vb[1])}`);

  // asked for explicitly, base64 comes back as the string: little-endian float32
  const s = await client.embeddings.create({ model: 'any', input: texts[1], encoding_format: 'base64' });
  const buf = Buffer.from(s.data[0].embedding, 'base64');
  const decoded = Array.from({ length: buf.length / 4 }, (_, i) => buf.readFloatLE(4 * i));
  check('openai base64 string decodes to the float vector', typeof s.data[0].embedding === 'string' &&
        decoded.length === dim && maxDiff(decoded, vf[1]) < 1e-6, `${decoded.length} ${maxDiff(decoded, vf[1])}`);

  const ids = await client.embeddings.create({ model: 'any', input: [[1, 403, 407, 261, 378]], encoding_format: 'float' });
  check('openai: token ids as input', ids.data[0].embedding.length === dim && ids.usage.prompt_tokens === 5,
        JSON.stringify(ids.usage));

  let status = 0;
  try {
    await client.embeddings.create({ model: 'any', input: 'x', dimensions: dim + 1 });
  } catch (e) {
    status = e.status;
  }
  check('openai: other dimensions -> 400', status === 400, status);
  status = 0;
  try {
    await client.embeddings.create({ model: 'any', input: '' });
  } catch (e) {
    status = e.status;
  }
  check('openai: empty input -> 400', status === 400, status);

  const ollama = new Ollama({ host: base });
  const o = await ollama.embed({ model: 'any', input: texts });
  check('ollama embed: vectors = openai', o.embeddings.length === 2 && maxDiff(o.embeddings[0], vf[0]) < 1e-6 &&
        maxDiff(o.embeddings[1], vf[1]) < 1e-6 && o.prompt_eval_count === f.usage.prompt_tokens,
        JSON.stringify({ n: o.embeddings.length, count: o.prompt_eval_count }));
  const old = await ollama.embeddings({ model: 'any', prompt: texts[0] });
  check('ollama embeddings (old): one vector = openai', maxDiff(old.embedding, vf[0]) < 1e-6, old.embedding.length);
} catch (e) {
  check('requests succeed', false, e.stack || String(e));
}
process.exit(failed ? 1 : 0);
