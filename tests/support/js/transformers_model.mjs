// A transformers.js (@huggingface/transformers, onnxruntime-node) model class on a package folder,
// as its model cards show for an embedding no pipeline pooling gives:
// node transformers_model.mjs PACKAGE CLASS OUTPUT TOKENIZER_OPTIONS_JSON TEXT... -> one JSON line,
// {"dims", "data"} of the output OUTPUT of CLASS (AutoModel, SiglipTextModel, ...) for the texts,
// tokenized in one batch by AutoTokenizer with TOKENIZER_OPTIONS_JSON.
// Opened with the runtime's defaults (no dtype, no device): config.json's transformers.js_config names the files.
import path from "node:path";
import * as transformers from "@huggingface/transformers";

const [pkg, modelClass, output, options, ...texts] = process.argv.slice(2);
transformers.env.allowRemoteModels = false;
transformers.env.localModelPath = path.dirname(path.resolve(pkg)) + path.sep;
const name = path.basename(path.resolve(pkg));
const tokenizer = await transformers.AutoTokenizer.from_pretrained(name);
const model = await transformers[modelClass].from_pretrained(name);
const out = (await model(tokenizer(texts, JSON.parse(options))))[output];
console.log(JSON.stringify({ dims: out.dims, data: Array.from(out.data) }));
