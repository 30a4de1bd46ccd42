"""A clean DDP script, written anew for ddpdemo's tests (no line
copied), shaped like pytorch/examples' imagenet/main.py at commit
77f55b912142e11fcfdf5b530231fb9c52f181e8, keeping the shapes that gave
false alarms while the rules were written: `.cuda()` in a branch other
than the one that calls set_device, and a resume whose torch.load picks
map_location per branch. The check must give no finding.
"""
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def place(model, args):
    if not torch.cuda.is_available():
        return model
    if args.distributed:
        if args.gpu is not None:
            torch.cuda.set_device(args.gpu)
            model.cuda(args.gpu)
            return DDP(model, device_ids=[args.gpu])
        model.cuda()
        return DDP(model)
    if args.gpu is not None:
        return model.cuda(args.gpu)
    return torch.nn.DataParallel(model).cuda()


def resume(model, optimizer, args):
    if args.gpu is None:
        saved = torch.load(args.resume)
    else:
        saved = torch.load(args.resume, map_location=f"cuda:{args.gpu}")
    model.load_state_dict(saved["state_dict"])
    optimizer.load_state_dict(saved["optimizer"])
    return saved["epoch"]


def worker(gpu, args, build, loaders):
    args.gpu = gpu
    if args.distributed:
        args.rank = args.rank * args.gpus + gpu
        dist.init_process_group("nccl", init_method=args.url,
                                world_size=args.world_size, rank=args.rank)
    model = place(build(), args)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    start = resume(model, optimizer, args) if args.resume else 0
    train_loader, sampler = loaders(args)
    for epoch in range(start, args.epochs):
        if args.distributed:
            sampler.set_epoch(epoch)
        for images, labels in train_loader:
            loss = torch.nn.functional.cross_entropy(model(images), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        if not args.distributed or args.rank % args.gpus == 0:
            torch.save({"epoch": epoch + 1,
                        "state_dict": model.state_dict(),
                        "optimizer": optimizer.state_dict()}, "last.pth")
