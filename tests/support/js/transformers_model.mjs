// A transformers.js (@huggingface/transformers, onnxruntime-node) AutoModel on a package folder,
// as its model cards show for an embedding no pipeline pooling gives:
// node transformers_model.mjs PACKAGE OUTPUT TEXT... -> one JSON line, {"dims", "data"} of the
// model's output OUTPUT for the texts, tokenized in one padded batch by AutoTokenizer.
// Opened with the runtime's defaults (no dtype, no device): config.json's transformers.js_config names the files.
import path from "node:path";
import { env, AutoModel, AutoTokenizer } from "@huggingface/transformers";

const [pkg, output, ...texts] = process.argv.slice(2);
env.allowRemoteModels = false;
env.localModelPath = path.dirname(path.resolve(pkg)) + path.sep;
const name = path.basename(path.resolve(pkg));
const tokenizer = await AutoTokenizer.from_pretrained(name);
const model = await AutoModel.from_pretrained(name);
const out = (await model(tokenizer(texts, { padding: true, truncation: true })))[output];
console.log(JSON.stringify({ dims: out.dims, data: Array.from(out.data) }));
