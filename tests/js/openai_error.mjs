// openai_error.mjs PORT PROMPT — the official OpenAI client (v4) against a
// `llmchat serve` whose next backend allocation fails (LLC_FAULT_ALLOC=1): the
// first request fails with the server's message (a stream raises its error
// chunk; a plain request is a 500 InternalServerError), the next one works.
// Prints "ok   NAME" or "FAIL NAME" lines for tests/cli_memory.sh.
import OpenAI from 'openai';

const [port, prompt, mode] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 30000 });

function check(name, cond, detail) {
    if (cond) console.log(`ok   ${name}`);
    else console.log(`FAIL ${name}\n     ${JSON.stringify(detail).slice(0, 600)}`);
}

async function run() {
    const req = { model: 'm', messages: [{ role: 'user', content: prompt }], max_tokens: 8 };
    let err = null, text = '';
    try {
        if (mode === 'stream') {
            const stream = await client.chat.completions.create({ ...req, stream: true });
            for await (const chunk of stream) text += chunk.choices?.[0]?.delta?.content ?? '';
        } else {
            await client.chat.completions.create(req);
        }
    } catch (e) {
        err = e;
    }
    check(`openai (${mode}): out of memory in the step is an APIError with the message`,
          err instanceof OpenAI.APIError && /out of memory/.test(err.message) &&
              (mode === 'stream' || err.status === 500),
          err ? { status: err.status, message: err.message } : { text });
    const ok = await client.chat.completions.create(req);
    check(`openai (${mode}): the next request is answered`,
          ok.choices[0].finish_reason === 'length' && ok.choices[0].message.content.length > 0, ok);
}

run().catch((e) => console.log(`FAIL openai_error.mjs: ${e.message}`));
