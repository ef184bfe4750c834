// server_load.mjs — a load test for `llmchat serve` (not part of `make test`):
// CLIENTS streaming chat clients (kept-alive connections, as editor plugins
// hold them) run back to back for SECONDS, while churn goes on beside them:
// streams cut after their first token, connections that send half a request
// and wait, connections that send nothing, and /health probes. Loopback only.
// Prints p50/p99 time to first token, throughput, and every error by kind;
// exits 1 when any request failed or the server stopped answering.
//
//   node tests/tools/server_load.mjs (--unix PATH | --port N) [--clients 64]
//        [--seconds 60] [--max-tokens 48] [--churn 8]
import http from 'node:http';
import net from 'node:net';

const args = Object.fromEntries(process.argv.slice(2).reduce((acc, a, i, all) => {
    if (a.startsWith('--')) acc.push([a.slice(2), all[i + 1]]);
    return acc;
}, []));
const unix = args.unix, port = args.port ? Number(args.port) : 0;
if (!unix && !port) {
    console.error('usage: server_load.mjs (--unix PATH | --port N) [--clients 64] [--seconds 60] [--max-tokens 48] [--churn 8]');
    process.exit(2);
}
const CLIENTS = Number(args.clients ?? 64), SECONDS = Number(args.seconds ?? 60);
const MAX_TOKENS = Number(args['max-tokens'] ?? 48), CHURN = Number(args.churn ?? 8);
const target = unix ? { socketPath: unix } : { host: '127.0.0.1', port };
const agent = new http.Agent({ keepAlive: true, maxSockets: CLIENTS + 4 });
const deadline = Date.now() + SECONDS * 1000;

const ttft = [], health = [], errors = {};
let completed = 0, tokens = 0, cut = 0, halfOpen = 0, silent = 0;
const err = (kind) => { errors[kind] = (errors[kind] ?? 0) + 1; };
const words = ['cat', 'dog', 'boat', 'tree', 'girl', 'boy', 'ball', 'sun', 'park', 'bird', 'fish', 'cake'];
const prompt = () => Array.from({ length: 3 + Math.floor(Math.random() * 6) },
    () => words[Math.floor(Math.random() * words.length)]).join(' ');

function connect() {
    return unix ? net.createConnection(unix) : net.createConnection(port, '127.0.0.1');
}

// One streaming chat completion; resolves when it ends. cutAfterFirst: hang up
// at the first token (a client that goes away mid-stream).
function stream(cutAfterFirst) {
    return new Promise((resolve) => {
        const body = JSON.stringify({
            messages: [{ role: 'user', content: `Tell me about a ${prompt()}` }],
            max_tokens: MAX_TOKENS, stream: true, temperature: 0.8,
        });
        const t0 = performance.now();
        let first = 0, buf = '', done = false, finish = false, n = 0;
        const req = http.request({
            ...target, agent: cutAfterFirst ? false : agent, method: 'POST', path: '/v1/chat/completions',
            headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) },
            timeout: 30000,
        }, (res) => {
            if (res.statusCode !== 200) {
                err(`http ${res.statusCode}`);
                res.resume();
                res.on('end', resolve);
                return;
            }
            res.setEncoding('utf8');
            res.on('data', (chunk) => {
                buf += chunk;
                let k;
                while ((k = buf.indexOf('\n\n')) >= 0) {
                    const ev = buf.slice(0, k);
                    buf = buf.slice(k + 2);
                    if (!ev.startsWith('data: ')) continue;
                    const data = ev.slice(6);
                    if (data === '[DONE]') { done = true; continue; }
                    let o;
                    try { o = JSON.parse(data); } catch { err('bad json chunk'); continue; }
                    const c = o.choices?.[0];
                    if (c?.delta?.content) {
                        n++;
                        if (!first) {
                            first = performance.now();
                            if (cutAfterFirst) { req.destroy(); cut++; resolve(); return; }
                        }
                    }
                    if (c?.finish_reason) finish = true;
                }
            });
            res.on('end', () => {
                if (cutAfterFirst) return resolve();
                if (!done || !finish) err('stream ended without finish and [DONE]');
                else {
                    completed++;
                    tokens += n;
                    if (first) ttft.push(first - t0);
                }
                resolve();
            });
            res.on('error', () => { if (!cutAfterFirst) err('response error'); resolve(); });
        });
        req.on('timeout', () => { err('timeout (30 s)'); req.destroy(); resolve(); });
        req.on('error', (e) => { if (!cutAfterFirst) err(`request: ${e.code ?? e.message}`); resolve(); });
        req.end(body);
    });
}

