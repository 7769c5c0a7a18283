// llama.cpp's side of benches/models_side_by_side.py (not a test): loads one GGUF file with
// node-llama-cpp's prebuilt CPU build of llama.cpp, then answers timing requests read from
// stdin, one per line, as benches/model_forward.rs does for attnviz:
// - `prefill THREADS ID,ID,..`: the prompt evaluated in one batch (logits of the last
//   token only), a fresh sequence each time. Answers `ms M`.
// - `decode THREADS NEW ID,ID,..`: the prompt, then NEW greedy tokens (end-of-generation
//   tokens do not stop it). Answers `ms M`, the mean time of one step after the first token.
// - `quit`.
//
// Set up outside the project (npm's registry ships llama.cpp prebuilt, no compiler needed):
//     d=$(mktemp -d) && (cd "$d" && npm init -y && npm i -E node-llama-cpp@3.21.1)
//     NODE_PATH="$d/node_modules" node benches/llama_cpp_side.mjs MODEL.gguf
// (models_side_by_side.py starts it with --llama-dir "$d".)
import { createRequire } from "node:module";
import readline from "node:readline";
import path from "node:path";

const [modelPath, moduleDir] = process.argv.slice(2);
if (!modelPath) {
  console.error("usage: node llama_cpp_side.mjs MODEL.gguf [NODE_MODULES_PARENT]");
  process.exit(2);
}
const require = createRequire(path.join(moduleDir ?? process.cwd(), "package.json"));
const { getLlama } = await import(require.resolve("node-llama-cpp"));
const llama = await getLlama({ gpu: false, build: "never", logLevel: "error" });
const model = await llama.loadModel({ modelPath });
const contexts = new Map();

// One context per thread count, each with room for the longest request.
async function contextFor(threads) {
  if (!contexts.has(threads)) {
    const ctx = await model.createContext({ contextSize: 1024, batchSize: 1024, threads });
    contexts.set(threads, { ctx, seq: ctx.getSequence() });
  }
  return contexts.get(threads);
}

const ids = (s) => s.split(",").map((t) => Number.parseInt(t, 10));

async function prefill(threads, tokens) {
  const { seq } = await contextFor(threads);
  await seq.clearHistory();
  const t = performance.now();
  await seq.evaluateWithoutGeneratingNewTokens(tokens);
  return performance.now() - t;
}

async function decode(threads, n, tokens) {
  const { seq } = await contextFor(threads);
  await seq.clearHistory();
  const steps = [];
  let last = null;
  let made = 0;
  for await (const _ of seq.evaluate(tokens, { temperature: 0, yieldEogToken: true })) {
    const now = performance.now();
    if (last !== null) steps.push(now - last);
    last = now;
    made += 1;
    if (made >= n) break;
  }
  if (made < n) throw new Error(`made ${made} tokens, not ${n}`);
  return steps.reduce((a, b) => a + b, 0) / steps.length;
}

const rl = readline.createInterface({ input: process.stdin });
for await (const line of rl) {
  const parts = line.trim().split(/\s+/);
  let answer;
  try {
    if (parts[0] === "quit") break;
    if (parts[0] === "prefill" && parts.length === 3) {
      answer = `ms ${(await prefill(Number(parts[1]), ids(parts[2]))).toFixed(3)}`;
    } else if (parts[0] === "decode" && parts.length === 4) {
      answer = `ms ${(await decode(Number(parts[1]), Number(parts[2]), ids(parts[3]))).toFixed(3)}`;
    } else {
      answer = `error unknown request ${JSON.stringify(line)}`;
    }
  } catch (e) {
    answer = `error ${String(e.message ?? e).replace(/\n/g, " ")}`;
  }
  process.stdout.write(answer + "\n");
}
for (const { ctx } of contexts.values()) await ctx.dispose();
await model.dispose();
process.exit(0);
