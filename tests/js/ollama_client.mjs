// ollama_client.mjs — drives llmchat's Ollama API with the official `ollama`
// npm client, unchanged: version, list, show, ps, chat and generate (streamed
// and not), options (num_predict, seed, stop), the load/unload answers and
// errors (pull and delete among them). Run by tests/cli_ollama.sh: node tests/js/ollama_client.mjs URL.
// Prints "ok   NAME" / "FAIL NAME" lines and "N passed, N failed".
import { Ollama } from 'ollama';

const host = process.argv[2];
const ollama = new Ollama({ host });
let pass = 0, fail = 0;

function check(name, cond, detail) {
  if (cond) { pass++; console.log(`ok   ${name}`); }
  else { fail++; console.log(`FAIL ${name}`); if (detail !== undefined) console.log(`     ${JSON.stringify(detail).slice(0, 600)}`); }
}

async function collect(stream) {
  const parts = [];
  for await (const p of stream) parts.push(p);
  return parts;
}

async function refusal(promise) {
  try { await promise; return null; } catch (e) { return e; }
}

const isInt = (x) => Number.isInteger(x) && x >= 0;
const MODEL = 'llama3.2'; // any name is accepted; the loaded model's own is reported

try {
  // ---- the model ----
  const v = await (await fetch(`${host}/api/version`)).json(); // (no version() in this client)
  check('version: a semver string', /^\d+\.\d+\.\d+$/.test(v.version), v);
  const probe = await fetch(`${host}/`, { method: 'HEAD' });
  check('HEAD /: 200', probe.status === 200, probe.status);

  const list = await ollama.list();
  const m = list.models?.[0];
  check('list: one model, the loaded one', list.models?.length === 1 && m.name === 'stories260K' && m.model === m.name, list);
  check('list: details as Ollama gives them', m.details.format === 'gguf' && m.details.family === 'llama' &&
        m.details.quantization_level === 'F32' && m.details.parameter_size === '293K', m.details);
  check('list: size, digest, modified_at', m.size > 1000000 && /^[0-9a-f]{32,64}$/.test(m.digest) &&
        !isNaN(new Date(m.modified_at).getTime()), m);

  const show = await ollama.show({ model: MODEL });
  check('show: GGUF metadata keys in model_info', show.model_info['general.architecture'] === 'llama' &&
        show.model_info['llama.context_length'] === 512 && show.model_info['llama.block_count'] === 5, show.model_info);
  check('show: capabilities, details, template, parameters',
        show.capabilities.includes('completion') && show.details.format === 'gguf' &&
        typeof show.template === 'string' && show.parameters.includes('stop'), show);

  const ps = await ollama.ps();
  const r = ps.models?.[0];
  check('ps: the loaded model, size_vram 0 on CPU, an expiry', r?.name === 'stories260K' && r.size === m.size &&
        r.size_vram === 0 && new Date(r.expires_at).getTime() > Date.now(), ps);

  // ---- chat ----
  const messages = [{ role: 'user', content: 'Tell me a story' }];
  const opts = { num_predict: 8, seed: 42, temperature: 1, top_k: 40, top_p: 0.95, min_p: 0.01, repeat_penalty: 1.1,
                 presence_penalty: 0, frequency_penalty: 0, num_ctx: 2048 };
  const c1 = await ollama.chat({ model: MODEL, messages, options: opts, keep_alive: '5m', think: false });
  check('chat: one answer, done, the real model name', c1.done === true && c1.model === 'stories260K' &&
        c1.message.role === 'assistant' && c1.message.content.length > 0, c1);
  check('chat: num_predict 8 gives eval_count 8, done_reason length', c1.eval_count === 8 && c1.done_reason === 'length', c1);
  check('chat: counts and durations in nanoseconds', c1.prompt_eval_count > 0 && isInt(c1.total_duration) &&
        c1.total_duration > 0 && isInt(c1.load_duration) && isInt(c1.prompt_eval_duration) && c1.eval_duration > 0 &&
        c1.total_duration >= c1.eval_duration + c1.prompt_eval_duration, c1);
  check('chat: created_at is a time', !isNaN(new Date(c1.created_at).getTime()), c1.created_at);
  const c2 = await ollama.chat({ model: MODEL, messages, options: opts });
  check('chat: the same seed, the same answer', c2.message.content === c1.message.content, [c1.message.content, c2.message.content]);
  const c3 = await ollama.chat({ model: MODEL, messages, options: { ...opts, seed: 43 } });
  const c4 = await ollama.chat({ model: MODEL, messages, options: { ...opts, seed: 44 } });
  check('chat: other seeds, other answers', c3.message.content !== c1.message.content || c4.message.content !== c1.message.content,
        [c1.message.content, c3.message.content, c4.message.content]);

  const parts = await collect(await ollama.chat({ model: MODEL, messages, options: opts, stream: true }));
  const last = parts[parts.length - 1];
  const pieces = parts.slice(0, -1);
  check('chat stream: pieces with done false, then one done', pieces.length > 0 && pieces.every((p) => p.done === false &&
        p.message.role === 'assistant') && last.done === true && last.done_reason === 'length' && last.eval_count === 8, parts);
  check('chat stream: the pieces make the one-piece answer', parts.map((p) => p.message.content).join('') === c1.message.content,
        [parts.map((p) => p.message.content).join(''), c1.message.content]);

  // ---- generate ----
  const g1 = await ollama.generate({ model: MODEL, prompt: 'Once upon a time', raw: true, options: { num_predict: 13, temperature: 0 } });
  check('generate raw: num_predict 13 gives eval_count 13', g1.done === true && g1.eval_count === 13 &&
        g1.done_reason === 'length' && g1.response.length > 0, g1);
  const gparts = await collect(await ollama.generate({ model: MODEL, prompt: 'Once upon a time', raw: true, stream: true,
                                                     options: { num_predict: 13, temperature: 0 } }));
  const glast = gparts[gparts.length - 1];
  check('generate stream: response pieces, then done', glast.done === true && glast.eval_count === 13 &&
        gparts.slice(0, -1).every((p) => p.done === false && typeof p.response === 'string'), gparts);
  check('generate stream = one piece', gparts.map((p) => p.response).join('') === g1.response,
        [gparts.map((p) => p.response).join(''), g1.response]);
  const gs = await ollama.generate({ model: MODEL, prompt: 'Tell me a story', system: 'You are a storyteller.',
                                     options: { num_predict: 4, seed: 7 } });
  check('generate with the chat template and a system prompt', gs.done === true && gs.eval_count <= 4 &&
        gs.prompt_eval_count > 10, gs);
  // a stop string taken from the middle of the greedy answer cuts it there
  const text = g1.response;
  const at = text.indexOf(text.slice(6, 9));
  const g2 = await ollama.generate({ model: MODEL, prompt: 'Once upon a time', raw: true,
                                     options: { num_predict: 13, temperature: 0, stop: [text.slice(6, 9)] } });
  check('generate: a stop string ends the answer before it', at > 0 && g2.response === text.slice(0, at) && g2.done_reason === 'stop',
        [text, text.slice(6, 9), g2.response, g2.done_reason]);

  // a client that stops reading and aborts: the server cancels and goes on
  const long = await ollama.generate({ model: MODEL, prompt: 'Once upon a time', raw: true, stream: true,
                                       options: { num_predict: 400, temperature: 1 } });
  let seen = 0;
  const aborted = await refusal((async () => { for await (const p of long) if (++seen === 2) long.abort(); })());
  const next = await ollama.generate({ model: MODEL, prompt: 'Once upon a time', raw: true, options: { num_predict: 13, temperature: 0 } });
  check('abort a stream: it stops, the next request is answered', seen >= 2 && (aborted === null || aborted.name === 'AbortError') &&
        next.response === g1.response, [seen, String(aborted), next.response]);

  // ---- load / unload requests (no prompt) ----
  const load = await ollama.generate({ model: MODEL, prompt: '' });
  check('generate with no prompt: done_reason load', load.done === true && load.done_reason === 'load', load);
  const unload = await ollama.chat({ model: MODEL, messages: [], keep_alive: 0 });
  check('chat with keep_alive 0 and no messages: done_reason unload', unload.done === true && unload.done_reason === 'unload', unload);
  const after = await ollama.ps();
  check('the model stays loaded after unload', after.models.length === 1, after);

  // ---- errors ----
  let e = await refusal(ollama.chat({ model: MODEL, messages: [{ role: 'user', content: 'hi', images: [new Uint8Array([1, 2, 3])] }] }));
  check('images: 400 with a clear message', e?.status_code === 400 && /images are not supported/.test(e.error), String(e));
  // model management: a readable error (it was OpenAI's shape: "ResponseError: [object Object]")
  e = await refusal(ollama.pull({ model: 'llama3.2' }));
  check('pull: 400 saying models are GGUF files', e?.status_code === 400 && /GGUF files.*pull is not supported/.test(e.error) &&
        !/object Object/.test(String(e)), String(e));
  e = await refusal(ollama.delete({ model: 'llama3.2' }));
  check('delete: 400 with a readable message', e?.status_code === 400 && /delete is not supported/.test(e.message), String(e));
  // format: constrained decoding; stories260K never writes JSON on its own
  for (const seed of [1, 2, 3]) {
    const r = await ollama.generate({ model: MODEL, prompt: 'hi', format: 'json', stream: false,
                                      options: { seed, num_predict: 200 } });
    // a story model fills strings until num_predict: a finished answer must parse,
    // a cut one must still be the start of an object
    let ok = r.response.startsWith('{');
    if (r.done_reason === 'stop') try { ok = ok && typeof JSON.parse(r.response) === 'object'; } catch { ok = false; }
    check(`format json (seed ${seed}): a JSON object (or its start when cut at num_predict)`, ok, r.response);
  }
  const schema = { type: 'object', properties: { name: { type: 'string', maxLength: 12 }, age: { type: 'integer', minimum: 0, maximum: 120 } },
                   required: ['name', 'age'], additionalProperties: false };
  for (const seed of [4, 5]) {
    const r = await ollama.chat({ model: MODEL, messages: [{ role: 'user', content: 'Who?' }], format: schema,
                                  stream: false, options: { seed, num_predict: 200 } });
    let v = null;
    try { v = JSON.parse(r.message.content); } catch { }
    check(`format schema (seed ${seed}): valid against it`, v && typeof v.name === 'string' && v.name.length <= 12 &&
          Number.isInteger(v.age) && v.age >= 0 && v.age <= 120 && Object.keys(v).length === 2, r.message.content);
  }
  e = await refusal(ollama.chat({ model: MODEL, messages, stream: true, options: { temperature: 'hot' } }));
  check('a bad option: 400 naming it (streaming request)', e?.status_code === 400 && /temperature/.test(e.error), String(e));
  e = await refusal(ollama.generate({ model: MODEL, prompt: 'Once upon a time there was a cat. '.repeat(100), raw: true }));
  check('a prompt longer than the context: 400', e?.status_code === 400 && /context/.test(e.error), String(e));
  const res = await fetch(`${host}/api/chat`, { method: 'POST', body: '{"model": "x", "messages": [' });
  const body = await res.json();
  check('bad JSON: 400 {"error": "..."}', res.status === 400 && typeof body.error === 'string' && /JSON/.test(body.error), body);
} catch (err) {
  check('no exception', false, String(err?.stack || err));
}
console.log(`${pass} passed, ${fail} failed`);
process.exit(fail ? 1 : 0);
