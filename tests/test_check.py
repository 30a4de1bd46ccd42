"""`python -m ddpdemo.check`: each rule on a small script with its bug
and on one without; the command's output, exit statuses and silencing;
and reproductions, written anew, of the public training scripts that
tests/data/check/manifest.json records (the scripts themselves are not
stored): a known bug missed before its fix, or any new finding, fails."""
import ast
import json
import pathlib
import re
import subprocess
import sys
import textwrap

import pytest

from ddpdemo import check
from ddpdemo.triage import checkrules, explain

ROOT = pathlib.Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "check"

ZERO_FIRST = """
import torch.distributed as dist
from contextlib import contextmanager


@contextmanager
def torch_distributed_zero_first(local_rank):
    if local_rank not in [-1, 0]:
        dist.barrier()
    yield
    if local_rank == 0:
        dist.barrier()


def create_dataloader(path, rank=-1):
    with torch_distributed_zero_first(rank):
        dataset = list(path)
    return dataset
"""


def run(tmp_path, source, name="train.py"):
    """The findings in one script, as (line, rule)."""
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return [(f["line"], f["rule"]) for f in check.check([str(path)])]


def rules(tmp_path, source):
    return {rule for _, rule in run(tmp_path, source)}


# -- collective-on-some-ranks -------------------------------------------

VAL = ZERO_FIRST + """

def train(rank):
    train_loader = create_dataloader("a", rank=rank)
    if rank in [-1, 0]:
        val_loader = create_dataloader("b", rank={val_rank})
"""


def test_the_val_loader_on_rank_0_reaches_a_barrier_through_two_calls(
        tmp_path):
    found = run(tmp_path, VAL.format(val_rank="rank"))
    line = VAL.format(val_rank="rank").splitlines().index(
        '        val_loader = create_dataloader("b", rank=rank)') + 1
    assert found == [(line, "collective-on-some-ranks")]


def test_the_fix_rank_minus_1_is_followed_into_the_callee(tmp_path):
    assert run(tmp_path, VAL.format(val_rank="-1")) == []


@pytest.mark.parametrize("test", [
    "rank == 0", "RANK in {-1, 0}", "local_rank in [-1, 0]",
    "is_main_process()", "dist.get_rank() == 0",
    "int(os.environ['RANK']) == 0", "not args.local_rank > 0"])
def test_each_rank_test_parts_the_ranks(tmp_path, test):
    source = f"""
    import os
    import torch.distributed as dist
    RANK = int(os.getenv("RANK", -1))


    def step(args, rank, local_rank):
        if {test}:
            dist.barrier()
    """
    assert rules(tmp_path, source) == {"collective-on-some-ranks"}


def test_a_rank_set_to_minus_1_is_not_distributed(tmp_path):
    source = ZERO_FIRST + """

def train():
    rank = -1
    if rank in [-1, 0]:
        loader = create_dataloader("b", rank=rank)
"""
    assert run(tmp_path, source) == []


def test_a_barrier_on_every_rank_and_a_matched_pair_are_clean(tmp_path):
    source = ZERO_FIRST + """

def train(rank):
    loader = create_dataloader("a", rank=rank)
    if rank != -1:             # distributed: every rank alike
        dist.barrier()
    if rank == 0:
        print("rank 0 logs")   # no collective
"""
    assert run(tmp_path, source) == []


def test_an_early_return_on_other_ranks_parts_them(tmp_path):
    source = ZERO_FIRST + """

def val_set(args):
    if not args.is_main_process:
        return None
    return create_dataloader("b", rank=args.local_rank)
"""
    assert rules(tmp_path, source) == {"collective-on-some-ranks"}


# fairseq's Trainer.load_checkpoint (review of issue 47): every rank
# reads the file when a flag says so, else rank 0 alone; the reader's
# barrier is taken only under that flag, so every rank reaches it.
EVERYONE_OR_RANK_0 = """
import torch
import torch.distributed as dist


def read_state(path, everyone=False):
    if everyone:
        dist.barrier()
    return torch.load(path, map_location="cpu")


def resume(path, rank, config):
    everyone = config.sharded or config.tpu
    state = None
    if {test}:
        state = read_state(path, everyone={passed})
    if not everyone:
        box = [state]
        dist.broadcast_object_list(box, 0)
        state = box[0]
    return state
"""


