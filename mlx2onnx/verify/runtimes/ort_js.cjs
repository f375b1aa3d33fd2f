// Runs an ONNX model in onnxruntime-web (wasm) or onnxruntime-node for mlx2onnx's parity
// check. Usage: node ort_js.cjs PACKAGE MODEL SETTINGS, SETTINGS a JSON object {"level":
// graph optimization level, "config": session config entries} (the user's; none by
// default, as a plain session has none). Prints one JSON line when the session is
// open ({"ready": version, "inputs": [...], "outputs": [...]}) or failed ({"error": ...}),
// then answers each JSON line on stdin ({"feeds": [{name, type, dims, file}], "fetch":
// [names], "dir": folder}) with one JSON line naming the raw little-endian output files.
"use strict";
const fs = require("fs");
const path = require("path");
const readline = require("readline");

const ARRAYS = {
  float32: Float32Array, float64: Float64Array, float16: Uint16Array, int8: Int8Array,
  uint8: Uint8Array, int16: Int16Array, uint16: Uint16Array, int32: Int32Array,
  uint32: Uint32Array, int64: BigInt64Array, uint64: BigUint64Array, bool: Uint8Array,
};

function say(obj) { process.stdout.write(JSON.stringify(obj) + "\n"); }

function tensorOf(ort, feed) {
  const bytes = fs.readFileSync(feed.file);
  const Kind = ARRAYS[feed.type];
  if (!Kind) throw new Error(`input ${feed.name}: this runner cannot feed ${feed.type}`);
  const buffer = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength);
  return new ort.Tensor(feed.type, new Kind(buffer), feed.dims);
}

function bytesOf(tensor) {
  const data = tensor.data;
  return Buffer.from(data.buffer, data.byteOffset, data.byteLength);
}

async function main() {
  const [pkg, model, settings] = process.argv.slice(2);
  const { level, config } = JSON.parse(settings || "{}");
  let ort;
  try {
    ort = require(pkg);
  } catch (err) {
    say({ error: `cannot load ${pkg}: ${err.message}`, missing: true });
    return;
  }
  if (pkg === "onnxruntime-web") {
    ort.env.wasm.numThreads = 1;  // no worker threads under Node
  }
  let session;
  try {
    const options = { executionProviders: [pkg === "onnxruntime-web" ? "wasm" : "cpu"] };
    if (level) options.graphOptimizationLevel = level;
    if (config && Object.keys(config).length) options.extra = config;  // flat "session.x" keys
    session = await ort.InferenceSession.create(model, options);
  } catch (err) {
    say({ error: String(err.message || err) });
    return;
  }
  const version = ort.env.versions[pkg === "onnxruntime-web" ? "web" : "node"] || ort.env.versions.common;
  say({ ready: version, inputs: session.inputNames, outputs: session.outputNames });
  const lines = readline.createInterface({ input: process.stdin });
  for await (const line of lines) {
    if (!line.trim()) continue;
    const request = JSON.parse(line);
    try {
      const feeds = {};
      for (const feed of request.feeds) feeds[feed.name] = tensorOf(ort, feed);
      const results = await session.run(feeds, request.fetch);
      const outputs = request.fetch.map((name, k) => {
        const t = results[name];
        const file = path.join(request.dir, `out_${k}.bin`);
        fs.writeFileSync(file, bytesOf(t));
        return { name, type: t.type, dims: Array.from(t.dims, Number), file };
      });
      say({ outputs });
    } catch (err) {
      say({ error: String(err.message || err) });
    }
  }
}

main().catch((err) => { say({ error: String(err.message || err) }); });
