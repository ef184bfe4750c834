// ai_sdk.mjs PORT — the Vercel AI SDK (ai 6 with @ai-sdk/openai-compatible)
// and zod 4 against `llmchat serve --listen 127.0.0.1:PORT`, as an app would
// use them: generateObject with a zod schema (an .int() — bounds ±(2^53-1) —
// and an .email(), whose pattern the grammar enforces), and generateText with
// a tool whose argument is .int() under toolChoice 'required'. The model is a
// random one: only constrained decoding makes the answers parse, and the SDK
// validates them against the zod schemas itself. The email's parts are
// unbounded and a random model writes long ones: the seed (SEED) is one whose
// answer ends within maxOutputTokens (others end with 'length'; of seeds 1-12,
// 2 and 12 do since the sampler orders its top-k candidates, at every SIMD
// level). Prints "ok   NAME" /
// "FAIL NAME" lines for tests/cli_server_tools.sh; exits 1 on any failure.
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { generateObject, generateText, tool } from 'ai';
import { z } from 'zod';

const port = process.argv[2];
const llmchat = createOpenAICompatible({ name: 'llmchat', baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'unused',
                                         supportsStructuredOutputs: true });
const model = llmchat.chatModel('local');
let failed = 0;
const check = (name, cond, detail) => {
  if (cond) console.log(`ok   ${name}`);
  else { failed++; console.log(`FAIL ${name}\n     ${JSON.stringify(detail).slice(0, 600)}`); }
};

try {
  const person = z.object({ age: z.number().int(), email: z.string().email() });
  const r = await generateObject({ model, schema: person, prompt: 'A person, please.', maxOutputTokens: 400, seed: Number(process.env.SEED ?? 2),
                                   maxRetries: 0 });
  check('ai sdk: generateObject with z.number().int() and z.string().email() parses',
        Number.isInteger(r.object.age) && /^[^@]+@[^@]+\.[A-Za-z]{2,}$/.test(r.object.email), r.object);
} catch (e) {
  check('ai sdk: generateObject', false, String(e));
}

try {
  const r = await generateText({
    model, prompt: 'Weather for the next days?', toolChoice: 'required', maxOutputTokens: 120, seed: 5, maxRetries: 0,
    tools: { forecast: tool({ description: 'The forecast', inputSchema: z.object({ days: z.number().int() }) }) },
  });
  const call = r.toolCalls[0];
  check('ai sdk: a tool with an .int() argument under toolChoice required is called with an integer',
        r.toolCalls.length === 1 && call.toolName === 'forecast' && Number.isInteger(call.input.days) && !call.invalid,
        r.toolCalls);
} catch (e) {
  check('ai sdk: tool call', false, String(e));
}
process.exit(failed ? 1 : 0);