def test_a_flag_or_rank_0_that_the_callee_tests_again_is_clean(tmp_path):
    """On ranks other than 0, entering `if everyone or rank == 0` means
    `everyone` holds, and the callee's barrier is taken by every rank."""
    source = EVERYONE_OR_RANK_0.format(test="everyone or rank == 0",
                                       passed="everyone")
    assert run(tmp_path, source) == []


@pytest.mark.parametrize("test, passed", [
    ("everyone and rank == 0", "everyone"),
    ("config.tpu or rank == 0", "True"),
    ("everyone or rank == 0", "True")])
def test_a_flag_that_does_not_hold_on_every_rank_still_parts(
        tmp_path, test, passed):
    """Rank 0 alone can reach the barrier in each of these."""
    source = EVERYONE_OR_RANK_0.format(test=test, passed=passed)
    assert rules(tmp_path, source) == {"collective-on-some-ranks"}


def test_calls_are_followed_across_the_files_given(tmp_path):
    (tmp_path / "utils.py").write_text(ZERO_FIRST)
    (tmp_path / "train.py").write_text(textwrap.dedent("""
        from utils import create_dataloader


        def main(rank):
            if rank == 0:
                create_dataloader("b", rank=rank)
    """))
    found = check.check([str(tmp_path)])
    assert [(pathlib.Path(f["file"]).name, f["rule"]) for f in found] == [
        ("train.py", "collective-on-some-ranks")]
    assert "create_dataloader() -> torch_distributed_zero_first()" in \
        found[0]["why"]
    assert check.check([str(tmp_path / "train.py")]) == []   # not given


HF_PAIRS = """
import torch


def load_and_cache_examples(args, tokenizer, evaluate=False):
    if args.local_rank not in [-1, 0] and not evaluate:
        torch.distributed.barrier()
    dataset = tokenizer(evaluate)
    if args.local_rank == 0 and not evaluate:
        torch.distributed.barrier()
    return dataset


def evaluate(args, model, tokenizer):
    return load_and_cache_examples(args, tokenizer, evaluate={flag})


def main(args, tokenizer, model):
    if args.local_rank not in [-1, 0]:
        torch.distributed.barrier()
    model = model.load()
    if args.local_rank == 0:
        torch.distributed.barrier()
    dataset = load_and_cache_examples(args, tokenizer, evaluate=False)
    if args.do_eval and args.local_rank in [-1, 0]:
        evaluate(args, model, tokenizer)
"""


def test_paired_barriers_and_a_keyword_that_skips_them(tmp_path):
    """The pattern of Hugging Face's older example scripts: barriers
    paired across two rank tests, and `evaluate=True` skipping them on
    rank 0; with `evaluate=False` rank 0 would wait alone."""
    assert run(tmp_path, HF_PAIRS.format(flag="True")) == []
    assert rules(tmp_path, HF_PAIRS.format(flag="False")) == {
        "collective-on-some-ranks"}


def test_a_model_passed_is_taken_as_not_none(tmp_path):
    """YOLOv7's train.py calls `test.test(..., model=ema.ema)` on rank 0;
    test() builds its own loader (a barrier) only `if not training`,
    where `training = model is not None`."""
    source = ZERO_FIRST + """

def test(model=None, rank=-1):
    training = model is not None
    if not training:
        create_dataloader("val", rank=rank)


def train(rank, ema):
    if rank in [-1, 0]:
        test({args}rank=rank)
"""
    assert run(tmp_path, source.format(args="model=ema.model, ")) == []
    assert rules(tmp_path, source.format(args="")) == {
        "collective-on-some-ranks"}


# -- ddp-forward-on-some-ranks ------------------------------------------

DDP_VAL = """
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main(rank, model, batch):
    model = DDP(model, device_ids=[rank])
    if rank == 0:
        out = {call}(batch)
"""


def test_the_ddp_model_called_on_rank_0_alone(tmp_path):
    assert rules(tmp_path, DDP_VAL.format(call="model")) == {
        "ddp-forward-on-some-ranks"}


