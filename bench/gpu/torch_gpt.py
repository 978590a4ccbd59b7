#!/usr/bin/env python3
"""PyTorch side of bench/gpu: the GPT of examples/gpt.loom in PyTorch.

  torch_gpt.py inputs  --config C --out FILE        random tokens/targets
  torch_gpt.py check   --config C --params P --inputs I --loom-loss X [--out F]
                       [--device cpu]
                       (F: PyTorch's loss and final hidden state h)
  torch_gpt.py time    --config C --steps N          eager and torch.compile

Weights and inputs are global tensors in safetensors files, read and written
here with a few lines of json (no safetensors or numpy package needed).
The model follows docs/language.md: bf16 storage, layer norms computed in
f32 and rounded to bf16, GELU(tanh), causal attention scaled by 1/sqrt(E),
the output projection tied to the token embedding, cross-entropy in f32.
"""

import argparse
import json
import statistics
import struct
import sys
import time

import torch
import torch.nn.functional as F

CONFIGS = {
    # name: (V, S, D, H, L, B)
    "gpt": (512, 64, 128, 4, 4, 8),
    "gpt-1layer": (512, 64, 128, 4, 1, 8),
    "gpt2-small": (50304, 1024, 768, 12, 12, 8),
}
DTYPES = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16,
          "I32": torch.int32, "I64": torch.int64}


def read_safetensors(path, device):
    with open(path, "rb") as f:
        data = f.read()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + length])
    start = 8 + length
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        raw = bytearray(data[start + begin:start + end])
        t = torch.frombuffer(raw, dtype=DTYPES[entry["dtype"]]) if raw else \
            torch.empty(0, dtype=DTYPES[entry["dtype"]])
        tensors[name] = t.reshape(entry["shape"]).to(device)
    return tensors