function probeHealth() {
    return new Promise((resolve) => {
        const t0 = performance.now();
        const req = http.get({ ...target, path: '/health', agent: false, timeout: 5000 }, (res) => {
            res.resume();
            res.on('end', () => {
                if (res.statusCode === 200) health.push(performance.now() - t0);
                else err(`health ${res.statusCode}`);
                resolve();
            });
        });
        req.on('timeout', () => { err('health timeout (5 s)'); req.destroy(); resolve(); });
        req.on('error', (e) => { err(`health: ${e.code ?? e.message}`); resolve(); });
    });
}

// A connection that sends half a request line (or nothing) and waits.
function idleConn(half) {
    return new Promise((resolve) => {
        const s = connect();
        s.on('connect', () => { if (half) s.write('POST /v1/chat/completions HT'); });
        s.on('error', () => { });
        const hold = 500 + Math.random() * 6500; // some outlive the 5 s request deadline
        setTimeout(() => { s.destroy(); resolve(); }, hold);
        if (half) halfOpen++; else silent++;
    });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function client() {
    while (Date.now() < deadline) await stream(false);
}
async function churn(i) {
    while (Date.now() < deadline) {
        const kind = (i + Math.floor(Math.random() * 4)) % 4;
        if (kind === 0) await stream(true);
        else if (kind === 1) { idleConn(true); await sleep(50); }
        else if (kind === 2) { idleConn(false); await sleep(50); }
        else { await probeHealth(); await sleep(200); }
    }
}

const t0 = Date.now();
await Promise.all([...Array.from({ length: CLIENTS }, client), ...Array.from({ length: CHURN }, (_, i) => churn(i))]);
const wall = (Date.now() - t0) / 1000;
await sleep(7500); // the idle connections end; the server must still answer
const before = health.length;
await probeHealth();
const alive = health.length > before;
agent.destroy();

const pct = (a, p) => {
    if (!a.length) return NaN;
    const s = [...a].sort((x, y) => x - y);
    return s[Math.min(s.length - 1, Math.floor(p / 100 * s.length))];
};
const f = (x) => (Number.isNaN(x) ? '-' : x.toFixed(0));
console.log(`clients ${CLIENTS} streaming, churn ${CHURN}, ${wall.toFixed(1)} s, max_tokens ${MAX_TOKENS}`);
console.log(`streams completed ${completed}, tokens ${tokens} (${(tokens / wall).toFixed(0)} tok/s), cut after first token ${cut}, half-open ${halfOpen}, silent ${silent}, health probes ${health.length}`);
console.log(`TTFT ms: p50 ${f(pct(ttft, 50))} p99 ${f(pct(ttft, 99))} max ${f(Math.max(...ttft))}`);
console.log(`health ms: p50 ${f(pct(health, 50))} p99 ${f(pct(health, 99))}`);
const nerr = Object.values(errors).reduce((a, b) => a + b, 0);
console.log(`errors ${nerr}${nerr ? ': ' + JSON.stringify(errors) : ''}`);
console.log(`after the load: /health ${alive ? 'answers' : 'DOES NOT ANSWER'}`);
process.exit(nerr || !alive ? 1 : 0);