def test_its_module_on_rank_0_is_clean(tmp_path):
    assert run(tmp_path, DDP_VAL.format(call="model.module")) == []


def test_a_ddp_attribute_is_its_own_class_s(tmp_path):
    """`self.model = DDP(...)` in one class makes that class's
    `self.model(x)` a DDP forward, not another class's `self.model`."""
    source = """
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP


    class Trainer:
        def __init__(self, model, rank):
            self.rank = rank
            self.model = DDP(model, device_ids=[rank])

        def validate(self, x):
            if self.rank == 0:
                return self.{call}(x)


    class Ema:
        def __init__(self, model, rank):
            self.rank, self.model = rank, model

        def validate(self, x):
            if self.rank == 0:
                return self.model(x)
    """
    assert rules(tmp_path, source.format(call="model")) == {
        "ddp-forward-on-some-ranks"}
    assert run(tmp_path, source.format(call="model.module")) == []


# -- lone-decision ------------------------------------------------------

LONE = """
import torch
import torch.distributed as dist


def train(model, loader, opt):
    for batch in loader:
        loss = model(batch).sum()
        {share}
        if torch.isnan(loss):
            break
        loss.backward()
        opt.step()
"""


def test_a_nan_test_on_this_ranks_loss_breaks_alone(tmp_path):
    assert rules(tmp_path, LONE.format(share="pass")) == {"lone-decision"}


def test_a_loss_shared_by_all_reduce_first_is_clean(tmp_path):
    assert run(tmp_path, LONE.format(share="dist.all_reduce(loss)")) == []


def test_a_break_under_a_rank_test_is_a_lone_decision(tmp_path):
    source = """
    import os
    RANK = int(os.getenv("RANK", -1))


    def train(model, epochs, stopper):
        for epoch in range(epochs):
            model(epoch).sum().backward()
            if RANK in [-1, 0]:
                if stopper(epoch):
                    break
    """
    assert rules(tmp_path, source) == {"lone-decision"}
    assert run(tmp_path, source.replace("RANK in [-1, 0]",
                                        "RANK == -1")) == []


def test_a_stop_broadcast_to_every_rank_is_clean(tmp_path):
    source = """
    import os
    import torch.distributed as dist
    RANK = int(os.getenv("RANK", -1))


    def train(model, epochs, stopper):
        stop = False
        for epoch in range(epochs):
            model(epoch).sum().backward()
            if RANK in [-1, 0]:
                stop = stopper(epoch)
            if RANK != -1:
                box = [stop if RANK == 0 else None]
                dist.broadcast_object_list(box, 0)
                if RANK != 0:
                    stop = box[0]
            if stop:
                break
    """
    assert run(tmp_path, source) == []
    unshared = source.replace("dist.broadcast_object_list(box, 0)", "pass")
    unshared = unshared.replace("stop = box[0]", "pass")
    assert rules(tmp_path, unshared) == {"lone-decision"}


def test_continue_before_backward_only(tmp_path):
    source = """
    import torch


    def train(model, loader, opt):
        for batch in loader:
            loss = model(batch).sum()
            {first}
            {second}
            opt.step()
    """
    skip = "if not torch.isfinite(loss):\n                continue"
    assert rules(tmp_path, source.format(first=skip,
                                         second="loss.backward()")) == {
        "lone-decision"}
    assert run(tmp_path, source.format(first="loss.backward()",
                                       second=skip)) == []


def test_sharing_a_copy_does_not_share_the_original(tmp_path):
    source = """
    import torch.distributed as dist


    def train(model, loader):
        for batch in loader:
            loss = model(batch).sum()
            copy = loss.detach().clone()
            dist.all_reduce(copy)
            if {test}:
                break
            loss.backward()
    """
    assert run(tmp_path, source.format(test="copy.item() > 10")) == []
    assert rules(tmp_path, source.format(test="loss.item() > 10")) == {
        "lone-decision"}


# -- sampler-without-set-epoch ------------------------------------------

