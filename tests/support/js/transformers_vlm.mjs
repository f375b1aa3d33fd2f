// transformers.js image-text-to-text on a package folder, under Node:
// node transformers_vlm.mjs PACKAGE IMAGE.png NEW_TOKENS TEXT [PIXELS.f32] -> one JSON line {"ids":
// the processor's input_ids (the image tokens expanded), "tokens": the model's greedy tokens after
// them, "pixel_dims": the processor's pixel_values dims}; with PIXELS.f32, its pixel_values
// written there as raw little-endian float32
// Opened with the runtime's defaults (no dtype, no device): config.json's transformers.js_config names the files.
import fs from "node:fs";
import path from "node:path";
import { AutoModelForImageTextToText, AutoProcessor, RawImage, env } from "@huggingface/transformers";

const [pkg, imageFile, count, text, pixelsFile] = process.argv.slice(2);
env.allowRemoteModels = false;
env.localModelPath = path.dirname(path.resolve(pkg)) + path.sep;
const name = path.basename(path.resolve(pkg));
const processor = await AutoProcessor.from_pretrained(name);
const model = await AutoModelForImageTextToText.from_pretrained(name);
const image = await RawImage.read(imageFile);
// the Llava (LLaVA, FastVLM, Moondream), Pixtral and PaliGemma processors take the images first, the others the text
const imagesFirst = ["LlavaProcessor", "PixtralProcessor", "PaliGemmaProcessor"].includes(processor.constructor.name);
const inputs = imagesFirst ? await processor(image, text) : await processor(text, image);
const ids = Array.from(inputs.input_ids.data, Number);
if (pixelsFile) fs.writeFileSync(pixelsFile, Buffer.from(inputs.pixel_values.data.buffer));
const out = await model.generate({ ...inputs, max_new_tokens: Number(count), do_sample: false });
console.log(JSON.stringify({ ids, tokens: Array.from(out.data, Number).slice(ids.length),
                             pixel_dims: inputs.pixel_values.dims }));
