#!/usr/bin/python3
"""PyTorch's GPT-2 as nanoGPT writes it, timed on synthetic tokens: the baseline of the GPU check's
gpt2_124m_torch row, beside mpiddp's gpt2_124m_bf16 (the same model, batch and context on the same GPU).

usage: bench_torch_gpt.py [--blocks 12 --width 768 --heads 12 --context 1024 --vocab 50257]
                          [--batch 8 --steps 30 --warmup 10 --device cuda --precision bf16|fp32 --compile]
The model is nanoGPT's: token and position embeddings, pre-LayerNorm blocks whose attention is
F.scaled_dot_product_attention(is_causal=True) (flash attention on a GPU), a tanh GELU, a head tied to the
token embedding; AdamW (fused on a GPU); bf16 under autocast, with TF32 for the products autocast leaves in
fp32, as nanoGPT sets them (fp32: plain fp32 products, like mpiddp's fp32). One process, no DDP wrapper (one
GPU: nothing to all-reduce). Steps after --warmup are timed.
prints one line: "torch gpt tokens/s X ms/step M steps S (device D, precision P, compile C, loss L)"
"""
import argparse
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def attend(q, k, v):
    """Causal attention: PyTorch's fused kernel where it has one (2.0 on), else nanoGPT's explicit fallback."""
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    t = q.shape[-2]
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(torch.ones(t, t, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    return F.softmax(scores, dim=-1) @ v


class SelfAttention(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.c_attn = nn.Linear(width, 3 * width)
        self.c_proj = nn.Linear(width, width)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.c_attn(x).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = attend(q, k, v)
        return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, d))


class Block(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.ln_1, self.attn = nn.LayerNorm(width), SelfAttention(width, heads)
        self.ln_2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(approximate="tanh"), nn.Linear(4 * width, width))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Gpt(nn.Module):
    def __init__(self, args):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(args.vocab, args.width), nn.Embedding(args.context, args.width)
        self.blocks = nn.ModuleList(Block(args.width, args.heads) for _ in range(args.blocks))
        self.ln_f = nn.LayerNorm(args.width)
        self.lm_head = nn.Linear(args.width, args.vocab, bias=False)
        self.lm_head.weight = self.wte.weight
        for module in self.modules():  # GPT-2's initialisation, as nanoGPT's
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, std=0.02)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)

    def forward(self, ids):
        x = self.wte(ids) + self.wpe(torch.arange(ids.shape[1], device=ids.device))
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def main():
    parser = argparse.ArgumentParser()
    for name, default in (("blocks", 12), ("width", 768), ("heads", 12), ("context", 1024), ("vocab", 50257),
                          ("batch", 8), ("steps", 30), ("warmup", 10), ("seed", 1)):
        parser.add_argument(f"--{name}", type=int, default=default)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--precision", choices=("bf16", "fp32"), default="bf16")
    parser.add_argument("--compile", action="store_true", help="torch.compile the model (slow to start)")
    args = parser.parse_args()
    if not 0 <= args.warmup < args.steps:
        parser.error("--warmup must be at least 0 and below --steps")
    torch.manual_seed(args.seed)
    cuda = args.device.startswith("cuda")
    torch.backends.cuda.matmul.allow_tf32 = args.precision == "bf16"
    torch.backends.cudnn.allow_tf32 = args.precision == "bf16"
    model = Gpt(args).to(args.device)
    step_model = torch.compile(model) if args.compile else model
    optimizer = torch.optim.AdamW(model.parameters(), lr=6e-4, weight_decay=0.1, **({"fused": True} if cuda else {}))
    tokens = torch.randint(args.vocab, (args.steps, args.batch, args.context + 1), device=args.device)

    def sync():
        if cuda:
            torch.cuda.synchronize()
    started = None
    for step in range(args.steps):
        if step == args.warmup:
            sync()
            started = time.perf_counter()
        x, y = tokens[step, :, :-1], tokens[step, :, 1:]
        with torch.autocast(device_type="cuda" if cuda else "cpu", dtype=torch.bfloat16,
                            enabled=args.precision == "bf16"):
            logits = step_model(x)
            loss = F.cross_entropy(logits.float().view(-1, args.vocab), y.reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    sync()
    seconds = time.perf_counter() - started
    timed = args.steps - args.warmup
    if not math.isfinite(loss.item()):
        raise SystemExit(f"bench_torch_gpt: error: the loss is {loss.item()}")
    print(f"torch gpt tokens/s {timed * args.batch * args.context / seconds:.0f} ms/step {1000 * seconds / timed:.2f} "
          f"steps {timed} (device {args.device}, precision {args.precision}, compile {args.compile}, "
          f"loss {loss.item():.4f})")


if __name__ == "__main__":
    main()