SAMPLER = """
from torch.utils.data import DataLoader, DistributedSampler


def main(dataset, epochs):
    sampler = DistributedSampler(dataset)
    loader = DataLoader(dataset, sampler=sampler)
    for epoch in range(epochs):
        {set_epoch}
        for batch in loader:
            pass
"""


def test_a_sampler_without_set_epoch(tmp_path):
    assert rules(tmp_path, SAMPLER.format(set_epoch="pass")) == {
        "sampler-without-set-epoch"}


def test_a_sampler_with_set_epoch_is_clean(tmp_path):
    assert run(tmp_path, SAMPLER.format(
        set_epoch="sampler.set_epoch(epoch)")) == []


def test_an_evaluation_sampler_needs_no_set_epoch(tmp_path):
    """DeepSpeed-Chat's step 1 (review of issue 47): a loss averaged over
    the evaluation set is the same in any order, so only the training
    sampler's missing set_epoch is found."""
    source = """
    from torch.utils.data import DataLoader, DistributedSampler


    def main(train_data, eval_data, dataset_val, epochs):
        train_sampler = DistributedSampler(train_data)
        eval_sampler = DistributedSampler(eval_data)
        val_sampler = DistributedSampler(dataset=dataset_val)
        loaders = [DataLoader(d, sampler=s) for d, s in (
            (train_data, train_sampler), (eval_data, eval_sampler),
            (dataset_val, val_sampler))]
        for epoch in range(epochs):
            for batch in loaders[0]:
                pass
    """
    lines = textwrap.dedent(source).splitlines()
    line = lines.index("    train_sampler = DistributedSampler(train_data)")
    assert run(tmp_path, source) == [(line + 1,
                                      "sampler-without-set-epoch")]


# -- seeds ----------------------------------------------------------------

SEED = """
import torch
import torch.distributed as dist
from torchvision import transforms


def main(rank, dataset):
    dist.init_process_group("nccl")
    torch.manual_seed({seed})
    aug = transforms.RandomResizedCrop(224)
    train, val = torch.utils.data.random_split(dataset, [0.9, 0.1]{gen})
"""


def test_one_constant_seed_on_every_rank_that_augments(tmp_path):
    assert rules(tmp_path, SEED.format(seed="0", gen=", generator=g")) == {
        "same-seed-on-every-rank"}


def test_a_seed_counts_only_with_augmentation_it_imports(tmp_path):
    """A folder of unrelated scripts (accelerate's examples/, review of
    issue 47): a constant seed in a script that neither augments nor
    imports a file that does is not found; one that imports it is."""
    (tmp_path / "augment.py").write_text(textwrap.dedent("""
    from torchvision import transforms
    crop = transforms.RandomResizedCrop(224)
    """))
    lm = textwrap.dedent("""
    import torch
    import torch.distributed as dist
    {imports}

    dist.init_process_group("nccl")
    torch.manual_seed(42)
    """)
    (tmp_path / "lm.py").write_text(lm.format(imports=""))
    found = check.check([str(tmp_path)])
    assert found == []
    (tmp_path / "lm.py").write_text(lm.format(imports="import augment"))
    found = check.check([str(tmp_path)])
    assert [(pathlib.Path(f["file"]).name, f["rule"]) for f in found] == [
        ("lm.py", "same-seed-on-every-rank")]


def test_a_split_after_a_per_rank_seed(tmp_path):
    assert rules(tmp_path, SEED.format(seed="1 + rank", gen="")) == {
        "split-after-per-rank-seed"}


def test_a_per_rank_seed_and_a_shared_generator_are_clean(tmp_path):
    assert run(tmp_path, SEED.format(seed="1 + rank",
                                     gen=", generator=g")) == []


# -- devices --------------------------------------------------------------

DEVICE = """
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main(local_rank, model):
    dist.init_process_group("nccl")
    {before}
    torch.cuda.set_device(local_rank)
    model = DDP(model.cuda(), device_ids=[local_rank])
"""


def test_cuda_before_set_device(tmp_path):
    assert rules(tmp_path, DEVICE.format(before="x = torch.ones(1).cuda()")) \
        == {"cuda-before-set-device"}


