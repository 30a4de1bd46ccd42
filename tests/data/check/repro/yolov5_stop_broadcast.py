"""Reproduction, written anew for ddpdemo's tests (no line copied), of
ultralytics/yolov5's train.py at commit
6935a54e603d634f6b0a9026604dc5875d1ca990 (#8345), the DDP fix of early
stopping: rank 0 decides, broadcast_object_list hands the decision to
every rank, and every rank breaks together (the check must be silent
on that break).

What is still found there, read by hand as a real but latent hazard:
inside the per-batch block only the main process runs, a callback's
stop_training flag makes rank 0 alone return from train(); no callback
in the repository sets it, so it fires only with a user's callback.
Run by tests/test_check.py; each `# expect: rule` comment names the
finding the check must give on the line below it, and no other.
"""
import os

import torch.distributed as dist

RANK = int(os.getenv("RANK", "-1"))


def train(model, loader, optimizer, epochs, stopper, evaluate, callbacks):
    stop = False
    for epoch in range(epochs):
        for images, targets in loader:
            loss = model(images, targets)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            if RANK in {-1, 0}:
                callbacks.batch_done(loss.item())
                # expect: lone-decision
                if callbacks.stop_training:
                    return
        if RANK in {-1, 0}:
            score = evaluate(model.module if RANK != -1 else model)
            stop = stopper(epoch=epoch, fitness=score)
        if RANK != -1:
            box = [stop if RANK == 0 else None]
            dist.broadcast_object_list(box, 0)
            if RANK != 0:
                stop = box[0]
        if stop:
            break
