"""PyTorch peer of examples/fashion_mnist/main.c: the same CNN (conv 1->32 3x3 pad 1, ReLU, max
pool 2, conv 32->64 3x3 pad 1, ReLU, max pool 2, flatten, linear 3136->128, ReLU, dropout 0.25,
linear 128->10), the same normalisation (mean 0.2860, std 0.3530), batch size (128, shuffled every
epoch), optimizer (Adam, lr 1e-3, cosine schedule stepped per epoch) and test batches (500), on
the same Fashion-MNIST IDX files, read with gzip + numpy. Two threads, like the Ember runs.

Run with Debian's Python (the one with torch):
    /usr/bin/python3 bench/fashion_mnist_torch.py [--epochs N] [--limit N] [--data DIR]
Prints, per epoch, the training seconds (forward, backward and optimizer over every batch), the
evaluation seconds, and the test accuracy; the last line is tab-separated for bench/fashion_mnist.sh:
    result  <train seconds per epoch>  <eval seconds per epoch>  <test accuracy>  <train items>
"""
import argparse
import gzip
import os
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

MEAN, STD = 0.2860, 0.3530


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load(data, prefix):
    x = read_idx(os.path.join(data, f"{prefix}-images-idx3-ubyte.gz"))
    y = read_idx(os.path.join(data, f"{prefix}-labels-idx1-ubyte.gz"))
    x = (torch.from_numpy(x.astype(np.float32) / 255.0) - MEAN) / STD
    return x.unsqueeze(1).contiguous(), torch.from_numpy(y.astype(np.int64))


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(1, 32, 3, padding=1)
        self.c2 = nn.Conv2d(32, 64, 3, padding=1)
        self.l1 = nn.Linear(64 * 7 * 7, 128)
        self.drop = nn.Dropout(0.25)
        self.l2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.c1(x)), 2)
        x = F.max_pool2d(F.relu(self.c2(x)), 2)
        x = torch.flatten(x, 1)
        return self.l2(self.drop(F.relu(self.l1(x))))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--limit", type=int, default=0, help="train on the first N images only")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--data", default=os.environ.get("EMBER_DATA_FASHION",
                                                     "/usr/share/datasets/fashion-mnist"))
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(7)
    xtr, ytr = load(args.data, "train")
    xte, yte = load(args.data, "t10k")
    if args.limit > 0:
        xtr, ytr = xtr[: args.limit], ytr[: args.limit]
    n = xtr.shape[0]
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"{n} train / {xte.shape[0]} test images", flush=True)

    net = CNN()
    opt = torch.optim.Adam(net.parameters(), lr=args.lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, args.epochs)
    g = torch.Generator().manual_seed(7)
    train_s = eval_s = acc = 0.0
    for epoch in range(args.epochs):
        net.train()
        t0 = time.perf_counter()
        perm = torch.randperm(n, generator=g)
        total = 0.0
        for i in range(0, n, args.batch):
            idx = perm[i: i + args.batch]
            loss = F.cross_entropy(net(xtr[idx]), ytr[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total += loss.item() * idx.numel()
        sched.step()
        train_s = time.perf_counter() - t0

        net.eval()
        t0 = time.perf_counter()
        correct = 0
        with torch.no_grad():
            for i in range(0, xte.shape[0], 500):
                correct += (net(xte[i: i + 500]).argmax(1) == yte[i: i + 500]).sum().item()
        eval_s = time.perf_counter() - t0
        acc = correct / xte.shape[0]
        print(f"epoch {epoch + 1}/{args.epochs}: loss {total / n:.4f} test accuracy {100 * acc:.2f}% "
              f"train {train_s:.1f}s ({n / train_s:.0f} images/s) eval {eval_s:.1f}s", flush=True)
    print(f"result\t{train_s:.3f}\t{eval_s:.3f}\t{acc:.4f}\t{n}")


if __name__ == "__main__":
    main()