def test_cuda_after_set_device_is_clean(tmp_path):
    assert run(tmp_path, DEVICE.format(before="pass")) == []


def test_cuda_in_another_branch_than_set_device_is_clean(tmp_path):
    source = """
    import torch


    def main(gpu, model):
        if gpu is None:
            model.cuda()
        else:
            torch.cuda.set_device(gpu)
    """
    assert run(tmp_path, source) == []


NO_DEVICE = """
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main(model):
    dist.init_process_group("nccl"{init})
    model = DDP(model.cuda())
"""


def test_ddp_without_any_device(tmp_path):
    assert rules(tmp_path, NO_DEVICE.format(init="")) == {
        "no-device-for-rank"}


def test_a_device_id_at_init_is_enough(tmp_path):
    assert run(tmp_path, NO_DEVICE.format(init=", device_id=device")) == []


# -- checkpoints ------------------------------------------------------------

CKPT = """
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main(rank, model, path):
    torch.cuda.set_device(rank)
    model = DDP(model.cuda(), device_ids=[rank])
    {body}
"""


SAVED = "torch.save(model.module.state_dict(), path)\n    "


def test_torch_load_without_map_location(tmp_path):
    assert rules(tmp_path, CKPT.format(
        body=SAVED + "state = torch.load(path)")) == {
        "load-without-map-location"}
    assert run(tmp_path, CKPT.format(
        body=SAVED + "state = torch.load(path, map_location='cpu')")) == []


def test_a_load_of_a_file_the_job_did_not_save_is_left_alone(tmp_path):
    """Only a DDP job's own checkpoint is known to hold CUDA tensors:
    a converted or CPU-offloaded file (litgpt's scripts, PyTorch's FSDP
    example) is not flagged."""
    assert run(tmp_path, CKPT.format(body="state = torch.load(path)")) == []


def test_torch_load_of_a_label_cache_is_clean(tmp_path):
    """YOLOv7 reads its labels cache with torch.load: no CUDA tensors in
    it, so no map_location is needed; a checkpoint's load is found."""
    assert run(tmp_path, CKPT.format(
        body=SAVED + "labels = torch.load(path)")) == []
    assert rules(tmp_path, CKPT.format(
        body=SAVED + "ckpt = torch.load(path)")) == {
        "load-without-map-location"}


def test_saving_the_wrapper_s_state_dict(tmp_path):
    assert rules(tmp_path, CKPT.format(
        body="torch.save(model.state_dict(), path)")) == {
        "save-ddp-wrapper"}
    assert run(tmp_path, CKPT.format(
        body="torch.save(model.module.state_dict(), path)")) == []


def test_loading_on_rank_0_after_wrapping(tmp_path):
    body = ("if rank == 0:\n        model.module.load_state_dict("
            "torch.load(path, map_location='cpu'))")
    assert rules(tmp_path, CKPT.format(body=body)) == {
        "load-on-some-ranks-after-ddp"}
    every = ("model.module.load_state_dict("
             "torch.load(path, map_location='cpu'))")
    assert run(tmp_path, CKPT.format(body=every)) == []


# -- reductions --------------------------------------------------------------

INT = """
import torch
import torch.distributed as dist


def mean_tokens(n, world_size):
    tokens = torch.tensor([n], dtype={dtype})
    dist.all_reduce(tokens)
    tokens /= world_size
    return tokens
"""


def test_an_integer_tensor_divided_in_place_after_all_reduce(tmp_path):
    assert rules(tmp_path, INT.format(dtype="torch.int64")) == {
        "int-divide-after-all-reduce"}


def test_a_float_tensor_divided_in_place_is_clean(tmp_path):
    assert run(tmp_path, INT.format(dtype="torch.float32")) == []


REDUCE = """
import torch.distributed as dist


def best(loss, rank):
    dist.reduce(loss, dst=0)
    {read}
"""


def test_a_reduce_s_result_read_on_every_rank(tmp_path):
    assert rules(tmp_path, REDUCE.format(
        read="if loss < 1:\n        return True")) == {"reduce-read-off-dst"}


def test_a_reduce_s_result_read_on_dst_is_clean(tmp_path):
    assert run(tmp_path, REDUCE.format(
        read="if rank == 0:\n        print(loss)")) == []


