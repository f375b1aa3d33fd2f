// A transformers.js (@huggingface/transformers, onnxruntime-node) pipeline on a package folder:
// node transformers_pipeline.mjs TASK PACKAGE OPTIONS_JSON INPUT... -> one JSON line, the
// pipeline's result for the inputs (texts, or image file paths) with OPTIONS_JSON as its call
// options (its candidate_labels, for a zero-shot pipeline, its second argument); a Tensor result is written as {"dims", "data"}.
// Opened with the runtime's defaults (no dtype, no device): config.json's transformers.js_config names the files.
import path from "node:path";
import { env, pipeline, Tensor } from "@huggingface/transformers";

const [task, pkg, options, ...inputs] = process.argv.slice(2);
env.allowRemoteModels = false;
env.localModelPath = path.dirname(path.resolve(pkg)) + path.sep;
const run = await pipeline(task, path.basename(path.resolve(pkg)));
// a zero-shot pipeline takes its candidate labels as its second argument
const { candidate_labels, ...rest } = JSON.parse(options);
const out = candidate_labels ? await run(inputs, candidate_labels, rest) : await run(inputs, rest);
const plain = out instanceof Tensor ? { dims: out.dims, data: Array.from(out.data) } : out;
console.log(JSON.stringify(plain));