def write_safetensors(path, tensors):
    names = {torch.int32: "I32", torch.int64: "I64", torch.float32: "F32",
             torch.bfloat16: "BF16"}
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        blob = bytes(t.contiguous().cpu().reshape(-1).view(torch.uint8).tolist())
        header[name] = {"dtype": names[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header).encode()
    text += b" " * ((8 - (8 + len(text)) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def random_params(config, device):
    V, S, D, H, L, B = CONFIGS[config]
    E, Fh = D // H, 4 * D
    g = torch.Generator(device="cpu").manual_seed(0)

    def normal(shape, std):
        return (torch.randn(shape, generator=g) * std).to(torch.bfloat16).to(device)

    return {
        "wte": normal((V, D), 0.02), "wpe": normal((S, D), 0.01),
        "layers.ln1.g": torch.ones(L, D, device=device),
        "layers.ln1.b": torch.zeros(L, D, device=device),
        "layers.attn.w_q": normal((L, D, H, E), 0.02),
        "layers.attn.w_k": normal((L, D, H, E), 0.02),
        "layers.attn.w_v": normal((L, D, H, E), 0.02),
        "layers.attn.w_o": normal((L, H, E, D), 0.02),
        "layers.ln2.g": torch.ones(L, D, device=device),
        "layers.ln2.b": torch.zeros(L, D, device=device),
        "layers.mlp.w1": normal((L, D, Fh), 0.02),
        "layers.mlp.b1": torch.zeros(L, Fh, device=device, dtype=torch.bfloat16),
        "layers.mlp.w2": normal((L, Fh, D), 0.02),
        "layers.mlp.b2": torch.zeros(L, D, device=device, dtype=torch.bfloat16),
        "ln_f.g": torch.ones(D, device=device), "ln_f.b": torch.zeros(D, device=device),
    }


def forward(p, tokens, targets, H, hidden=False):
    """The loss; with `hidden`, also the final layer norm's output h."""
    D = p["wte"].shape[1]
    L = p["layers.ln1.g"].shape[0]

    def ln(x, g, b):  # f32 scale and bias: computed in f32, rounded to bf16
        return F.layer_norm(x.float(), (D,), g, b, 1e-5).to(torch.bfloat16)

    x = F.embedding(tokens.long(), p["wte"]) + p["wpe"]
    for l in range(L):
        h = ln(x, p["layers.ln1.g"][l], p["layers.ln1.b"][l])
        q = torch.einsum("bsd,dhe->bhse", h, p["layers.attn.w_q"][l])
        k = torch.einsum("bsd,dhe->bhse", h, p["layers.attn.w_k"][l])
        v = torch.einsum("bsd,dhe->bhse", h, p["layers.attn.w_v"][l])
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + torch.einsum("bhse,hed->bsd", o, p["layers.attn.w_o"][l])
        h = ln(x, p["layers.ln2.g"][l], p["layers.ln2.b"][l])
        m = F.gelu(h @ p["layers.mlp.w1"][l] + p["layers.mlp.b1"][l], approximate="tanh")
        x = x + (m @ p["layers.mlp.w2"][l] + p["layers.mlp.b2"][l])
    h = ln(x, p["ln_f.g"], p["ln_f.b"])
    logits = h @ p["wte"].t()
    loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]),
                           targets.reshape(-1).long())
    return (loss, h) if hidden else loss


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=["inputs", "check", "time"])
    parser.add_argument("--config", required=True, choices=sorted(CONFIGS))
    parser.add_argument("--out")
    parser.add_argument("--params")
    parser.add_argument("--inputs")
    parser.add_argument("--loom-loss", type=float)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--no-compile", action="store_true")
    parser.add_argument("--device", default="cuda",
                        help="where PyTorch runs the check (cpu: to try this "
                             "script without a GPU; timing needs cuda)")
    args = parser.parse_args()
    V, S, D, H, L, B = CONFIGS[args.config]
    device = args.device
    if args.what == "time" and device != "cuda":
        parser.error("time measures with CUDA events: --device cuda")

    if args.what == "inputs":
        g = torch.Generator(device="cpu").manual_seed(1)
        write_safetensors(args.out, {
            "tokens": torch.randint(0, V, (B, S), generator=g, dtype=torch.int32),
            "targets": torch.randint(0, V, (B, S), generator=g, dtype=torch.int32)})
        return 0

    if args.what == "check":
        p = read_safetensors(args.params, device)
        inputs = read_safetensors(args.inputs, device)
        with torch.inference_mode():
            loss, h = forward(p, inputs["tokens"], inputs["targets"], H, hidden=True)
        if args.out:  # for bench/gpu/compare.py --relative-l2
            write_safetensors(args.out, {"loss": loss.float(), "h": h})
        loss = loss.item()
        diff = abs(loss - args.loom_loss) / abs(loss)
        ok = diff <= 2e-2
        print(json.dumps({"check": args.config, "torch_loss": loss,
                          "loom_loss": args.loom_loss, "relative_difference": diff,
                          "ok": ok}))
        return 0 if ok else 1

    # Timing: median of per-step times measured with CUDA events.
    p = random_params(args.config, device)
    g = torch.Generator(device="cpu").manual_seed(1)
    tokens = torch.randint(0, V, (B, S), generator=g, dtype=torch.int32).to(device)
    targets = torch.randint(0, V, (B, S), generator=g, dtype=torch.int32).to(device)

    def timed(fn):
        with torch.inference_mode():
            for _ in range(3):
                fn(p, tokens, targets, H)
            torch.cuda.synchronize()
            times = []
            for _ in range(args.steps):
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                start.record()
                fn(p, tokens, targets, H)
                end.record()
                torch.cuda.synchronize()
                times.append(start.elapsed_time(end))
        return statistics.median(times)

    result = {"config": args.config, "eager_ms": timed(forward)}
    if not args.no_compile:
        begin = time.time()
        compiled = torch.compile(forward)
        try:
            result["compile_ms"] = timed(compiled)
            result["compile_seconds"] = time.time() - begin
        except Exception as error:  # report, do not lose the eager figure
            result["compile_error"] = str(error)[:300]
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