# -- the command ------------------------------------------------------

def command(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "ddpdemo.check", *args],
                          capture_output=True, text=True, cwd=cwd,
                          timeout=60)


def test_the_command_prints_file_line_rule_why_fix_and_section(tmp_path):
    (tmp_path / "train.py").write_text(VAL.format(val_rank="rank"))
    done = command(str(tmp_path / "train.py"))
    assert done.returncode == 1, done.stderr
    first, fix, see, total = done.stdout.splitlines()
    assert re.match(r".*train\.py:\d+: collective-on-some-ranks: `barrier`",
                    first), first
    assert fix.startswith("    fix: ") and total == "1 finding"
    assert see == "    see: " + check.link("collective-on-some-ranks")
    (tmp_path / "train.py").write_text(VAL.format(val_rank="-1"))
    done = command(str(tmp_path / "train.py"))
    assert (done.returncode, done.stdout) == (0, "no findings\n")


def test_json_and_the_site_flag(tmp_path):
    (tmp_path / "train.py").write_text(VAL.format(val_rank="rank"))
    done = command("--json", "--site", "http://localhost:8000",
                   str(tmp_path / "train.py"))
    [finding] = json.loads(done.stdout)
    assert finding["rule"] == "collective-on-some-ranks"
    assert finding["link"] == ("http://localhost:8000/book/"
                               "evaluation.html#val-deadlock")
    assert set(finding) == {"file", "line", "rule", "why", "fix", "link"}


@pytest.mark.parametrize("name, text, says", [
    ("missing.py", None, "no such file"),
    ("notes.txt", "hello", "not a Python file"),
    ("broken.py", "def f(:\n", "syntax error"),
    ("latin.py", b"x = '\xe9'\n", "not UTF-8")])
def test_bad_input_is_one_line_and_status_2(tmp_path, name, text, says):
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    elif text is not None:
        path.write_text(text)
    done = command(str(path))
    assert done.returncode == 2 and done.stdout == ""
    assert len(done.stderr.splitlines()) == 1 and says in done.stderr, \
        done.stderr
    assert "Traceback" not in done.stderr


def test_a_comment_silences_a_finding_on_its_line(tmp_path):
    source = VAL.format(val_rank="rank")
    line = '        val_loader = create_dataloader("b", rank=rank)'
    for comment, silenced in [
            ("  # ddpdemo-check: ignore", True),
            ("  # ddpdemo-check: ignore[collective-on-some-ranks]", True),
            ("  # ddpdemo-check: ignore[lone-decision]", False)]:
        text = source.replace(line, line + comment)
        assert (run(tmp_path, text) == []) is silenced, comment


def test_the_console_script_is_declared():
    text = (ROOT / "pyproject.toml").read_text()
    assert 'ddpdemo-check = "ddpdemo.triage.check:main"' in text


def test_every_rule_links_a_section_the_book_has():
    assert check.SITE == explain.SITE
    for rule, (page, label) in checkrules.SECTIONS.items():
        text = (ROOT / "book" / f"{page}.ipynb").read_text()
        assert label is None or f"({label})=" in text, rule


def test_every_rule_has_a_test_here():
    text = pathlib.Path(__file__).read_text()
    for rule in checkrules.SECTIONS:
        assert f'"{rule}"' in text, rule


# -- the public scripts, as reproductions -----------------------------

MANIFEST = json.loads((DATA / "manifest.json").read_text())
REPRO = DATA / "repro"
_EXPECT = re.compile(r"^\s*# expect: ([a-z-]+)\s*$")


def expected(path):
    """The findings a reproduction marks: `# expect: rule` on its own
    line names the finding the check must give on the next line."""
    lines = path.read_text().splitlines()
    return sorted((number + 1, match.group(1))
                  for number, line in enumerate(lines, start=1)
                  if (match := _EXPECT.match(line)))


def test_the_scripts_are_at_least_12_with_known_bugs_before_and_after():
    cases = MANIFEST["cases"]
    assert len(cases) >= 12
    befores = [c for c in cases if c["name"].endswith("_before")]
    assert len(befores) >= 3
    for case in befores:
        after = case["name"].replace("_before", "_after")
        assert any(c["name"] == after for c in cases), after


