"""A small training script marked for `tracekit capture` (README: Profile your own model).

    tracekit capture --profiler torch -- python examples/train_mlp.py
    tracekit capture --profiler nsys -- python examples/train_mlp.py

Runs on the CPU (or a GPU when there is one): an MLP on random data, 3 warm-up and 5 measured steps.
"""

import torch

from tracekit import annotate

device = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
model = torch.nn.Sequential(
    torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)
).to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
batches = [(torch.randn(64, 256, device=device), torch.randint(0, 10, (64,), device=device)) for _ in range(8)]


@annotate.range("optimizer")
def update() -> None:
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


for inputs, labels in annotate.steps(batches, warmup=3):
    with annotate.range("forward"):
        loss = torch.nn.functional.cross_entropy(model(inputs), labels)
    with annotate.range("backward"):
        loss.backward()
    update()
print(f"final loss {loss.item():.4f}")
