"""Record tests/data/fr_gloo_2ranks.pkl: real Flight Recorder dumps from a
2-rank gloo Cluster (torch 2.13), taken from stuck ranks by ddpdemo's
responder. Run: python tests/data/record_fr.py"""
import os
import pickle
import sys

import cloudpickle

import ddpdemo

cloudpickle.register_pickle_by_value(sys.modules[__name__])
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                   "fr_gloo_2ranks.pkl")


def lonely():
    import torch
    import torch.distributed as dist
    dist.all_reduce(torch.ones(4))
    dist.barrier()
    if dist.get_rank() == 0:
        dist.barrier()


def mismatch():
    import torch
    import torch.distributed as dist
    if dist.get_rank() == 0:
        dist.barrier()
    else:
        dist.all_reduce(torch.ones(3))


def main():
    out = {}
    with ddpdemo.Cluster(world_size=2, backend="gloo", timeout=10) as c:
        for name, fn in (("lonely", lonely), ("mismatch", mismatch)):
            try:
                c.run(fn, timeout=2)
            except ddpdemo.HangError as error:
                out[name] = {r: {k: v for k, v in rec.items() if k != "raw"}
                             for r, rec in error.ledger.records.items()}
                print(error.ledger)
    with open(OUT, "wb") as f:
        pickle.dump(out, f)


if __name__ == "__main__":
    main()