def test_each_case_is_reproduced_and_its_findings_were_true():
    """Every case names reproductions that exist, every file in repro/
    belongs to a case, and each rule a case's read findings name is
    marked in its reproductions (the record and the tests agree)."""
    named = set()
    for case in MANIFEST["cases"]:
        assert case["reproduction"], case["name"]
        marked = set()
        for name in case["reproduction"]:
            assert (REPRO / name).is_file(), name
            marked |= {rule for _, rule in expected(REPRO / name)}
        named |= set(case["reproduction"])
        assert all(f["verdict"] == "true" for f in case["findings"])
        assert {f["rule"] for f in case["findings"]} <= marked, case["name"]
        assert case["rerun"].startswith(
            f"git clone https://github.com/{case['repo']} && ")
        assert " && python -m ddpdemo.check " in case["rerun"]
        assert case["commit"].split()[0].rstrip("^")[:9] in case["rerun"]
    assert named == {p.name for p in REPRO.glob("*.py")}


@pytest.mark.parametrize("name", sorted(p.name for p in REPRO.glob("*.py")))
def test_a_reproduction_gives_exactly_its_marked_findings(name):
    """A known bug missed before its fix, a finding after it, or any new
    finding on a clean script (a false alarm) fails."""
    found = check.check([str(REPRO / name)])
    got = sorted((f["line"], f["rule"]) for f in found)
    assert got == expected(REPRO / name), json.dumps(found, indent=1)


def test_the_reproductions_cover_the_known_bugs_before_and_after():
    """Each known bug's reproduction before its fix has a finding, the
    one after its fix has none of that rule."""
    pairs = [("yolov5_val_loader", "collective-on-some-ranks"),
             ("sparseml_val_set", "collective-on-some-ranks"),
             ("particleflow", "collective-on-some-ranks"),
             ("yolov5_early_stop", "lone-decision")]
    for stem, rule in pairs:
        before = check.check([str(REPRO / f"{stem}_before.py")])
        after = check.check([str(REPRO / f"{stem}_after.py")])
        assert rule in {f["rule"] for f in before}, stem
        assert rule not in {f["rule"] for f in after}, stem


def test_the_stop_broadcast_to_every_rank_is_not_the_finding():
    """YOLOv5 #8345: the broadcast decision's break is clean; only the
    latent callback return on rank 0 is found."""
    path = REPRO / "yolov5_stop_broadcast.py"
    lines = path.read_text().splitlines()
    found = check.check([str(path)])
    assert [lines[f["line"] - 1].strip() for f in found] == [
        "if callbacks.stop_training:"]


def test_the_book_s_own_example_scripts():
    """The book's scripts: the chapter 5 script's broken path is found
    (its --fix is chosen at run time, so the check cannot tell); the
    training script a reader copies is clean."""
    examples = ROOT / "ddpdemo" / "examples"
    helpers = [str(ROOT / "ddpdemo" / "loaders.py"),
               str(ROOT / "ddpdemo" / "ordering.py")]
    assert check.check([str(examples / "train_ddp.py")]) == []
    found = check.check([str(examples / "val_dataloader_deadlock.py"),
                         *helpers])
    assert [f["rule"] for f in found] == ["collective-on-some-ranks"]


def test_the_no_device_finding_quotes_the_installed_torch():
    """no-device-for-rank quotes torch's barrier: the words must still be
    in the installed torch (a torch upgrade that drops them fails)."""
    import torch.distributed.distributed_c10d as c10d
    why = next(why for module, line, rule, why, fix in checkrules.devices(
        _program("""
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
dist.init_process_group("nccl")
model = DDP(net.cuda())
""")))
    quoted = why.split('"')[1]
    source = " ".join(pathlib.Path(c10d.__file__).read_text().split())
    assert quoted in source, quoted


def _program(text):
    from ddpdemo.triage.checkflow import Program
    from ddpdemo.triage.checkread import Module
    return Program([Module("t.py", ast.parse(text), text.splitlines())])
