"""Reproduction, written anew for ddpdemo's tests (no line copied), of
ultralytics/yolov5's train.py at commit 548745181 ("EarlyStopper
updates", #4679): the early-stopping break is limited to runs without
DDP (RANK == -1), so no rank leaves the epoch loop alone. The check
must be silent (it was a false alarm while the rules were written).
The unfixed shape is yolov5_early_stop_before.py.
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
            if RANK == -1 and stopper(epoch=epoch, fitness=score):
                break
