"""Reproduction, written anew for ddpdemo's tests (no line copied), of
ultralytics/yolov5's train.py at commit 93cc01574 ("Add EarlyStopping
feature", #4576): the early-stopping test and its break sit inside the
block only the main process runs (RANK -1 or 0), so in a DDP run rank 0
alone leaves the epoch loop and the others wait in their next backward.
The fixes are yolov5_early_stop_after.py (#4679) and
yolov5_stop_broadcast.py (#8345).

Run by tests/test_check.py; each `# expect: rule` comment names the
finding the check must give on the line below it, and no other.
"""
import os

import torch
import torch.distributed as dist

RANK = int(os.getenv("RANK", "-1"))


def train(model, loader, optimizer, epochs, stopper, evaluate, weights):
    for epoch in range(epochs):
        if RANK != -1:
            order = torch.arange(len(weights)) if RANK == 0 else \
                torch.zeros(len(weights), dtype=torch.long)
            dist.broadcast(order, 0)
        for images, targets in loader:
            loss = model(images, targets)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        if RANK in [-1, 0]:
            score = evaluate(model.module if RANK != -1 else model)
            torch.save(optimizer.state_dict(), "last.pt")
            # expect: lone-decision
            if stopper(epoch=epoch, fitness=score):
                break
