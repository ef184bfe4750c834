// openai_extras.mjs PORT MODEL — the official OpenAI client (v4) against
// `llmchat serve --listen 127.0.0.1:PORT`: models.retrieve (the model, and
// OpenAI's 404 for another id) and completions.create with a list of prompts
// (strings and token-id lists, one choice per prompt and sample, streaming
// too), and an image content part refused with a 400. Prints "ok   NAME" or "FAIL NAME" lines for tests/cli_server_extras.sh.
import OpenAI from 'openai';

const [port, model] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 30000 });

function check(name, cond, detail) {
    if (cond) console.log(`ok   ${name}`);
    else console.log(`FAIL ${name}\n     ${JSON.stringify(detail).slice(0, 600)}`);
}

async function run() {
    const m = await client.models.retrieve(model);
    check('openai: models.retrieve(id)', m.id === model && m.object === 'model', m);

    let err = null;
    try {
        await client.models.retrieve('no-such-model');
    } catch (e) {
        err = e;
    }
    check('openai: models.retrieve(unknown) is NotFoundError, code model_not_found',
          err instanceof OpenAI.NotFoundError && err.status === 404 && err.code === 'model_not_found' &&
              /no-such-model/.test(err.message),
          err && { status: err.status, code: err.code, message: err.message });

    const tok = async (text) => {
        const res = await fetch(`http://127.0.0.1:${port}/tokenize`, {
            method: 'POST', body: JSON.stringify({ content: text, add_special: true }),
        });
        return (await res.json()).tokens;
    };

    // greedy, so each prompt's answer is known from a request of its own
    const prompts = ['Once upon a time', 'The little dog', 'Lily'];
    const params = { model, max_tokens: 8, temperature: 0 };
    const alone = [];
    for (const p of prompts) alone.push((await client.completions.create({ ...params, prompt: p })).choices[0].text);
    check('openai: the prompts answer differently alone', new Set(alone).size === prompts.length, alone);

    const r = await client.completions.create({ ...params, prompt: prompts, n: 2 });
    const byIndex = [...r.choices].sort((a, b) => a.index - b.index);
    check('openai: a list of prompts, n 2: one choice per prompt and sample',
          r.choices.length === 6 && byIndex.every((c, i) => c.index === i), r.choices.map((c) => c.index));
    check('openai: choice index = prompt x n + sample',
          byIndex.every((c) => c.text === alone[Math.floor(c.index / 2)]),
          { alone, got: byIndex.map((c) => c.text) });
    let n_prompt = 0;
    for (const p of prompts) n_prompt += (await tok(p)).length;
    check('openai: usage sums the prompts',
          r.usage.completion_tokens === byIndex.length * 8 && r.usage.prompt_tokens === n_prompt, { usage: r.usage, n_prompt });

    const stream = await client.completions.create({ ...params, prompt: prompts, stream: true });
    const texts = ['', '', ''], finished = [null, null, null];
    for await (const chunk of stream)
        for (const c of chunk.choices) {
            texts[c.index] += c.text;
            if (c.finish_reason) finished[c.index] = c.finish_reason;
        }
    check('openai: a streamed list of prompts gives each choice its prompt\'s text',
          texts.every((t, i) => t === alone[i]) && finished.every((f) => f === 'length'), { texts, finished });

    const ids = [await tok(prompts[0]), await tok(prompts[1])];
    const r2 = await client.completions.create({ ...params, prompt: ids });
    const t2 = [...r2.choices].sort((a, b) => a.index - b.index).map((c) => c.text);
    check('openai: a list of token-id lists', t2.length === 2 && t2[0] === alone[0] && t2[1] === alone[1],
          { alone, got: t2 });
}

// An image content part: a 400 naming it, asked once (a 5xx would be retried).
async function imagePart() {
    let calls = 0;
    const counting = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'unused', maxRetries: 2, timeout: 30000,
                                  fetch: (url, init) => { calls++; return fetch(url, init); } });
    let err = null;
    try {
        await counting.chat.completions.create({ model, max_tokens: 4, messages: [{ role: 'user', content: [
            { type: 'text', text: 'What is this?' },
            { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' } }] }] });
    } catch (e) {
        err = e;
    }
    check('openai: an image part is a BadRequestError naming the part type, not retried',
          err instanceof OpenAI.BadRequestError && /content\[1\].*'image_url'/.test(err.message) && calls === 1,
          err && { status: err.status, message: err.message, calls });
}

run().then(imagePart).catch((e) => {
    console.log(`FAIL openai client: ${e}`);
    process.exit(1);
});
